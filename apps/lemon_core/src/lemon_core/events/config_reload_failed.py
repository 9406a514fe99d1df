"""``config_reload_failed`` on ``system``."""

from __future__ import annotations

from typing import ClassVar

from lemon_core.events._payload import Payload

__all__ = ["ConfigReloadFailed"]


class ConfigReloadFailed(Payload, frozen=True, kw_only=True):
    """A configuration reload failed; the previous configuration stays in force."""

    event_type: ClassVar[str] = "config_reload_failed"

    reload_id: str
    reason: str | None = None
    error: str
