"""The channel-supervision seam: how automation reaches a person on a channel.

A cron job or heartbeat names a *target* (``<channel>:<peer id>[:<thread id>]``, e.g.
``telegram:123456789`` or ``telegram:-1001234:42``). At terminalization automation submits
the run's terminal fact (its summary or alert text) through the :class:`ChannelSupervision`
lemon_channels registers under :data:`CHANNEL_SUPERVISION`; the channel builds the
:class:`~lemon_core.channels.DeliveryIntent`, renders it and admits it to its durable outbox.
The consumer never resolves a channel's namespace or constructs platform payloads. The
``intent_id`` the consumer gives (automation: derived from the ``cron_run_id``) makes a
repeated submission a ``duplicate``: one fire is delivered once. A delivery counts as sent
only once the platform confirmed a message id (:meth:`ChannelSupervision.message_ids`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, Protocol, runtime_checkable

import msgspec

from lemon_core.errors import UsageError
from lemon_core.execution import Capability

__all__ = [
    "CHANNEL_SUPERVISION",
    "ChannelSupervision",
    "SupervisionReceipt",
    "SupervisionTarget",
    "parse_target",
]


class SupervisionTarget(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed target: the channel, the peer (chat) id and an optional thread."""

    channel_id: str
    peer_id: str
    thread_id: str | None = None

    def __str__(self) -> str:
        tail = "" if self.thread_id is None else f":{self.thread_id}"
        return f"{self.channel_id}:{self.peer_id}{tail}"


def parse_target(text: str) -> SupervisionTarget:
    """``<channel>:<peer id>[:<thread id>]``; :class:`UsageError` naming ``channel``."""
    parts = text.strip().split(":")
    if len(parts) not in (2, 3) or not all(p.strip() for p in parts):
        raise UsageError(
            f"channel: {text!r} is not a target; write CHANNEL:PEER_ID[:THREAD_ID] "
            "(for example telegram:123456789)"
        )
    channel, peer, *thread = (p.strip() for p in parts)
    if not channel.isidentifier():
        raise UsageError(f"channel: {channel!r} is not a channel name (for example telegram)")
    return SupervisionTarget(
        channel_id=channel, peer_id=peer, thread_id=thread[0] if thread else None
    )


class SupervisionReceipt(msgspec.Struct, frozen=True, kw_only=True):
    """What a submission did: ``admitted`` to the outbox (durable), or a ``duplicate`` of an
    intent id already admitted (nothing new is sent)."""

    intent_id: str
    status: Literal["admitted", "duplicate"]


@runtime_checkable
class ChannelSupervision(Protocol):
    """The runtime's channels as automation sees them (loop-only)."""

    def check_target(self, target: str) -> str | None:
        """Why nothing can be delivered to ``target`` now (a bad target, a channel that is
        not configured or not running); ``None``: it can."""
        ...

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
        """Admit ``text`` for ``target`` durably (sent by the channel's outbox). Raises
        :class:`UsageError` when :meth:`check_target` gives a reason."""
        ...

    async def message_ids(self, target: str, intent_id: str) -> tuple[str, ...]:
        """The platform message ids the outbox recorded for ``intent_id`` (empty: not
        confirmed yet, so the delivery is ``unverified``)."""
        ...


#: The runtime's channel supervision (registered by lemon_channels at boot).
CHANNEL_SUPERVISION: Final[Capability[ChannelSupervision]] = Capability(
    "ChannelSupervision", ChannelSupervision
)
