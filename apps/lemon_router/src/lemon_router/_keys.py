"""Conversation keys and queue modes: small closed vocabularies shared by the router modules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from lemon_router.errors import InvalidRunRequestError

QueueMode = Literal["collect", "followup", "steer", "steer_backlog", "redirect", "interrupt"]
QUEUE_MODES: tuple[QueueMode, ...] = get_args(QueueMode)

NATIVE_ENGINE = "lemon"


def parse_queue_mode(value: str | None) -> QueueMode:
    """``None`` means the default ``collect``; any other unknown value is an error (no guessing)."""
    if value is None:
        return "collect"
    for mode in QUEUE_MODES:
        if value == mode:
            return mode
    raise InvalidRunRequestError(
        "queue_mode", f"{value!r} is not one of {', '.join(QUEUE_MODES)} (omit it for collect)"
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class ConversationKey:
    """What serialises runs: the native resume session when one resolved, else the session key.

    String forms: ``resume:lemon:<session_id>`` and ``session:<session_key>``.
    """

    kind: Literal["resume", "session"]
    value: str

    @classmethod
    def for_resume(cls, token_value: str) -> ConversationKey:
        return cls(kind="resume", value=token_value)

    @classmethod
    def for_session(cls, session_key: str) -> ConversationKey:
        return cls(kind="session", value=session_key)

    def __str__(self) -> str:
        if self.kind == "resume":
            return f"resume:{NATIVE_ENGINE}:{self.value}"
        return f"session:{self.value}"
