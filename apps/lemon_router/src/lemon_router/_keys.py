"""Queue-mode parsing. The vocabularies themselves (``QueueMode``, ``ConversationKey``, the
native engine name) are lemon_core's, defined once in :mod:`lemon_core.execution`."""

from __future__ import annotations

from typing import get_args

from lemon_core.execution import ConversationKey, QueueMode
from lemon_router.errors import InvalidRunRequestError

__all__ = ["QUEUE_MODES", "ConversationKey", "QueueMode", "parse_queue_mode"]

QUEUE_MODES: tuple[QueueMode, ...] = get_args(QueueMode)


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
