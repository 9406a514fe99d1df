"""Resume resolution: which native session a run continues (router-owned chat-state readback).

Rules:

* an explicit token on the request must be native (engine ``"lemon"``); any other engine is a
  :class:`~lemon_router.errors.ResumeError` (never silently dropped, never executed);
* with no explicit token the router resumes automatically from the session's chat state,
  unless ``meta["disable_auto_resume"]`` is true;
* a stored non-native token is quarantined: it is never resumed (the session starts fresh).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from lemon_core.execution import NATIVE_ENGINE, ResumeToken
from lemon_router._keys import ConversationKey
from lemon_router.errors import ResumeError


class ChatStateReader(Protocol):
    """The part of ``lemon_core.store.ChatStateStore`` the resolver reads."""

    async def resume_token(self, session_key: str) -> ResumeToken | None:
        """The native token to resume ``session_key`` with, or None."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class ResumeDecision:
    """What resolved: the token (or None for a fresh session) and where it came from."""

    token: ResumeToken | None
    source: Literal["explicit", "chat_state", "none", "disabled"]

    def conversation_key(self, session_key: str) -> ConversationKey:
        """The resume session when one resolved, else the session key."""
        if self.token is not None:
            return ConversationKey.for_resume(self.token.value)
        return ConversationKey.for_session(session_key)


def auto_resume_disabled(meta: Mapping[str, Any]) -> bool:
    """``meta["disable_auto_resume"]`` is true (any truthy value)."""
    return bool(meta.get("disable_auto_resume"))


def check_explicit(token: ResumeToken | None) -> ResumeToken | None:
    """Reject an explicit non-native token with a clear error."""
    if token is not None and not token.is_native:
        raise ResumeError(
            f"cannot resume a {token.engine!r} session: only native {NATIVE_ENGINE!r} sessions "
            "can be resumed; drop the resume token to start a fresh session"
        )
    return token


async def resolve_resume(
    *,
    session_key: str,
    explicit: ResumeToken | None,
    meta: Mapping[str, Any],
    chat_state: ChatStateReader | None,
) -> ResumeDecision:
    """Apply the rules in the module docstring."""
    token = check_explicit(explicit)
    if token is not None:
        return ResumeDecision(token=token, source="explicit")
    if auto_resume_disabled(meta):
        return ResumeDecision(token=None, source="disabled")
    if chat_state is None:
        return ResumeDecision(token=None, source="none")
    stored = await chat_state.resume_token(session_key)
    if stored is None or not stored.is_native:
        return ResumeDecision(token=None, source="none")
    return ResumeDecision(token=stored, source="chat_state")
