"""``secret_changed`` on ``system``: never carries the secret's value."""

from __future__ import annotations

from typing import ClassVar

from lemon_core.events._payload import Payload

__all__ = ["SecretChanged"]


class SecretChanged(Payload, frozen=True, kw_only=True):
    """A secret was put or deleted (``owner``, ``name`` and ``action`` only)."""

    event_type: ClassVar[str] = "secret_changed"

    owner: str
    name: str
    action: str
