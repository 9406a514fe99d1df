"""The channel host: one plugin wired to the session port, the outbox and access control.

Inbound, in the order the plugin hands messages over: a person who is not allowed gets a
pairing code once, in a private chat only (in a group they get no answer at all), and
nothing else (nothing reaches the session port); an allowed person's
button press resolves an approval; ``/new``, ``/cancel``, ``/model``, ``/status`` (and
``/start``, ``/help``) are answered here; anything else (other ``/`` words included: the model
may understand them) becomes a :class:`~lemon_core.execution.RunRequest` on the peer's stable
session key, submitted through the :class:`~lemon_core.sessions.SessionPort` after that
session's pump watches it (so nothing the run says is missed).

An update the platform delivers again (its acknowledgement was lost, a restart) is dropped:
each taken message id is remembered (``SEEN_TABLE``, 24 hours). A button press resolves an
approval only when that approval is pending in the session of the chat it was pressed in.

Outbound: every pump's intents and every notice go through the :class:`Outbox`.

Bounds: at most ``max_sessions`` pumps (the least recently used one stops beyond it; its
session is watched again on its next message); the last ``MAX_RECEIPTS`` receipts are kept for
``statistics()``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, Final

import msgspec

from lemon_channels._access import PairingStore, PeerSettings, PeerStore
from lemon_channels._coalescer import SessionPump, TerminalRuns
from lemon_channels._outbox import Outbox
from lemon_channels.errors import ChannelsError, ChannelsUsageError
from lemon_core.bus import Bus, ConsumerClass, Delivery
from lemon_core.channels import (
    ChannelPlugin,
    ChannelState,
    ChannelStatus,
    DeliveryIntent,
    DeliveryRoute,
    InboundMessage,
    IntentKind,
    session_key_for,
)
from lemon_core.execution import Receipt, RouterUnavailableError, RunRequest
from lemon_core.sessions import SessionPort
from lemon_core.store import OutboxStore, Store
from lemon_core.tasks import Supervisor

__all__ = ["MAX_RECEIPTS", "STATUS_TABLE", "ChannelHost"]

_log = logging.getLogger("lemon_channels.host")

MAX_RECEIPTS: Final = 1024
#: The store table of inbound messages already taken (a redelivered update is dropped).
SEEN_TABLE: Final = "channel_inbound_seen"
#: How long a taken message is remembered: Telegram keeps an unacknowledged update 24 hours.
SEEN_TTL_MS: Final = 24 * 3600 * 1000
#: Taken messages also remembered in memory (copies handled at the same time).
MAX_RECENT_INBOUND: Final = 4096
#: The store table holding each channel's last status (read by ``lemon channels status``).
STATUS_TABLE: Final = "channel_status"
_DECISIONS: Final = frozenset(
    {"approve_once", "approve_session", "approve_agent", "approve_global", "deny"}
)
_HELP: Final = (
    "Send a message to talk to the agent.\n"
    "/new: start a new session\n/cancel: stop the running answer\n"
    "/model [provider:model]: show or set the model\n/status: what the session is doing"
)


class ChannelHost:
    """See the module docstring."""

    def __init__(
        self,
        *,
        plugin: ChannelPlugin[Any],
        port: SessionPort,
        store: Store,
        bus: Bus | None,
        allowed_users: frozenset[str] = frozenset(),
        agent_id: str = "default",
        edit_interval_s: float = 1.0,
        max_sessions: int = 1024,
        outbox: Outbox | None = None,
        ingress_entries: int = 256,
    ) -> None:
        if ingress_entries < 1 or max_sessions < 1:
            raise ChannelsUsageError(
                f"ingress_entries and max_sessions must be at least 1, got {ingress_entries} "
                f"and {max_sessions}"
            )
        if edit_interval_s < 0:
            raise ChannelsUsageError(f"edit_interval_s must be >= 0, got {edit_interval_s}")
        self.plugin = plugin
        self._port = port
        self._store = store
        self._allowed = allowed_users
        self._agent_id = agent_id
        self._interval = edit_interval_s
        self._max_sessions = max_sessions
        self._ingress_entries = ingress_entries
        self.outbox = outbox or Outbox(plugin=plugin, store=OutboxStore(store), bus=bus)
        self.pairing = PairingStore(store)
        self._peers = PeerStore(store)
        self._terminal = TerminalRuns()
        self._pumps: OrderedDict[str, tuple[SessionPump, asyncio.Task[None]]] = OrderedDict()
        self._supervisor = Supervisor(f"{plugin.channel_id}-pumps")
        self.receipts: deque[Receipt] = deque(maxlen=MAX_RECEIPTS)
        self._strangers = 0
        self._duplicates = 0
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._commands = 0
        self._submitted = 0
        self._status_lock = asyncio.Lock()
        self._status_written = asyncio.Condition()
        self._status_tasks: set[asyncio.Task[None]] = set()
        self.recorded: ChannelStatus | None = None
        """The status last written to the store."""
        # A plugin that changes its status by itself (TelegramPlugin: polling refused, then
        # answered again) reports it here, so the record ``lemon channels status`` reads follows.
        if hasattr(plugin, "on_status"):
            plugin.on_status = self.status_changed

    @property
    def channel_id(self) -> str:
        return self.plugin.channel_id

    async def start(self) -> ChannelStatus:
        """Resume the outbox, then start the plugin (a FAILED status is returned, not raised;
        the pending outbox entries then wait in the store for a later start)."""
        resumed = await self.outbox.start()
        if resumed:
            _log.info("%s: resuming %d pending message(s)", self.channel_id, resumed)
        status = await self.plugin.start(self._on_inbound)
        if status.state is not ChannelState.RUNNING:
            await self.outbox.close()
        await self.record_status()
        return status

    async def stop(self) -> None:
        await self.plugin.stop()
        await self._supervisor.close(0.0)
        await self.outbox.close(0.0)
        if self._status_tasks:
            await asyncio.gather(*self._status_tasks, return_exceptions=True)
        await self.record_status()

    def status_changed(self, status: ChannelStatus) -> None:
        """The plugin's status changed while it runs: record it (in the background, in
        order: each write records the plugin's status at the time it is written)."""
        level = logging.WARNING if status.state is ChannelState.FAILED else logging.INFO
        _log.log(level, "%s: now %s: %s", self.channel_id, status.state, status.detail)
        task = asyncio.get_running_loop().create_task(self.record_status())
        self._status_tasks.add(task)
        task.add_done_callback(self._status_tasks.discard)

    async def record_status(self) -> None:
        async with self._status_lock:
            status = self.plugin.status()
            data = msgspec.to_builtins(status)
            data["updated_ms"] = time.time_ns() // 1_000_000
            data["outbox"] = msgspec.to_builtins(self.outbox.statistics())
            try:
                await self._store.put(STATUS_TABLE, self.channel_id, data)
            except Exception as exc:  # status is informative; never fail the channel for it
                _log.warning("%s: status not recorded: %r", self.channel_id, exc)
                return
            async with self._status_written:
                self.recorded = status
                self._status_written.notify_all()

    async def until_recorded(self, predicate: Callable[[ChannelStatus], bool]) -> ChannelStatus:
        """Wait until the status last written to the store satisfies ``predicate``."""
        async with self._status_written:
            await self._status_written.wait_for(
                lambda: self.recorded is not None and predicate(self.recorded)
            )
        assert self.recorded is not None
        return self.recorded

    def statistics(self) -> dict[str, Any]:
        return {
            "channel": msgspec.to_builtins(self.plugin.status()),
            "outbox": msgspec.to_builtins(self.outbox.statistics()),
            "pumps": [msgspec.to_builtins(p.statistics()) for p, _ in self._pumps.values()],
            "strangers_ignored": self._strangers,
            "duplicates_dropped": self._duplicates,
            "commands": self._commands,
            "submitted": self._submitted,
        }

    # -- inbound ---------------------------------------------------------------------------

    async def _allowed_user(self, message: InboundMessage) -> bool:
        if message.user_id in self._allowed:
            return True
        return await self.pairing.is_paired(self.channel_id, message.user_id)

    async def _on_inbound(self, message: InboundMessage) -> None:
        if not await self._allowed_user(message):
            self._strangers += 1
            if message.callback is not None:
                await self.plugin.answer_callback(message.callback.callback_id, "not allowed")
                return
            if message.route.peer_kind != "dm":
                return  # in a group, nobody unknown is answered (a code only in private)
            code = await self.pairing.request(
                self.channel_id,
                message.user_id,
                peer_id=message.route.peer_id,
                user_name=message.user_name,
            )
            if code is not None:
                await self.notice(
                    message.route,
                    f"This bot is private. Your pairing code is **{code}**: ask its owner to "
                    f"run `lemon channels pair approve {code}`.",
                )
            return
        if await self._seen(message):
            self._duplicates += 1
            return
        if message.callback is not None:
            await self._on_callback(message)
            return
        text = message.text.strip()
        peer_key = self._peer_key(message)
        settings = await self._peers.get(peer_key)
        if text.startswith("/"):
            command, _, arg = text.partition(" ")
            command = command.split("@", 1)[0].lower()
            if await self._command(message, command, arg.strip(), peer_key, settings):
                self._commands += 1
                return
        if not text and not message.images:
            return
        key = self._session_key(message, settings)
        try:
            await self._pump(key, message.route)
        except ChannelsError as exc:
            _log.warning("%s", exc)
            await self.notice(message.route, "The agent is not reachable right now; try later.")
            return
        request = RunRequest(
            origin=self.channel_id,
            session_key=key,
            prompt=text,
            agent_id=self._agent_id,
            model=settings.model,
            images=tuple(
                {"type": "image", "data": image.data, "mime_type": image.mime_type}
                for image in message.images
            ),
            meta={"channel_id": self.channel_id, "user_id": message.user_id},
        )
        try:
            receipt = await self._port.submit(request)
        except RouterUnavailableError:
            await self.notice(message.route, "The agent is not running right now; try later.")
            return
        self._submitted += 1
        self.receipts.append(receipt)

    async def _seen(self, message: InboundMessage) -> bool:
        """Whether this message (or button press) was already taken; marks it taken.

        A platform delivers an update again when its acknowledgement was lost (Telegram: the
        offset of a daemon stopped before its next poll; a webhook answer that did not arrive).
        Marked before it is handled (a run is never started twice; a crash in between loses
        the message, which the person sees and can send again), in the store so a restart
        remembers, and in memory for copies handled at the same time.
        """
        route = message.route
        if message.callback is not None:
            key = f"{route.channel_id}/cb/{message.callback.callback_id}"
        elif message.message_id is not None:
            key = f"{route.channel_id}/{route.account_id}/{route.peer_id}/{message.message_id}"
        else:
            return False
        if key in self._recent:
            return True
        self._recent[key] = None
        while len(self._recent) > MAX_RECENT_INBOUND:
            self._recent.popitem(last=False)
        if await self._store.get(SEEN_TABLE, key) is not None:
            return True
        await self._store.put(SEEN_TABLE, key, 1, ttl_ms=SEEN_TTL_MS)
        return False

    def _peer_key(self, message: InboundMessage) -> str:
        route = message.route
        return f"{route.channel_id}/{route.account_id}/{route.peer_id}/{route.thread_id or ''}"

    def _session_key(self, message: InboundMessage, settings: PeerSettings) -> str:
        sub = f"s{settings.generation}" if settings.generation else None
        return session_key_for(message, agent_id=self._agent_id, sub_id=sub)

    async def _command(
        self,
        message: InboundMessage,
        command: str,
        arg: str,
        peer_key: str,
        settings: PeerSettings,
    ) -> bool:
        route = message.route
        key = self._session_key(message, settings)
        if command in ("/start", "/help"):
            await self.notice(route, _HELP)
        elif command == "/new":
            await self._port.cancel(session_key=key)
            await self._peers.put(
                peer_key, msgspec.structs.replace(settings, generation=settings.generation + 1)
            )
            await self.notice(route, "New session started.")
        elif command == "/cancel":
            result = await self._port.cancel(session_key=key)
            await self.notice(
                route,
                f"Cancelled {result.cancelled}." if result.cancelled else "Nothing to cancel.",
            )
        elif command == "/model":
            if not arg:
                await self.notice(
                    route, f"Model: {settings.model or 'the default'} (set: /model provider:model)"
                )
            elif ":" not in arg or " " in arg:
                await self.notice(route, f"`{arg[:100]}` is not of the form provider:model.")
            else:
                await self._peers.put(peer_key, msgspec.structs.replace(settings, model=arg))
                await self.notice(route, f"Model set to `{arg}` for this chat.")
        elif command == "/status":
            snapshot = await self._port.snapshot(key)
            lines = [f"Session `{key}`"]
            if snapshot.active is not None:
                lines.append(f"Running: {snapshot.active.phase} ({snapshot.active.run_id})")
            else:
                lines.append("Idle.")
            if snapshot.queued:
                lines.append(f"Queued: {len(snapshot.queued)}")
            if snapshot.pending_approvals:
                lines.append(f"Waiting for {len(snapshot.pending_approvals)} approval(s)")
            lines.append(f"Model: {settings.model or 'the default'}")
            await self.notice(route, "\n".join(lines))
        else:
            return False
        return True

    async def _on_callback(self, message: InboundMessage) -> None:
        assert message.callback is not None
        callback = message.callback
        kind, _, rest = callback.data.partition("|")
        approval_id, _, decision = rest.partition("|")
        if kind != "ap" or not approval_id or decision not in _DECISIONS:
            await self.plugin.answer_callback(callback.callback_id, "unknown button")
            return
        # A button resolves an approval of the session of the chat it was pressed in only:
        # button data naming another chat's approval (forged, or a copied keyboard) does not.
        key = self._session_key(message, await self._peers.get(self._peer_key(message)))
        snapshot = await self._port.snapshot(key)
        for _ in range(3):
            if snapshot.status == "ok":
                break
            snapshot = await self._port.snapshot(key)
        reason = "decided"
        if approval_id in {a.approval_id for a in snapshot.pending_approvals}:
            result = await self._port.resolve_approval(approval_id, decision)
            if result.resolved:
                await self.plugin.answer_callback(
                    callback.callback_id, "denied" if decision == "deny" else "approved"
                )
                return
            reason = result.reason or reason
        # Not pending (here): the prompt pressed is stale (say, after a restart); say so on it.
        await self.plugin.answer_callback(callback.callback_id, "no longer pending")
        await self._emit(
            DeliveryIntent(
                intent_id=f"int_{uuid.uuid4().hex}",
                kind=IntentKind.APPROVAL_RESOLVED,
                route=message.route,
                slot=f"approval:{approval_id}",
                text=f"This approval is no longer pending ({reason}).",
                approval_id=approval_id,
            )
        )

    # -- outbound --------------------------------------------------------------------------

    async def notice(self, route: DeliveryRoute, text: str) -> None:
        intent_id = f"int_{uuid.uuid4().hex}"
        await self._emit(
            DeliveryIntent(
                intent_id=intent_id,
                kind=IntentKind.NOTICE,
                route=route,
                slot=f"notice:{intent_id}",
                text=text,
            )
        )

    async def _emit(self, intent: DeliveryIntent) -> None:
        if intent.kind in (IntentKind.STREAM_SNAPSHOT, IntentKind.TOOL_STATUS) and (
            intent.run_id in self._terminal and intent.kind is IntentKind.STREAM_SNAPSHOT
        ):
            return  # a late transient edit of a run that already ended
        await self.outbox.admit(intent)

    def _ingress(self) -> Delivery:
        """A pump's ingress: the ``router_coalescer`` class (65,536 bytes per event, tagged)
        with ``ingress_entries`` entries (256 by default)."""
        return Delivery.for_consumer(
            ConsumerClass.ROUTER_COALESCER,
            max_entries=self._ingress_entries,
            claim_on_get=False,
        )

    async def _pump(self, key: str, route: DeliveryRoute) -> SessionPump:
        existing = self._pumps.get(key)
        if existing is not None and not existing[1].done():
            self._pumps.move_to_end(key)
            return existing[0]
        pump = SessionPump(
            port=self._port,
            session_key=key,
            route=route,
            emit=self._emit,
            terminal=self._terminal,
            edit_interval_s=self._interval,
            ingress=self._ingress,
        )
        task = self._supervisor.spawn(pump.run(), name=f"pump-{key}")
        self._pumps[key] = (pump, task)
        while len(self._pumps) > self._max_sessions:
            _, (_, old) = self._pumps.popitem(last=False)
            old.cancel()
        # The pump may fail before it watches (the port refused): never wait for it forever
        # (the plugin hands messages over one at a time: every chat would wait).
        ready = asyncio.ensure_future(pump.ready())
        try:
            await asyncio.wait({ready, task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
        if not pump.watching:
            self._pumps.pop(key, None)
            raise ChannelsError(f"{self.channel_id}: cannot follow session {key}")
        return pump
