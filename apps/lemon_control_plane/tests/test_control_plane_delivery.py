"""Delivery: a connection's bounded queue (resync, then disconnect), a run's events never
overtaking the reply that names it, and the bridge's recovery from a stream overflow."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from lemon_control_plane import EventBridge
from lemon_control_plane._connection import CLOSE_TOO_SLOW, Connection
from lemon_control_plane._frames import encode
from lemon_core.events import QueueOutcomeKind, RunPhase
from lemon_core.execution import Receipt, RunRequest
from lemon_core.sessions import (
    ActiveRun,
    ApprovalResult,
    CancelResult,
    QueueNotice,
    SessionEvent,
    SessionPortStatistics,
    SessionSnapshot,
    SessionStreamClosedError,
    SessionSummary,
    SteerResult,
    StreamOverflow,
    TextDelta,
    TranscriptPage,
)


class _Socket:
    """A socket whose sends wait at a gate (a client that stopped reading)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.gate = asyncio.Event()
        self.first_send = asyncio.Event()
        self.closed: tuple[int, str] | None = None
        self.want = 0
        self.enough = asyncio.Event()

    async def send(self, text: str) -> None:
        self.first_send.set()
        await self.gate.wait()
        self.sent.append(json.loads(text))
        if self.want and len(self.sent) >= self.want:
            self.enough.set()

    async def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)


def _connection(sock: _Socket, max_entries: int = 4) -> Connection:
    conn = Connection("c", send=sock.send, close=sock.close, max_entries=max_entries)
    conn.online = True
    return conn


def _event(conn: Connection, n: int) -> None:
    conn.push_event(encode("chat"), encode({"n": n}))


async def test_a_lagging_connection_gets_a_resync_then_is_closed_if_it_stays_behind() -> None:
    sock = _Socket()
    conn = _connection(sock)
    writer = asyncio.create_task(conn.run_writer())
    _event(conn, 0)
    await sock.first_send.wait()  # the writer is stuck sending event 0
    for n in range(1, 5):
        _event(conn, n)  # fills the queue (4 entries)
    _event(conn, 5)  # one too many: the queue is dropped, a resync takes its place
    stats = conn.statistics()
    assert (stats.resyncs, stats.dropped, stats.lagging) == (1, 4, True)
    for n in range(6, 10):
        _event(conn, n)  # 3 fit beside the resync; the 4th finds it full again
    assert conn.statistics().queued == 0
    sock.gate.set()
    await asyncio.wait_for(writer, 10)
    names = [(f["event"], f["payload"].get("n")) for f in sock.sent]
    assert names == [("chat", 0)], "after the second overflow nothing more is sent"
    assert sock.closed is not None
    assert sock.closed[0] == CLOSE_TOO_SLOW


async def test_a_connection_that_catches_up_after_a_resync_stays_open() -> None:
    sock = _Socket()
    conn = _connection(sock)
    writer = asyncio.create_task(conn.run_writer())
    _event(conn, 0)
    await sock.first_send.wait()
    for n in range(1, 6):
        _event(conn, n)
    sock.want = 3
    sock.gate.set()
    _event(conn, 6)
    await asyncio.wait_for(sock.enough.wait(), 10)
    assert [f["event"] for f in sock.sent] == ["chat", "stream.resync", "chat"]
    assert [f["seq"] for f in sock.sent] == [1, 2, 3]
    conn.close_soon(1000, "bye")
    await asyncio.wait_for(writer, 10)
    assert sock.closed == (1000, "bye")


async def test_events_pushed_while_a_reply_is_held_follow_the_reply() -> None:
    sock = _Socket()
    sock.gate.set()
    conn = _connection(sock, max_entries=16)
    writer = asyncio.create_task(conn.run_writer())
    with conn.holding():
        _event(conn, 1)  # the run's first events arrive before chat.send has its answer
        _event(conn, 2)
        conn.push_text(json.dumps({"type": "res", "id": "send", "ok": True, "payload": {}}))
    conn.close_soon(1000, "done")
    await asyncio.wait_for(writer, 10)
    assert [f.get("id") or f["payload"]["n"] for f in sock.sent] == ["send", 1, 2]


# -- the bridge over a scripted session port --------------------------------------------------


class _Stream:
    def __init__(self, key: str) -> None:
        self.session_key = key
        self.queue: asyncio.Queue[SessionEvent | None] = asyncio.Queue()
        self.closed = False

    async def get(self) -> SessionEvent:
        item = await self.queue.get()
        if item is None or self.closed:
            raise SessionStreamClosedError("closed")
        if isinstance(item, StreamOverflow):
            self.closed = True
        return item

    def __aiter__(self) -> AsyncIterator[SessionEvent]:
        raise NotImplementedError

    def close(self) -> None:
        self.closed = True
        self.queue.put_nowait(None)


class _ScriptedPort:
    """A SessionPort whose streams the test feeds (only what the bridge uses is scripted)."""

    def __init__(self, snapshot: SessionSnapshot) -> None:
        self.streams: list[_Stream] = []
        self.watched = asyncio.Event()
        self._snapshot = snapshot

    def watch(self, session_key: str) -> _Stream:
        stream = _Stream(session_key)
        self.streams.append(stream)
        self.watched.set()
        return stream

    def watch_all(self) -> _Stream:
        return self.watch("*")

    async def snapshot(self, session_key: str) -> SessionSnapshot:
        return self._snapshot

    async def submit(self, request: RunRequest) -> Receipt:
        raise NotImplementedError

    async def steer(self, session_key: str, text: str) -> SteerResult:
        raise NotImplementedError

    async def cancel(
        self,
        *,
        run_id: str | None = None,
        session_key: str | None = None,
        include_queued: bool = True,
    ) -> CancelResult:
        raise NotImplementedError

    async def resolve_approval(self, approval_id: str, decision: Any) -> ApprovalResult:
        raise NotImplementedError

    async def sessions(self, *, limit: int = 50) -> list[SessionSummary]:
        return []

    async def transcript(
        self, session_key: str, *, limit: int = 50, before: int | None = None
    ) -> TranscriptPage:
        raise NotImplementedError

    def statistics(self) -> SessionPortStatistics:
        raise NotImplementedError


async def test_an_overflowed_stream_is_watched_again_and_resynced_from_the_snapshot() -> None:
    key = "agent:default:main"
    snapshot = SessionSnapshot(
        session_key=key,
        active=ActiveRun(
            run_id="r1",
            attempt_id="r1",
            attempt=1,
            phase=RunPhase.STREAMING,
            text="abc",
            text_seq=3,
        ),
    )
    port = _ScriptedPort(snapshot)
    out: list[tuple[str, dict[str, Any]]] = []
    resynced = asyncio.Event()

    def broadcast(name: str, payload: dict[str, Any], session_key: str | None) -> None:
        out.append((name, payload))
        if name == "stream.resync" or (name == "chat" and payload["text"] == "d"):
            resynced.set()

    async with EventBridge(port, broadcast) as bridge:  # type: ignore[arg-type]  # scripted port
        bridge.follow(key)
        first = port.streams[0]
        first.queue.put_nowait(TextDelta(session_key=key, run_id="r1", seq=1, text="a"))
        first.queue.put_nowait(StreamOverflow(session_key=key, reason="fell behind"))
        await resynced.wait()
        resynced.clear()
        second = port.streams[1]
        # Deltas the snapshot already holds are not sent again; the next ones are.
        second.queue.put_nowait(TextDelta(session_key=key, run_id="r1", seq=3, text="c"))
        second.queue.put_nowait(TextDelta(session_key=key, run_id="r1", seq=4, text="d"))
        await resynced.wait()
    names = [n for n, _ in out]
    assert names == ["agent", "chat", "stream.resync", "chat"]
    resync = out[2][1]
    assert resync["sessionKey"] == key
    assert resync["snapshot"]["active"]["text"] == "abc"
    assert resync["snapshot"]["active"]["textSeq"] == 3
    deltas = [p for n, p in out if n == "chat"]
    assert [(d["seq"], d["text"]) for d in deltas] == [(1, "a"), (2, "d")]


async def test_a_session_event_the_wire_has_no_name_for_is_logged_once_and_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    key = "agent:default:main"
    port = _ScriptedPort(SessionSnapshot(session_key=key))
    out: list[str] = []
    last = asyncio.Event()

    def broadcast(name: str, payload: dict[str, Any], session_key: str | None) -> None:
        out.append(name)
        if name == "chat":
            last.set()

    caplog.set_level(logging.INFO, logger="lemon_control_plane.bridge")
    async with EventBridge(port, broadcast) as bridge:  # type: ignore[arg-type]  # scripted port
        bridge.follow(key)
        for n in range(3):
            port.streams[0].queue.put_nowait(
                QueueNotice(session_key=key, run_id=f"q{n}", outcome=QueueOutcomeKind.MERGED)
            )
        port.streams[0].queue.put_nowait(TextDelta(session_key=key, run_id="r", seq=1, text="x"))
        await last.wait()
        assert bridge.statistics().dropped_types == ("QueueNotice",)
    assert out == ["agent", "chat"]
    assert sum("QueueNotice" in r.getMessage() for r in caplog.records) == 1


async def test_a_connection_that_touched_no_session_gets_every_sessions_events(
    client: Any,
) -> None:
    async with client() as watcher, client() as narrowed, client() as sender:
        await narrowed.call("events.subscribe", {"sessionKeys": ["agent:default:main"]})
        other = "agent:default:main:sub:elsewhere"
        sent = await sender.call("chat.send", {"sessionKey": other, "prompt": "hello"})
        done = await watcher.completed(sent["runId"])
        assert done["payload"]["sessionKey"] == other
        started = watcher.events("agent")[0]["payload"]
        assert (started["type"], started["runId"]) == ("started", sent["runId"])
        assert any(e["payload"]["runId"] == sent["runId"] for e in watcher.events("chat"))
        # The narrowed connection sees its own session only: a run there arrives, the other
        # session's did not (its events came first on the one ordered delivery).
        mine = await sender.call("chat.send", {"sessionKey": "agent:default:main", "prompt": "hi"})
        await narrowed.completed(mine["runId"])
        assert {e["payload"]["sessionKey"] for e in narrowed.events()} == {"agent:default:main"}
