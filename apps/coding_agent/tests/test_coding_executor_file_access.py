"""Through the real gateway and the scripted provider: a run with nobody to ask (a one-shot
without a terminal) never sends a secret or an outside file to the model."""

from __future__ import annotations

import json
from pathlib import Path

from coding_agent import CodingExecutor
from lemon_ai import OpenAICompletionsProvider, default_catalogue
from lemon_core.bus import Bus
from lemon_core.execution import ExecutionCommand
from lemon_gateway import Gateway
from lemon_platform_test.providers import ScriptedProviderServer, ScriptedToolCall, ScriptedTurn

SESSION = "agent:coder:main"
KEY = "sk-live-do-not-leak-0123456789"


def _read(id: str, path: str) -> ScriptedToolCall:
    return ScriptedToolCall(id=id, name="read", arguments={"path": path})


async def test_a_run_without_an_approver_refuses_secrets_and_outside_reads(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    home, work, outside = tmp_path / "home", tmp_path / "work", tmp_path / "outside"
    for d in (home, work, outside):
        d.mkdir()
    (home / "secrets.env").write_text(f"OPENAI_API_KEY={KEY}\n")
    (work / ".env").write_text(f"TOKEN={KEY}\n")
    (work / "app.py").write_text("print('in the workspace')\n")
    (outside / "private.txt").write_text(f"private {KEY}\n")
    (work / "shortcut.txt").symlink_to(outside / "private.txt")
    scripted_provider.script(
        ScriptedTurn(tool_calls=(
            _read("c1", str(home / "secrets.env")), _read("c2", ".env"),
            _read("c3", str(outside / "private.txt")), _read("c4", "shortcut.txt"),
            _read("c5", "app.py"),
            ScriptedToolCall(id="c6", name="grep", arguments={"pattern": "sk-", "hidden": True}),
        )),
        ScriptedTurn(text="done"),
    )  # fmt: skip
    provider = OpenAICompletionsProvider(api_key="sk-test")
    model = default_catalogue().resolve(
        "openai:gpt-4o-mini", base_url=scripted_provider.openai_base_url
    )
    executor = CodingExecutor(home=home, model=model, provider=provider)  # no approvals
    try:
        async with Gateway(bus=Bus(), executor=executor) as gateway:
            completion = await gateway.submit_execution(
                ExecutionCommand(run_id="r1", session_key=SESSION, prompt="read everything",
                                 conversation_key=("session", SESSION), cwd=str(work))
            )  # fmt: skip
    finally:
        await provider.aclose()
    assert completion.ok
    sent = json.dumps([r.body for r in scripted_provider.requests])
    assert KEY not in sent
    results = {m["tool_call_id"]: m["content"] for m in scripted_provider.requests[1].body[
        "messages"] if m["role"] == "tool"}  # fmt: skip
    assert "Lemon's own secrets file" in results["c1"]
    assert "secret file" in results["c2"]
    for call in ("c3", "c4"):
        assert f"to reach {(outside / 'private.txt').resolve()}" in results[call]
        assert "outside the workspace" in results[call]
        assert "no approval channel" in results[call]
    assert "in the workspace" in results["c5"]
    assert "secret file(s) not searched: .env" in results["c6"]
    assert "links leading out of the searched directory" in results["c6"]
