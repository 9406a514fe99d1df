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


async def _stalled_client(
    ws_url: str, token: str | None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A WebSocket client on a raw socket that completes the handshake and `connect`, then
    never reads again (its socket's buffers fill; the server's sends have to wait)."""
    from urllib.parse import urlsplit

    from websockets.frames import Frame, Opcode

    url = urlsplit(ws_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    writer.write(
        (
            f"GET {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), head
    params = {"auth": {"token": token}}
    hello = json.dumps({"type": "req", "id": "c", "method": "connect", "params": params})
    writer.write(Frame(Opcode.TEXT, hello.encode()).serialize(mask=True))
    await writer.drain()
    # Read the hello-ok (the server has then taken the `connect`); nothing more after it.
    head = await reader.readexactly(2)
    size = head[1] & 0x7F
    if size == 126:
        size = int.from_bytes(await reader.readexactly(2), "big")
    elif size == 127:
        size = int.from_bytes(await reader.readexactly(8), "big")
    assert json.loads(await reader.readexactly(size))["type"] == "hello-ok"
    return reader, writer


async def test_a_real_socket_that_stops_reading_is_resynced_then_closed_and_holds_up_no_one(
    daemon: Any,
) -> None:
    """Over real sockets: a client that stops reading fills its socket, then its queue (its
    sends wait, the broadcaster does not); it is resynced, then closed (4008), while a reading
    client receives every event."""
    from websockets.asyncio.client import connect

    from lemon_control_plane.testing import WireClient

    blob = "x" * 65536
    total = 3000
    _, writer = await _stalled_client(daemon.ws_url, daemon.local_token)
    try:
        (stalled,) = daemon._connections
        async with connect(daemon.ws_url, max_size=None) as healthy_ws:
            healthy = WireClient(healthy_ws, daemon.local_token)
            assert (await healthy.connect())["type"] == "hello-ok"
            got = 0
            done = asyncio.Event()

            async def read_healthy() -> None:
                nonlocal got
                async for raw in healthy_ws:
                    if json.loads(raw).get("event") == "bench.blob":
                        got += 1
                        if got == total:
                            done.set()
                            return

            task = asyncio.create_task(read_healthy())
            for n in range(total):
                daemon._broadcast("bench.blob", {"n": n, "blob": blob}, None)  # the fan-out
                if n % 20 == 0:
                    await asyncio.sleep(0)  # let the sockets move
            await asyncio.wait_for(done.wait(), 60)
            await task
            stats = stalled.statistics()
            assert stats.resyncs == 1, stats
            assert stats.dropped > 0
            assert stalled.closing_code == CLOSE_TOO_SLOW
    finally:
        writer.close()
