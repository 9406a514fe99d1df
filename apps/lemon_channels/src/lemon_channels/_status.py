"""What ``lemon channels status`` and ``lemon doctor`` read: each channel's last recorded
status (written by the daemon at start, stop and failure) and the outbox backlog."""

from __future__ import annotations

from typing import Any

from lemon_channels._host import STATUS_TABLE
from lemon_channels._section import ChannelsConfig
from lemon_core.config import Config
from lemon_core.store import OutboxStore, Store

__all__ = ["channel_statuses"]


async def channel_statuses(config: Config, store: Store) -> list[dict[str, Any]]:
    """One row per configured channel: ``channel``, ``configured``, ``state``, ``detail``,
    ``mode``, ``updated_ms``, ``pending`` (outbound messages waiting in the outbox)."""
    rows: list[dict[str, Any]] = []
    telegram = config.section(ChannelsConfig).telegram
    if telegram is None:
        return rows
    recorded = await store.get(STATUS_TABLE, "telegram") or {}
    pending = await OutboxStore(store).pending("telegram", limit=100_000)
    rows.append(
        {
            "channel": "telegram",
            "configured": True,
            "enabled": telegram.enabled,
            "mode": telegram.mode,
            "state": recorded.get("state", "never started") if telegram.enabled else "disabled",
            "detail": recorded.get("detail", "the daemon has not run this channel yet"),
            "updated_ms": recorded.get("updated_ms"),
            "pending": len(pending),
            "allowed_users": len(telegram.allowed_users),
        }
    )
    return rows
