"""The outbox: every outbound message admitted durably before it is sent, then delivered.

:meth:`Outbox.admit` renders an intent with the channel's plugin and writes the payloads to the
store (:class:`~lemon_core.store.OutboxStore`) before anything is sent. One worker per chat
delivers that chat's entries in admission order (chats do not wait for each other):

* a slot's earlier messages are edited, new parts are sent, and each message id is recorded as
  soon as the platform confirms it, so a restart resumes after the last confirmed part (and an
  edit repeated after a restart changes nothing the person sees);
* a failure is retried with exponential backoff (a ``lemon_core.Backoff``: ``base_backoff_s``
  doubling up to ``max_backoff_s``, up to a fifth shorter at random), never sooner than the
  platform's ``retry_after`` (honoured up to 300 s); a permanent refusal or
  ``max_attempts`` failures give the entry up (observed, never silently). A rate limit (a
  refusal with ``retry_after``) is flow control, not a failure of the message: it does not
  count as an attempt, and only ``max_rate_limited`` of them in a row give the entry up. A
  plugin that raises counts as a failed attempt (one bad entry never stalls its chat);
* a transient entry (stream snapshot, tool status) not yet started is superseded by a newer
  one on its slot, and dropped when the slot's final text arrives;
* a duplicate intent id is refused at admission (across restarts too);
* each dispatch publishes one ``channel_delivery`` event on ``channels`` with a bounded
  ``text_preview``; publishing is gated on ``bus.running()`` and a failing bus is logged and
  counted, never allowed to break a send.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from lemon_core.backoff import Backoff
from lemon_core.bus import CHANNELS, Bus
from lemon_core.channels import (
    TRANSIENT_KINDS,
    ChannelPlugin,
    DeliveryIntent,
    IntentKind,
    SendResult,
)
from lemon_core.events import ChannelDelivery
from lemon_core.store import OutboxEntry, OutboxStore
from lemon_core.tasks import Supervisor

__all__ = ["PREVIEW_CHARS", "Outbox", "OutboxStatistics"]

_log = logging.getLogger("lemon_channels.outbox")

#: The bound of a ``channel_delivery`` event's ``text_preview``.
PREVIEW_CHARS: Final = 200
_ERROR_CHARS: Final = 300
_TRANSIENT: Final = frozenset(str(k) for k in TRANSIENT_KINDS)


class OutboxStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """Counters of one channel's outbox."""

    channel_id: str
    admitted: int
    duplicates: int
    superseded: int
    sent: int
    edited: int
    retried: int
    given_up: int
    pending: int
    chats: int
    events_published: int
    event_failures: int
    last_error: str | None


@dataclass(slots=True)
class _Chat:
    entries: deque[OutboxEntry] = field(default_factory=deque)
    busy: OutboxEntry | None = None
    task: asyncio.Task[None] | None = None


class Outbox:
    """See the module docstring. ``start()`` loads what a previous process left pending."""

    def __init__(
        self,
        *,
        plugin: ChannelPlugin[Any],
        store: OutboxStore,
        bus: Bus | None,
        max_attempts: int = 8,
        max_rate_limited: int = 100,
        base_backoff_s: float = 0.5,
        max_backoff_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._plugin = plugin
        self._store = store
        self._bus = bus
        self._max_attempts = max_attempts
        self._max_rate_limited = max_rate_limited
        self._backoff = Backoff(initial=base_backoff_s, cap=max_backoff_s)
        self._clock = clock
        self._channel = plugin.channel_id
        self._chats: dict[str, _Chat] = {}
        self._supervisor = Supervisor(f"{self._channel}-outbox")
        self._admit_lock = asyncio.Lock()
        self._idle = asyncio.Event()
        self._idle.set()
        self._changed = asyncio.Event()
        self._c = dict.fromkeys(
            (
                "admitted",
                "duplicates",
                "superseded",
                "sent",
                "edited",
                "retried",
                "given_up",
                "events",
                "event_failures",
            ),
            0,
        )
        self._last_error: str | None = None

    @property
    def channel_id(self) -> str:
        return self._channel

    async def start(self) -> int:
        """Queue the entries a previous process left pending; returns how many."""
        pending = await self._store.pending(self._channel, limit=100_000)
        for entry in pending:
            self._enqueue(entry)
        return len(pending)

    async def close(self, grace_s: float = 0.0) -> None:
        """Stop the workers (pending entries stay in the store for the next start)."""
        await self._supervisor.close(grace_s)

    async def until(self, predicate: Callable[[OutboxStatistics], bool]) -> None:
        """Returns once ``predicate(statistics())`` holds (re-tested after every dispatch)."""
        while not predicate(self.statistics()):
            self._changed.clear()
            await self._changed.wait()

    async def drained(self) -> None:
        """Returns once nothing is pending in this process (for tests and shutdown)."""
        await self._idle.wait()

    # -- admission -------------------------------------------------------------------------

    async def admit(self, intent: DeliveryIntent) -> bool:
        """Render ``intent`` and admit it durably; False for a duplicate intent id (or a
        transient intent folded into a pending one)."""
        payloads = tuple(self._plugin.encode_payload(p) for p in self._plugin.render(intent))
        preview = intent.text[:PREVIEW_CHARS]
        peer = _chat_key(intent)
        async with self._admit_lock:
            chat = self._chats.get(peer)
            if chat is not None:
                if intent.kind in TRANSIENT_KINDS:
                    for index, queued in enumerate(chat.entries):
                        if queued.slot == intent.slot and queued.kind in _TRANSIENT:
                            updated = await self._store.replace_payloads(queued, payloads, preview)
                            chat.entries[index] = updated
                            self._c["superseded"] += 1
                            return False
                elif intent.kind is IntentKind.FINAL_TEXT:
                    for queued in [e for e in chat.entries if e.slot == intent.slot]:
                        if queued.kind in _TRANSIENT:
                            chat.entries.remove(queued)
                            await self._store.complete(queued)
                            self._c["superseded"] += 1
            entry = await self._store.admit(
                channel_id=self._channel,
                intent_id=intent.intent_id,
                kind=str(intent.kind),
                slot=intent.slot,
                peer_id=peer,
                payloads=payloads,
                route=msgspec.to_builtins(intent.route),
                run_id=intent.run_id,
                session_key=intent.session_key,
                text_preview=preview,
            )
            if entry is None:
                self._c["duplicates"] += 1
                return False
            self._c["admitted"] += 1
            self._enqueue(entry)
            return True

    def _enqueue(self, entry: OutboxEntry) -> None:
        chat = self._chats.setdefault(entry.peer_id, _Chat())
        chat.entries.append(entry)
        self._idle.clear()
        if chat.task is None and not self._supervisor.closed:
            chat.task = self._supervisor.spawn(
                self._work(entry.peer_id, chat), name=f"{self._channel}-chat-{entry.peer_id}"
            )

    # -- delivery --------------------------------------------------------------------------

    async def _work(self, peer: str, chat: _Chat) -> None:
        try:
            while True:
                async with self._admit_lock:  # admission edits queued entries under it
                    if not chat.entries:
                        break
                    entry = chat.entries.popleft()
                    chat.busy = entry
                try:
                    await self._deliver(entry)
                except Exception as exc:  # the store failed: the entry stays for a restart
                    self._last_error = f"{type(exc).__name__}: {str(exc)[:_ERROR_CHARS]}"
                    _log.warning(
                        "%s: a %s message not delivered: %r", self._channel, entry.kind, exc
                    )
                finally:
                    chat.busy = None
        finally:
            chat.task = None
            if not chat.entries:
                self._chats.pop(peer, None)
            if not any(c.entries or c.busy for c in self._chats.values()):
                self._idle.set()

    async def _deliver(self, entry: OutboxEntry) -> None:
        rate_limited = 0
        while True:
            wait = entry.next_attempt_ms / 1000 - time.time()
            if wait > 0:
                await asyncio.sleep(wait)  # the retry's deadline (retry_after / backoff)
            started = self._clock()
            try:
                result = await self._dispatch(entry)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a plugin bug or an undecodable payload: a failure
                _log.warning(
                    "%s: delivering a %s message raised %r", self._channel, entry.kind, exc
                )
                result = SendResult(
                    ok=False, error=f"{type(exc).__name__}: {str(exc)[:_ERROR_CHARS]}"
                )
            self._observe(entry, result, started)
            if result.ok:
                await self._store.complete(entry)
                self._changed.set()
                return
            # The platform's flow control (a 429 with retry_after) is not the message's fault:
            # it delays the message, and only ``max_rate_limited`` of them in a row give it up.
            limited = result.retry_after is not None and not result.permanent
            rate_limited = rate_limited + 1 if limited else 0
            attempts = entry.attempts + (0 if limited else 1)
            self._last_error = result.error
            if (
                result.permanent
                or attempts >= self._max_attempts
                or rate_limited >= self._max_rate_limited
            ):
                self._c["given_up"] += 1
                _log.warning(
                    "%s: gave up a %s message after %d attempt(s): %s",
                    self._channel,
                    entry.kind,
                    attempts,
                    result.error,
                )
                await self._store.complete(entry)
                self._changed.set()
                return
            delay = self._backoff.delay(attempts + rate_limited, retry_after=result.retry_after)
            entry = msgspec.structs.replace(
                entry,
                attempts=attempts,
                next_attempt_ms=int((time.time() + delay) * 1000),
                last_error=result.error,
            )
            await self._store.update(entry)
            self._c["retried"] += 1
            self._changed.set()

    async def _dispatch(self, entry: OutboxEntry) -> SendResult:
        """Send or edit every part of the entry not yet confirmed."""
        ids = await self._store.slot_messages(self._channel, entry.slot)
        last: SendResult = SendResult(ok=True)
        for index, data in enumerate(entry.payloads):
            payload = self._plugin.decode_payload(data)
            if index < len(ids):
                last = await self._plugin.edit(ids[index], payload)
                if last.ok:
                    self._c["edited"] += 1
                    continue
                if not last.permanent:
                    return last
                # The message to edit is gone (deleted, too old): show a new one instead.
            last = await self._plugin.deliver(payload)
            if not last.ok:
                return last
            self._c["sent"] += 1
            if last.message_id is not None:
                ids = await self._store.record_slot_message(
                    self._channel, entry.slot, index, last.message_id
                )
        return last

    def _observe(self, entry: OutboxEntry, result: SendResult, started: float) -> None:
        """One ``channel_delivery`` per dispatch; a failing bus never breaks the send."""
        bus = self._bus
        if bus is None:
            return
        try:
            if not bus.running():
                return
            route = entry.route
            payload = ChannelDelivery(
                intent_id=entry.intent_id,
                run_id=entry.run_id,
                session_key=entry.session_key,
                channel_id=self._channel,
                account_id=_opt(route.get("account_id")),
                peer_kind=_opt(route.get("peer_kind")),
                peer_id=_opt(route.get("peer_id")),
                thread_id=_opt(route.get("thread_id")),
                kind=entry.kind,
                text_preview=entry.text_preview[:PREVIEW_CHARS],
                ok=result.ok,
                error=None if result.error is None else result.error[:_ERROR_CHARS],
                duration_ms=int((self._clock() - started) * 1000),
                ts_ms=time.time_ns() // 1_000_000,
            )
            bus.broadcast_event(CHANNELS, "channel_delivery", payload)
            self._c["events"] += 1
        except Exception as exc:  # the observation must never break a real send
            self._c["event_failures"] += 1
            _log.warning("%s: channel_delivery not published: %r", self._channel, exc)

    def statistics(self) -> OutboxStatistics:
        c = self._c
        return OutboxStatistics(
            channel_id=self._channel,
            admitted=c["admitted"],
            duplicates=c["duplicates"],
            superseded=c["superseded"],
            sent=c["sent"],
            edited=c["edited"],
            retried=c["retried"],
            given_up=c["given_up"],
            pending=sum(len(ch.entries) + (ch.busy is not None) for ch in self._chats.values()),
            chats=len(self._chats),
            events_published=c["events"],
            event_failures=c["event_failures"],
            last_error=self._last_error,
        )


def _chat_key(intent: DeliveryIntent) -> str:
    route = intent.route
    return route.peer_id if route.thread_id is None else f"{route.peer_id}#{route.thread_id}"


def _opt(value: object) -> str | None:
    return None if value is None else str(value)
