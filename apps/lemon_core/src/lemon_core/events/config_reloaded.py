"""``config_reloaded`` on ``system``."""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from lemon_core.events._payload import Payload

__all__ = ["ConfigReloaded"]


class ConfigReloaded(Payload, frozen=True, kw_only=True):
    """The configuration was reloaded; ``diff`` never carries secret values."""

    event_type: ClassVar[str] = "config_reloaded"

    reload_id: str
    reason: str | None = None
    changed_sources: list[str] = msgspec.field(default_factory=list)
    changed_paths: list[str] = msgspec.field(default_factory=list)
    diff: dict[str, Any] | None = None
