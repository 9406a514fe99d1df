"""lemon_channels' :class:`~lemon_core.channels.ChannelSupervision`: automation's terminal
facts (a cron summary, a heartbeat alert) admitted to the target channel's durable outbox.

A target is ``<channel>:<peer id>[:<thread id>]``. The channel builds a ``notice``
:class:`~lemon_core.channels.DeliveryIntent` on the slot ``supervision:<intent id>`` with the
consumer's ``intent_id``, renders it and admits it (a repeated intent id is a ``duplicate``:
nothing new is sent). The message ids the platform confirmed are read back from the outbox's
slot record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lemon_core.channels import (
    DeliveryIntent,
    DeliveryRoute,
    IntentKind,
    SupervisionReceipt,
    parse_target,
)
from lemon_core.errors import UsageError
from lemon_core.store import OutboxStore, Store

if TYPE_CHECKING:
    from lemon_channels._boot import Channels

__all__ = ["ChannelsSupervision"]


def _slot(intent_id: str) -> str:
    return f"supervision:{intent_id}"


class ChannelsSupervision:
    """See the module docstring (``channels``: the app's running hosts and failures)."""

    def __init__(self, channels: Channels, store: Store) -> None:
        self._channels = channels
        self._outbox = OutboxStore(store)  # read-only here: the slots' confirmed message ids

    def check_target(self, target: str) -> str | None:
        try:
            parsed = parse_target(target)
        except UsageError as exc:
            return str(exc)
        if parsed.channel_id in self._channels.hosts:
            return None
        failed = self._channels.failed.get(parsed.channel_id)
        if failed is not None:
            return f"channel {parsed.channel_id} is not running: {failed.detail}"
        return (
            f"channel {parsed.channel_id!r} is not configured in this daemon "
            f"(see [channels.{parsed.channel_id}] in config.toml)"
        )

    async def submit(
        self,
        target: str,
        *,
        intent_id: str,
        text: str,
        run_id: str | None = None,
        session_key: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> SupervisionReceipt:
        reason = self.check_target(target)
        if reason is not None:
            raise UsageError(reason)
        parsed = parse_target(target)
        host = self._channels.hosts[parsed.channel_id]
        peer = parsed.peer_id
        kind = "unknown"
        if peer.lstrip("-").isdigit():  # Telegram's convention: negative ids are groups
            kind = "group" if peer.startswith("-") else "dm"
        route = DeliveryRoute(
            channel_id=parsed.channel_id,
            account_id=host.plugin.status().account_id or "bot",
            peer_kind=kind,  # type: ignore[arg-type]  # one of the PeerKinds
            peer_id=peer,
            thread_id=parsed.thread_id,
        )
        intent = DeliveryIntent(
            intent_id=intent_id,
            kind=IntentKind.NOTICE,
            route=route,
            slot=_slot(intent_id),
            text=text,
            run_id=run_id,
            session_key=session_key,
            meta=dict(meta or {}),
        )
        admitted = await host.outbox.admit(intent)
        return SupervisionReceipt(
            intent_id=intent_id, status="admitted" if admitted else "duplicate"
        )

    async def message_ids(self, target: str, intent_id: str) -> tuple[str, ...]:
        parsed = parse_target(target)
        ids = await self._outbox.slot_messages(parsed.channel_id, _slot(intent_id))
        return tuple(ids)
