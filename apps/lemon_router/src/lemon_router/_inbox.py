"""Sessions shared by several daemons: one owner per session, and a durable inbox to reach it.

On one machine nothing here runs. When the runtime's store is shared (PostgreSQL leases), the
router that admits a session's messages holds the session's *owner lease*
(``router:session:<key>``, renewed every third of its ttl) for as long as its queue has
anything active or queued, and releases it when the queue drains. A message for a session
another daemon owns is not run here (it would only wait for the engine lease, outside the
session's queue rules): it is **handed to the owner**.

Hand-off, in order:

1. the request is recorded durably in the store table ``router_inbox``
   (``<session>\\x1f<at_ms>\\x1f<run_id>``: per session, in arrival order) *before* anything
   is sent, so it survives the death of either daemon;
2. a ``session_inbox`` command naming the record is published on the owner's bus topic
   ``router:inbox:<owner>``; the owner's router admits the recorded request with its queue
   rules (collect / followup / steer / interrupt) and answers ``session_inbox_receipt`` on
   the sender's ``router:reply:<owner>`` with the receipt (run id, status, merged into ...);
3. the sender's ``submit`` returns that receipt. With no answer in ``min(2 s, ttl)`` it tries
   to take the session itself (it gets the lease only once the owner released it or stopped
   renewing it for a ttl) and otherwise asks the current holder again; the owner answers a
   repeated command with the receipt it already gave (by run id), never admitting it twice.

**Secrets are never recorded.** The values of a request's session MCP servers (``env``,
``headers``) and its editor's token are withheld from the record (the names stay) and travel
only on the bus command to the owner (``withheld``); the sender keeps them in memory until the
message is admitted, so its own recovery of the record restores them too. A record admitted
without them (its sender died before the owner took it) runs without those MCP servers and
without the editor, and says so in the log.

A record is deleted when its message leaves the queue: just before its run is executed (the
gateway's in-flight record then accounts for it), or when it was settled (steered, cancelled,
rejected; a message merged into another is deleted with the message it was merged into).
Whoever takes a session (the next message for it, or the sweep every ttl over sessions with
records and no live owner) first admits the session's remaining records in their order.
So a message handed off is accounted for even when its owner dies with it queued.

Known limits: a crash between deleting the record and the gateway recording the run loses that
one message (the window is one store write; the alternative order would run it twice); a
daemon that stops cancels what it has queued (as on one machine; handed-off records are
deleted with them, within 5 s) rather than leaving it for another daemon; a message sent
directly to the owner is in its memory only, as on one machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

import msgspec

from lemon_core.bus import Bus, Overflow
from lemon_core.events import Event
from lemon_core.execution import (
    EditorHandle,
    McpServerSpec,
    Receipt,
    ResumeToken,
    RunRequest,
    ToolPolicy,
)
from lemon_core.leases import Lease, Leases
from lemon_core.store import Store, StoreError
from lemon_core.tasks import Supervisor

__all__ = ["INBOX", "SessionInboxCommand", "SessionInboxReceipt", "SharedSessions", "owner_lease"]

log = logging.getLogger("lemon_router")

#: The store table of messages handed to a session's owner and not yet run or settled.
INBOX: Final = "router_inbox"
_SEP: Final = "\x1f"
_MAX_HANDLED: Final = 4_096  # receipts remembered by run id (a repeated command's answer)
_MAX_REPLY_WAIT_S: Final = 2.0
_NODE: Final = os.uname().nodename


def owner_lease(session_key: str) -> str:
    """The shared name of a session's ownership (``router:session:<key>``)."""
    return f"router:session:{session_key}"


class SessionInboxCommand(msgspec.Struct, frozen=True, kw_only=True):
    """``session_inbox``: admit the recorded request ``record`` of ``session_key``."""

    session_key: str
    run_id: str
    record: str
    reply_to: str
    #: The request's secrets, never in the record (:func:`withheld_of`).
    withheld: dict[str, Any] = msgspec.field(default_factory=dict)


class SessionInboxReceipt(msgspec.Struct, frozen=True, kw_only=True):
    """``session_inbox_receipt``: what the owner's queue did with ``run_id``."""

    run_id: str
    receipt: dict[str, Any]


def encode_request(request: RunRequest) -> dict[str, Any]:
    """The JSON form of a request kept in the inbox, its secrets withheld (see the module
    docstring; :func:`withheld_of` returns them)."""
    return {
        "origin": request.origin,
        "session_key": request.session_key,
        "prompt": request.prompt,
        "agent_id": request.agent_id,
        "queue_mode": request.queue_mode,
        "model": request.model,
        "images": [dict(image) for image in request.images],
        "run_id": request.run_id,
        "cwd": request.cwd,
        "resume": request.resume.to_dict() if request.resume is not None else None,
        "tool_policy": request.tool_policy.to_dict() if request.tool_policy is not None else None,
        "preapproved": sorted(request.preapproved),
        "meta": dict(request.meta),
        "parent_run_id": request.parent_run_id,
        "root_run_id": request.root_run_id,
        "depth": request.depth,
        # Names only: the values are the editor's secrets (tokens, keys).
        "mcp_servers": [
            {
                **msgspec.to_builtins(s),
                "env": dict.fromkeys(s.env, ""),
                "headers": dict.fromkeys(s.headers, ""),
            }
            for s in request.mcp_servers
        ],
        "editor": None
        if request.editor is None
        else {**msgspec.to_builtins(request.editor), "token": ""},
        # The editor's bridge listens on the sending machine's loopback: only a daemon on that
        # machine may use it (another would send the token to whatever listens on its own).
        "editor_node": None if request.editor is None else _NODE,
    }


def withheld_of(request: RunRequest) -> dict[str, Any]:
    """The secrets :func:`encode_request` leaves out of the record: each session MCP server's
    ``env`` and ``headers`` values, and the editor's token."""
    out: dict[str, Any] = {}
    mcp = {
        s.name: {"env": dict(s.env), "headers": dict(s.headers)}
        for s in request.mcp_servers
        if s.env or s.headers
    }
    if mcp:
        out["mcp"] = mcp
    if request.editor is not None:
        out["editor_token"] = request.editor.token
    return out


def decode_request(
    data: dict[str, Any], *, node: str | None = None, withheld: dict[str, Any] | None = None
) -> RunRequest:
    """The request of an inbox record, admitted on machine ``node`` (default: this one), with
    the secrets ``withheld`` from it restored. The editor handle is kept only where it was
    recorded (its bridge is that machine's loopback) and when its token is at hand; elsewhere
    the run uses the local tools. A session MCP server whose values are not at hand is left
    out (it would start without its credentials)."""
    resume = data.get("resume")
    policy = data.get("tool_policy")
    secrets = withheld or {}
    servers, missing = _servers(data.get("mcp_servers") or (), secrets.get("mcp") or {})
    editor = (
        _editor(data.get("editor"), secrets.get("editor_token"))
        if data.get("editor_node") == (node if node is not None else _NODE)
        else None
    )
    dropped = [f"MCP server {name!r}" for name in missing]
    if data.get("editor") is not None and editor is None:
        dropped.append("the editor")
    if dropped:
        log.warning(
            "run %s: admitted without %s (not at hand on this daemon)",
            data.get("run_id"),
            ", ".join(dropped),
        )
    return RunRequest(
        origin=data["origin"],
        session_key=data["session_key"],
        prompt=data["prompt"],
        agent_id=data.get("agent_id", "default"),
        queue_mode=data.get("queue_mode", "collect"),
        model=data.get("model"),
        images=tuple(data.get("images") or ()),
        run_id=data.get("run_id"),
        cwd=data.get("cwd"),
        resume=ResumeToken.from_dict(resume) if resume is not None else None,
        tool_policy=ToolPolicy.from_mapping(policy) if policy is not None else None,
        preapproved=frozenset(data.get("preapproved") or ()),
        meta=data.get("meta") or {},
        parent_run_id=data.get("parent_run_id"),
        root_run_id=data.get("root_run_id"),
        depth=data.get("depth") or 0,
        mcp_servers=servers,
        editor=editor,
    )


def _servers(recorded: Any, values: dict[str, Any]) -> tuple[tuple[McpServerSpec, ...], list[str]]:
    """The recorded session MCP servers with their withheld values; and the names of those
    left out because their values are not at hand."""
    kept: list[McpServerSpec] = []
    missing: list[str] = []
    for raw in recorded:
        spec = msgspec.convert(raw, McpServerSpec)
        if spec.env or spec.headers:
            found = values.get(spec.name)
            env = found.get("env") if isinstance(found, dict) else None
            headers = found.get("headers") if isinstance(found, dict) else None
            if (
                not isinstance(env, dict)
                or not isinstance(headers, dict)
                or set(env) != set(spec.env)
                or set(headers) != set(spec.headers)
            ):
                missing.append(spec.name)
                continue
            spec = msgspec.structs.replace(spec, env=env, headers=headers)
        kept.append(spec)
    return tuple(kept), missing


@dataclasses.dataclass(slots=True)
class _Owned:
    held: list[Lease]
    keeper: asyncio.Task[None] | None = None


class SharedSessions:
    """The router's side of sessions shared across daemons (see the module docstring).

    ``admit(request)`` is the router's local intake (its queue rules); ``known(run_id)``
    whether the router tracks a run id; ``busy(session_key)`` whether it has anything of the
    session active or queued; ``noted(session_key)`` tells the router's session watchers to
    follow a session handed to another daemon (its events arrive through the bus).
    """

    def __init__(
        self,
        *,
        bus: Bus,
        store: Store,
        leases: Leases,
        tasks: Supervisor,
        admit: Callable[[RunRequest], Awaitable[Receipt]],
        known: Callable[[str], bool],
        busy: Callable[[str], bool],
        noted: Callable[[str], None],
        ttl_ms: int,
        handoff_timeout_ms: int,
        sweep: bool = True,
        owner: str | None = None,
    ) -> None:
        self._bus = bus
        self._store = store
        self._leases = leases
        self._tasks = tasks
        self._admit = admit
        self._known = known
        self._busy = busy
        self._noted = noted
        self.ttl_ms = ttl_ms
        self.handoff_timeout_ms = handoff_timeout_ms
        self._sweep = sweep
        self.owner = owner or f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._owned: dict[str, _Owned] = {}
        self._releasing: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self._lock_users: dict[str, int] = {}
        self._handled: OrderedDict[str, Receipt] = OrderedDict()
        self._waiters: dict[str, asyncio.Future[Receipt]] = {}
        self._records: dict[str, str] = {}  # run id -> its inbox record key
        # run id -> the secrets of a request this router recorded (never in the record)
        self._withheld: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._merged: dict[str, list[str]] = {}  # target run id -> run ids merged into it
        self.handed_off = 0
        self.taken_in = 0
        self.recovered = 0
        self.lost = 0

    @property
    def inbox_topic(self) -> str:
        return f"router:inbox:{self.owner}"

    @property
    def reply_topic(self) -> str:
        return f"router:reply:{self.owner}"

    SESSIONS_TOPIC: Final = "router:sessions"

    def start(self) -> None:
        self._tasks.spawn(self._consume(), name="router:inbox")
        if self._sweep:
            self._tasks.spawn(self._sweep_loop(), name="router:inbox-sweep")

    async def close(self) -> None:
        """Give up every owner lease (queued messages were settled by the router's stop)."""
        for session_key in list(self._owned):
            await self._release(session_key)

    def owns(self, session_key: str) -> bool:
        return session_key in self._owned

    # -- intake ------------------------------------------------------------------------------

    async def submit(self, request: RunRequest) -> Receipt:
        """Admit ``request`` here when this router owns (or can take) its session, else hand
        it to the owner and return the owner's receipt."""
        if request.run_id is None:
            request = dataclasses.replace(request, run_id=f"run_{uuid.uuid4()}")
        run_id = request.run_id
        assert run_id is not None
        session_key = request.session_key
        deadline = time.monotonic() + self.handoff_timeout_ms / 1000
        record: str | None = None
        while True:
            async with self._session_lock(session_key):
                if session_key in self._owned or await self._take(session_key):
                    if record is None:
                        return await self._admit_here(request)
                    # Taken while our own record waited: the recovery admitted it.
                    handled = self._handled.get(run_id)
                    if handled is not None:
                        return handled
                try:
                    holder = await self._leases.holder(owner_lease(session_key))
                    if record is None:
                        key = f"{session_key}{_SEP}{int(time.time() * 1000):015d}{_SEP}{run_id}"
                        await self._store.put(INBOX, key, encode_request(request))
                        record = key
                        secrets = withheld_of(request)
                        if secrets:
                            self._withheld[run_id] = secrets
                            while len(self._withheld) > _MAX_HANDLED:
                                self._withheld.popitem(last=False)
                        self.handed_off += 1
                        # This router's watchers follow the session: its events are the owner's.
                        self._noted(session_key)
                except StoreError as exc:
                    if record is not None:  # recorded already: ask again after the wait
                        log.warning("session %s: hand-off retry: %s", session_key, exc)
                        holder = None
                    else:
                        # The shared store is out of reach: no owner can be asked or
                        # recorded. Admitted here; its run then waits for the session's
                        # engine lease in the gateway, which reports the store's failure.
                        log.warning("session %s: no hand-off, store failed: %s", session_key, exc)
                        return await self._admit_here(request)
                future = self._waiters.get(run_id)
                if future is None or future.done():
                    future = asyncio.get_running_loop().create_future()
                    self._waiters[run_id] = future
                if holder is not None and holder.owner != self.owner:
                    self._publish_command(
                        holder.owner,
                        SessionInboxCommand(
                            session_key=session_key,
                            run_id=run_id,
                            record=record,
                            reply_to=self.reply_topic,
                            withheld=self._withheld.get(run_id, {}),
                        ),
                    )
            left = deadline - time.monotonic()
            wait_s = min(_MAX_REPLY_WAIT_S, self.ttl_ms / 1000, max(left, 0.0))
            try:
                return await asyncio.wait_for(asyncio.shield(future), wait_s)
            except TimeoutError:
                if time.monotonic() >= deadline:
                    self._waiters.pop(run_id, None)
                    return Receipt(
                        run_id=run_id,
                        session_key=session_key,
                        requested_mode=request.queue_mode,
                        actual_mode=request.queue_mode,
                        status="queued",
                        at_ms=int(time.time() * 1000),
                        reason=(
                            "handed_off: the session's owner has not answered yet; the message "
                            "is recorded and runs when its owner (or the next one) takes it"
                        ),
                    )

    async def _admit_here(self, request: RunRequest) -> Receipt:
        receipt = await self._admit(request)
        self._remember(receipt)
        if not self._busy(request.session_key):
            self._spawn_release(request.session_key)
        return receipt

    def _remember(self, receipt: Receipt) -> None:
        self._handled[receipt.run_id] = receipt
        self._handled.move_to_end(receipt.run_id)
        while len(self._handled) > _MAX_HANDLED:
            self._handled.popitem(last=False)

    # -- ownership ---------------------------------------------------------------------------

    async def _take(self, session_key: str) -> bool:
        """Acquire the session's owner lease when it is free; then admit its inbox."""
        try:
            lease = await self._leases.acquire(
                owner_lease(session_key), self.owner, ttl_ms=self.ttl_ms
            )
        except StoreError as exc:
            log.warning("taking session %s: %s", session_key, exc)
            return False
        if lease is None:
            return False
        owned = _Owned(held=[lease])
        self._owned[session_key] = owned
        owned.keeper = self._tasks.spawn(self._keep(session_key, owned), name=f"own:{session_key}")
        # Every other router's watchers follow the session from now on (its events are ours).
        self._bus.broadcast_event(
            self.SESSIONS_TOPIC,
            "session_owned",
            {"session_key": session_key, "owner": self.owner},
            {"session_key": session_key},
        )
        await self._recover(session_key)
        return True

    async def _recover(self, session_key: str) -> None:
        """Admit the session's recorded messages not admitted yet, oldest first."""
        rows = await self._store.scan(INBOX, prefix=session_key + _SEP, limit=1000)
        for record, data in rows:
            await self._admit_record(record, data)

    async def _admit_record(
        self, record: str, data: Any, withheld: dict[str, Any] | None = None
    ) -> Receipt | None:
        run_id = record.rsplit(_SEP, 1)[-1]
        handled = self._handled.get(run_id)
        if handled is not None or self._known(run_id):
            return handled
        secrets = withheld or self._withheld.pop(run_id, None)
        try:
            request = dataclasses.replace(decode_request(data, withheld=secrets), run_id=run_id)
        except (KeyError, TypeError, ValueError) as exc:
            log.error("inbox record %r does not parse, dropped: %s", record, exc)
            await self._unrecord_keys([record])
            return None
        self._records[run_id] = record
        receipt = await self._admit(request)
        self._remember(receipt)
        self.recovered += 1
        waiter = self._waiters.pop(run_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(receipt)  # our own record, admitted by our recovery
        if receipt.status == "rejected":
            await self.unrecord([run_id])
        return receipt

    async def _keep(self, session_key: str, owned: _Owned) -> None:
        interval = self.ttl_ms / 3000
        confirmed = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            lease = owned.held[0]
            try:
                renewed = await self._leases.renew(lease, ttl_ms=self.ttl_ms)
            except StoreError as exc:
                log.warning("renewing session %s: %s", session_key, exc)
                if (time.monotonic() - confirmed) * 1000 < self.ttl_ms:
                    continue
                renewed = None
            if renewed is None:
                log.warning("session %s: this router lost its owner lease", session_key)
                self.lost += 1
                if self._owned.get(session_key) is owned:
                    del self._owned[session_key]
                return
            owned.held[0] = renewed
            confirmed = time.monotonic()

    def session_idle(self, session_key: str) -> None:
        """The router has nothing of ``session_key`` left: give the session up."""
        if session_key in self._owned:
            self._spawn_release(session_key)

    def _spawn_release(self, session_key: str) -> None:
        if session_key in self._releasing:
            return  # one pending release per session
        self._releasing.add(session_key)
        self._tasks.spawn(self._release_if_idle(session_key), name=f"release:{session_key}")

    async def _release_if_idle(self, session_key: str) -> None:
        try:
            # An idle session stays ours for a third of the ttl: a conversation's next message
            # (the common case) needs no new lease, and one through another daemon is handed
            # to us as to any live owner.
            await asyncio.sleep(self.ttl_ms / 3000)
        finally:
            self._releasing.discard(session_key)
        async with self._session_lock(session_key):
            if not self._busy(session_key):
                await self._release(session_key)

    async def _release(self, session_key: str) -> None:
        owned = self._owned.pop(session_key, None)
        if owned is None:
            return
        if owned.keeper is not None:
            owned.keeper.cancel()
        try:
            async with asyncio.timeout(5):
                await self._leases.release(owned.held[0])
        except (StoreError, TimeoutError) as exc:
            log.warning("releasing session %s: %r (it will expire)", session_key, exc)

    # -- records -----------------------------------------------------------------------------

    def merged(self, run_id: str, into_run_id: str) -> None:
        if run_id in self._records:
            self._merged.setdefault(into_run_id, []).append(run_id)

    def recorded(self, run_ids: list[str]) -> bool:
        return any(r in self._records or r in self._merged for r in run_ids)

    async def unrecord(self, run_ids: list[str]) -> None:
        """Delete the inbox records of ``run_ids`` and of what was merged into them."""
        keys: list[str] = []
        for run_id in run_ids:
            for inner in (run_id, *self._merged.pop(run_id, ())):
                record = self._records.pop(inner, None)
                if record is not None:
                    keys.append(record)
        await self._unrecord_keys(keys)

    async def _unrecord_keys(self, keys: list[str]) -> None:
        for key in keys:
            try:
                await self._store.delete(INBOX, key)
            except StoreError as exc:
                log.warning("inbox record %r not deleted: %s", key, exc)

    # -- the bus side ------------------------------------------------------------------------

    def _publish_command(self, owner: str, command: SessionInboxCommand) -> None:
        self._bus.broadcast_event(
            f"router:inbox:{owner}",
            "session_inbox",
            msgspec.to_builtins(command),
            {"session_key": command.session_key, "run_id": command.run_id},
        )

    async def _consume(self) -> None:
        delivery = self._bus.subscribe(self.inbox_topic).delivery
        self._bus.subscribe(self.reply_topic, delivery=delivery)
        self._bus.subscribe(self.SESSIONS_TOPIC, delivery=delivery)
        try:
            while True:
                item = await delivery.get()
                if isinstance(item, Overflow):
                    # Lost commands are asked again by their senders.
                    delivery = delivery.replace()
                    continue
                if isinstance(item, Event):
                    self._on_event(item)
        finally:
            delivery.close()

    def _on_event(self, event: Event) -> None:
        try:
            if event.type == "session_inbox":
                command = msgspec.convert(event.payload, SessionInboxCommand)
                self._tasks.spawn(self._on_command(command), name=f"inbox:{command.run_id}")
            elif event.type == "session_owned":
                payload = event.payload
                if isinstance(payload, dict) and payload.get("owner") != self.owner:
                    key = payload.get("session_key")
                    if isinstance(key, str) and key:
                        self._noted(key)
            elif event.type == "session_inbox_receipt":
                answer = msgspec.convert(event.payload, SessionInboxReceipt)
                self._withheld.pop(answer.run_id, None)  # admitted by the owner
                waiter = self._waiters.pop(answer.run_id, None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(Receipt(**answer.receipt))
        except (msgspec.ValidationError, TypeError) as exc:
            log.warning("a %s event that does not parse was ignored: %s", event.type, exc)

    async def _on_command(self, command: SessionInboxCommand) -> None:
        session_key = command.session_key
        receipt: Receipt | None = None
        async with self._session_lock(session_key):
            if session_key in self._owned or await self._take(session_key):
                receipt = self._handled.get(command.run_id)
                if receipt is None:
                    data = await self._store.get(INBOX, command.record)
                    if data is not None:
                        receipt = await self._admit_record(command.record, data, command.withheld)
                        self.taken_in += 1
                if not self._busy(session_key):
                    self._spawn_release(session_key)
            else:
                holder = await self._leases.holder(owner_lease(session_key))
                if holder is not None and holder.owner != self.owner:
                    self._publish_command(holder.owner, command)  # ownership moved on
                return
        if receipt is not None:
            self._bus.broadcast_event(
                command.reply_to,
                "session_inbox_receipt",
                msgspec.to_builtins(
                    SessionInboxReceipt(run_id=command.run_id, receipt=dataclasses.asdict(receipt))
                ),
                {"session_key": session_key, "run_id": command.run_id},
            )

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(self.ttl_ms / 1000)
            try:
                await self.sweep()
            except StoreError as exc:
                log.warning("inbox sweep: %s", exc)

    async def sweep(self) -> int:
        """Take every session with inbox records and no live owner; returns how many."""
        rows = await self._store.scan(INBOX, limit=1000)
        sessions = dict.fromkeys(record.split(_SEP, 1)[0] for record, _ in rows)
        taken = 0
        for session_key in sessions:
            async with self._session_lock(session_key):
                if session_key in self._owned:
                    continue
                if await self._take(session_key):
                    taken += 1
                    if not self._busy(session_key):
                        self._spawn_release(session_key)
        return taken

    @contextlib.asynccontextmanager
    async def _session_lock(self, session_key: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(session_key, asyncio.Lock())
        self._lock_users[session_key] = self._lock_users.get(session_key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            left = self._lock_users[session_key] - 1
            if left:
                self._lock_users[session_key] = left
            else:
                del self._lock_users[session_key]
                del self._locks[session_key]

    def statistics(self) -> dict[str, object]:
        return {
            "owner": self.owner,
            "owned": len(self._owned),
            "handed_off": self.handed_off,
            "taken_in": self.taken_in,
            "recovered": self.recovered,
            "lost": self.lost,
            "records": len(self._records),
            "waiting": len(self._waiters),
        }


def _editor(value: object, token: object) -> EditorHandle | None:
    """A stored request's editor handle with its withheld ``token`` (``None``: none, no token
    at hand, or one this version cannot read: the run then uses the local tools)."""
    if not isinstance(value, dict) or not isinstance(token, str) or not token:
        return None
    try:
        return msgspec.convert({**value, "token": token}, EditorHandle)
    except (msgspec.ValidationError, ValueError):
        return None
