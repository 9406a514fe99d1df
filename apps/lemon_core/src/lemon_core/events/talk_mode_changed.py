"""``talk_mode_changed`` on ``system``."""

from __future__ import annotations

from typing import ClassVar

from lemon_core.events._payload import Payload

__all__ = ["TalkModeChanged"]


class TalkModeChanged(Payload, frozen=True, kw_only=True):
    """A session switched talk mode (e.g. ``"voice"`` or ``"text"``)."""

    event_type: ClassVar[str] = "talk_mode_changed"

    session_key: str
    mode: str
