"""lemon_core.execution.ConversationKey: the one definition, a tuple the gateway treats as
opaque and the router builds with for_session / for_resume."""

from __future__ import annotations

import pytest

from lemon_core.execution import ConversationKey, ExecutionCommand, ExecutionContractError


def test_the_two_forms_and_their_text() -> None:
    session = ConversationKey.for_session("agent:a:main")
    resume = ConversationKey.for_resume("abc")
    assert (session.kind, session.value, str(session)) == (
        "session",
        "agent:a:main",
        "session:agent:a:main",
    )
    assert (resume.kind, resume.value, str(resume)) == ("resume", "abc", "resume:lemon:abc")


def test_it_is_the_tuple_the_gateway_hashes() -> None:
    key = ConversationKey.for_session("s")
    assert key == ("session", "s")
    assert {key: 1}[("session", "s")] == 1
    command = ExecutionCommand(run_id="r", session_key="s", prompt="p", conversation_key=key)
    assert command.conversation_key == ("session", "s")


@pytest.mark.parametrize("parts", [(), ("",), ("session", "")])
def test_a_malformed_key_is_refused(parts: tuple[str, ...]) -> None:
    with pytest.raises(ExecutionContractError, match="conversation key"):
        ConversationKey(parts)
