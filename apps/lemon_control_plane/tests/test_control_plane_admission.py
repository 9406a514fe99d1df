"""Who gets a socket and for how long: the `connect` deadline, the HTTP header deadline, the
connection caps (total and per client address), WebSocket pings, and the accept-error log.

Every test runs the booted daemon on 127.0.0.1 with lowered deadlines and caps, and waits on the
event itself (a close, an EOF, a refused upgrade), each wait bounded; none sleeps and hopes.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import json
import logging
import os
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from lemon_control_plane import (
    ControlPlane,
    ControlPlaneConfig,
    ControlPlaneConfigError,
    ControlPlaneOptions,
)
from lemon_control_plane._log_throttle import LogThrottle, LogThrottleStatistics
from lemon_control_plane.testing import WireClient, plane_client
from lemon_core.config import ConfigError, load_config
from lemon_runtime import Runtime

BOUND_S = 10.0  # the most any wait below may take; the events come in a fraction of it


@pytest.fixture
def plane_with(boot: Callable[..., Runtime]) -> Callable[..., Any]:
    @asynccontextmanager
    async def start(**settings: Any) -> AsyncIterator[ControlPlane]:
        async with boot(**settings) as runtime:
            plane = runtime.handle("lemon_control_plane")
            assert isinstance(plane, ControlPlane)
            yield plane

    return start


async def _closed_code(ws: ClientConnection) -> int | None:
    """Read until the server closes; the close code it sent."""
    async with asyncio.timeout(BOUND_S):
        try:
            while True:
                await ws.recv()
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd is not None else None


# -- the connect deadline ----------------------------------------------------------------------


async def test_a_socket_that_never_sends_connect_is_closed_at_the_deadline(
    plane_with: Callable[..., Any],
) -> None:
    async with plane_with(connect_timeout_s=0.2) as plane:
        open_client = plane_client(plane)
        async with open_client() as online:  # connected before the idle one opens
            async with connect(plane.ws_url) as idle:
                assert await _closed_code(idle) == 1008
            # Its deadline passed before the idle one's: a connected socket has none.
            assert (await online.request("health"))["ok"] is True
        assert plane.statistics().connect_timeouts == 1


async def test_requests_before_connect_do_not_extend_the_deadline(
    plane_with: Callable[..., Any],
) -> None:
    async with plane_with(connect_timeout_s=0.2) as plane, connect(plane.ws_url) as ws:
        client = WireClient(ws)
        assert (await client.request("health"))["error"]["code"] == "HANDSHAKE_REQUIRED"
        assert await _closed_code(ws) == 1008


# -- the HTTP header deadline ------------------------------------------------------------------


async def _read_to_eof(reader: asyncio.StreamReader) -> bytes:
    async with asyncio.timeout(BOUND_S):
        return await reader.read()


@pytest.mark.parametrize(
    "sent",
    [
        b"",  # connects and says nothing
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n",  # headers never finished
        b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n",
    ],
)
async def test_a_client_slow_to_send_its_headers_is_dropped(
    plane_with: Callable[..., Any], sent: bytes
) -> None:
    async with plane_with(header_timeout_s=0.2) as plane:
        reader, writer = await asyncio.open_connection(*plane.address)
        try:
            writer.write(sent)
            answer = await _read_to_eof(reader)
        finally:
            writer.close()
        assert answer.startswith(b"HTTP/1.1 408 ")


async def test_a_keep_alive_client_slow_with_its_next_request_is_dropped(
    plane_with: Callable[..., Any],
) -> None:
    async with plane_with(header_timeout_s=0.2) as plane:
        reader, writer = await asyncio.open_connection(*plane.address)
        try:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 ")
            writer.write(b"GET /healthz HTTP/1.1\r\n")  # the next request, never finished
            answer = await _read_to_eof(reader)
        finally:
            writer.close()
        assert b"HTTP/1.1 408 " in answer


# -- connection caps ---------------------------------------------------------------------------


def _from(address: str) -> dict[str, Any]:
    """Connect from another loopback address (127.0.0.0/8 is all this machine)."""
    return {"local_addr": (address, 0)}


async def test_the_per_address_cap_refuses_the_next_upgrade_until_one_closes(
    plane_with: Callable[..., Any],
) -> None:
    async with plane_with(max_connections_per_client=3) as plane, AsyncExitStack() as stack:
        open_client = plane_client(plane)
        first = [await stack.enter_async_context(open_client()) for _ in range(3)]
        with pytest.raises(InvalidStatus) as refused:
            async with connect(plane.ws_url):
                pass
        response = refused.value.response
        assert response.status_code == 429
        assert response.headers["Retry-After"] == "1"
        assert b"connections from this address" in response.body
        # Another address is not held up; /healthz answers the capped one.
        async with open_client(**_from("127.0.0.2")) as other:
            assert (await other.request("health"))["ok"] is True
        async with httpx.AsyncClient(base_url=plane.url) as http:
            assert (await http.get("/healthz")).json() == {"ok": True}
        for c in first:
            assert (await c.request("health"))["ok"] is True
        await first[0].ws.close()
        async with open_client() as again:  # a real client gets in once one closed
            assert (await again.request("health"))["ok"] is True
        stats = plane.statistics()
        assert (stats.refused_per_client, stats.refused_total) == (1, 0)


async def test_the_total_cap_refuses_with_503(plane_with: Callable[..., Any]) -> None:
    async with plane_with(max_connections=2) as plane:
        open_client = plane_client(plane)
        async with open_client(), open_client(**_from("127.0.0.2")):
            with pytest.raises(InvalidStatus) as refused:
                async with connect(plane.ws_url, **_from("127.0.0.3")):
                    pass
            assert refused.value.response.status_code == 503
            async with httpx.AsyncClient(base_url=plane.url) as http:
                assert (await http.get("/healthz")).status_code == 200
            assert plane.statistics().active == 2
        async with open_client() as again:
            assert (await again.request("health"))["ok"] is True
        assert plane.statistics().refused_total == 1


async def test_connections_are_released_when_they_end(plane_with: Callable[..., Any]) -> None:
    async with plane_with(max_connections_per_client=2, connect_timeout_s=0.2) as plane:
        for _ in range(3):  # refused connects, timed-out ones and clean closes all give back
            async with connect(plane.ws_url) as ws:
                await ws.send(json.dumps({"type": "req", "id": "c", "method": "connect"}))
                await ws.recv()
            async with connect(plane.ws_url) as idle:
                await _closed_code(idle)
        assert plane.statistics().active == 0
        async with plane_client(plane)() as c:
            assert (await c.request("status"))["ok"] is True


async def test_connections_waiting_for_their_headers_are_capped_per_address(
    plane_with: Callable[..., Any],
) -> None:
    async with plane_with(max_connections_per_client=2) as plane:
        waiting = [await asyncio.open_connection(*plane.address) for _ in range(2)]
        try:
            reader, writer = await asyncio.open_connection(*plane.address)
            answer = await _read_to_eof(reader)
            writer.close()
            assert answer.startswith(b"HTTP/1.1 503 ")
            assert b"waiting to send their request" in answer
            transport = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
            async with httpx.AsyncClient(base_url=plane.url, transport=transport) as http:
                assert (await http.get("/healthz")).status_code == 200  # another address
            # One of them sends its request (and asks to close): its slot is free.
            reader, writer = waiting.pop()
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert (await _read_to_eof(reader)).startswith(b"HTTP/1.1 200 ")
            writer.close()
            async with httpx.AsyncClient(base_url=plane.url) as http:
                assert (await http.get("/healthz")).status_code == 200
            stats = plane.statistics()
            assert stats.refused_waiting == 1
        finally:
            for _, w in waiting:
                w.close()


# -- pings -------------------------------------------------------------------------------------


def _masked_text(text: str) -> bytes:
    payload = text.encode()
    assert len(payload) < 126
    mask = os.urandom(4)
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([0x81, 0x80 | len(payload)]) + mask + body


async def _frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readexactly(2)
    size = head[1] & 0x7F
    if size == 126:
        (size,) = struct.unpack("!H", await reader.readexactly(2))
    elif size == 127:
        (size,) = struct.unpack("!Q", await reader.readexactly(8))
    return head[0] & 0x0F, await reader.readexactly(size)


async def test_the_server_pings_and_drops_a_peer_that_never_answers(
    plane_with: Callable[..., Any],
) -> None:
    async with plane_with(ws_ping_interval_s=0.05, ws_ping_timeout_s=0.2) as plane:
        host, port = plane.address
        reader, writer = await asyncio.open_connection(host, port)
        try:
            key = base64.b64encode(os.urandom(16)).decode()
            writer.write(
                f"GET /ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n".encode()
            )
            async with asyncio.timeout(BOUND_S):
                assert b" 101 " in await reader.readuntil(b"\r\n\r\n")
                auth = {"token": plane.local_token}  # the short spelling: one frame < 126 bytes
                hello = {"type": "req", "id": "c", "method": "connect", "params": auth}
                writer.write(_masked_text(json.dumps(hello, separators=(",", ":"))))
                opcodes = []
                try:
                    while True:  # hello-ok, a ping (never answered), then the close
                        opcode, _ = await _frame(reader)
                        opcodes.append(opcode)
                except asyncio.IncompleteReadError:
                    pass
        finally:
            writer.close()
        assert opcodes[0] == 0x1  # hello-ok
        assert 0x9 in opcodes  # a ping
        assert opcodes[-1] == 0x8  # the server closed (keepalive ping timeout)


# -- the accept-error log ----------------------------------------------------------------------


async def test_accept_errors_are_logged_at_most_once_per_interval(
    plane_with: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="asyncio")
    loop = asyncio.get_running_loop()
    error = OSError(errno.EMFILE, "Too many open files")
    async with plane_with():
        for _ in range(1000):  # what asyncio's accept loop reports when it runs out of fds
            loop.call_exception_handler(
                {"message": "socket.accept() out of system resource", "exception": error}
            )
        logged = [r for r in caplog.records if "socket.accept()" in r.getMessage()]
        assert len(logged) == 1
    # Once the plane is gone, the filter is too.
    loop.call_exception_handler(
        {"message": "socket.accept() out of system resource", "exception": error}
    )
    assert len([r for r in caplog.records if "socket.accept()" in r.getMessage()]) == 2


def _record(name: str, msg: str, exc: BaseException | None = None) -> logging.LogRecord:
    info = (type(exc), exc, None) if exc is not None else None
    return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, None, info)


def test_the_log_throttle_passes_one_record_per_interval_with_the_count_held_back() -> None:
    now = [100.0]
    throttle = LogThrottle(10.0, clock=lambda: now[0])
    emfile = OSError(errno.EMFILE, "Too many open files")
    accept = "socket.accept() out of system resource\nsocket: <socket>"
    passed = [throttle.filter(_record("asyncio", accept, emfile)) for _ in range(5000)]
    assert passed.count(True) == 1
    assert passed[0]
    now[0] += 9.9
    assert not throttle.filter(_record("asyncio", accept, emfile))
    now[0] += 0.2  # the interval is over: one passes, saying how many were held back
    later = _record("asyncio", accept, emfile)
    assert throttle.filter(later)
    assert "(5000 more like it in the last 10s were not logged)" in later.getMessage()
    assert later.getMessage().startswith("socket.accept() out of system resource")
    # Another kind (uvicorn's EMFILE) has its own interval; other records always pass.
    assert throttle.filter(_record("uvicorn.error", "Exception in callback", emfile))
    assert not throttle.filter(_record("uvicorn.error", "Exception in callback", emfile))
    assert all(
        throttle.filter(_record("asyncio", "Task exception was never retrieved")) for _ in range(3)
    )
    assert all(throttle.filter(_record("uvicorn.error", "boom", ValueError("x"))) for _ in range(3))
    assert throttle.statistics() == LogThrottleStatistics(passed=3, suppressed=5001)


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("connect_timeout_s", 0),
        ("header_timeout_s", -1.0),
        ("max_connections", 0),
        ("max_connections_per_client", 0),
        ("ws_ping_interval_s", 0),
        ("ws_ping_timeout_s", -5),
    ],
)
def test_admission_settings_that_cannot_hold_are_refused(setting: str, value: float) -> None:
    config = ControlPlaneConfig.from_settings({"port": 0, setting: value}, environ={})
    with pytest.raises(ControlPlaneConfigError, match=setting):
        config.check()


def test_admission_settings_default_to_the_documented_bounds() -> None:
    config = ControlPlaneConfig()
    assert (config.connect_timeout_s, config.header_timeout_s) == (10.0, 10.0)
    assert (config.max_connections, config.max_connections_per_client) == (1024, 256)
    assert (config.ws_ping_interval_s, config.ws_ping_timeout_s) == (20.0, 20.0)
    pings_off = ControlPlaneConfig.from_settings(
        {"port": 0, "ws_ping_interval_s": None}, environ={}
    )
    pings_off.check()
    assert pings_off.ws_ping_interval_s is None


async def test_the_admission_bounds_come_from_the_config_file(tmp_path: Path, work: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        "[control_plane]\nconnect_timeout_s = 2.5\nmax_connections_per_client = 7\n"
    )
    loaded = load_config(home=home, cwd=work, environ={})
    options = [ControlPlaneOptions(port=0, cwd=str(work))]
    async with Runtime(profile="daemon", config=loaded, options=options) as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        assert plane.config.connect_timeout_s == 2.5
        assert plane.config.max_connections_per_client == 7
        assert plane.config.max_connections == 1024, "an unset bound keeps its default"


def test_a_bad_admission_bound_is_a_config_error(tmp_path: Path, work: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[control_plane]\nmax_connections = 0\n")
    with pytest.raises(ConfigError, match="max_connections"):
        load_config(home=home, cwd=work, environ={})
