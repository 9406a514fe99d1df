"""What a browser page needs of the plane: its WebSocket authenticates from the page's HttpOnly
cookie (AUTH_COOKIE) when the connect carries no token, a page it serves itself (same host:port)
passes the Origin check on a bind that needs a token, and a pane may ask for a smaller per-event
bound, above which it gets one stream.resync marker instead of a silently dropped event."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus
from websockets.typing import Origin

from lemon_control_plane import AUTH_COOKIE, ControlPlane
from lemon_control_plane._connection import Connection
from lemon_control_plane.testing import WireClient, plane_client, wire_client
from lemon_control_plane.tokens import TokenStore, tokens_path
from lemon_runtime import Runtime

TOKEN = "cookie-test-token-0123456789"


async def _plane(runtime: Runtime) -> ControlPlane:
    plane = runtime.handle("lemon_control_plane")
    assert isinstance(plane, ControlPlane)
    return plane


async def test_the_connect_authenticates_from_the_sign_in_cookie_never_a_token_in_it(
    boot: Callable[..., Runtime],
) -> None:
    async with boot(tokens=[TOKEN]) as runtime:
        plane = await _plane(runtime)
        assert plane.requires_token
        assert plane.token_valid(TOKEN)
        assert not plane.token_valid("wrong")
        signed = plane.sign_in(TOKEN, address="127.0.0.1")
        assert signed.session is not None
        assert TOKEN not in signed.session
        cookie = {"Cookie": f"{AUTH_COOKIE}={signed.session}"}
        async with wire_client(plane.ws_url)(additional_headers=cookie) as c:
            assert (await c.call("health"))["ok"] is True
        # A token where the sign-in id belongs is nothing: the cookie never holds a token.
        for value in (TOKEN, "wrong"):
            bad = {"Cookie": f"{AUTH_COOKIE}={value}"}
            async with connect(plane.ws_url, additional_headers=bad) as ws:
                refused = await WireClient(ws).connect()
            assert refused["error"]["code"] == "UNAUTHORIZED", value
        async with connect(plane.ws_url) as ws:  # neither a token nor a cookie
            refused = await WireClient(ws).connect()
        assert refused["error"]["code"] == "UNAUTHORIZED"
        assert plane.sign_in("wrong", address="127.0.0.1").refused == "invalid"
        plane.sign_out(signed.session)
        async with connect(plane.ws_url, additional_headers=cookie) as ws:
            assert (await WireClient(ws).connect())["error"]["code"] == "UNAUTHORIZED"


async def test_a_stale_cookie_is_ignored_where_no_token_is_needed(
    boot: Callable[..., Runtime],
) -> None:
    async with boot(local_auth=False) as runtime:
        plane = await _plane(runtime)
        assert not plane.requires_token
        stale = {"Cookie": f"{AUTH_COOKIE}=revoked-long-ago"}
        async with wire_client(plane.ws_url)(additional_headers=stale) as c:
            assert (await c.call("health"))["ok"] is True


def _lan_address() -> str | None:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # TEST-NET-1: a UDP connect sends nothing
        address = str(probe.getsockname()[0])
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address


async def test_the_pages_own_origin_passes_on_a_token_bind_and_others_do_not(
    boot: Callable[..., Runtime],
) -> None:
    lan = _lan_address()
    if lan is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    async with boot(host="0.0.0.0", tokens=[TOKEN]) as runtime:
        plane = await _plane(runtime)
        url = f"ws://{lan}:{plane.address[1]}/ws"
        own = Origin(f"http://{lan}:{plane.address[1]}")
        async with wire_client(url)(handshake=False, origin=own) as c:
            hello = await c.connect(auth={"token": TOKEN})
        assert hello["type"] == "hello-ok"
        for foreign in (f"http://{lan}:1", "http://evil.example", f"ftp://{lan}:1"):
            with pytest.raises(InvalidStatus) as refused:
                async with connect(url, origin=Origin(foreign)):
                    pass
            assert refused.value.response.status_code == 403, foreign


async def test_an_event_above_the_panes_bound_becomes_one_resync_marker(
    boot: Callable[..., Runtime],
) -> None:
    async with boot() as runtime:
        plane = await _plane(runtime)
        async with plane_client(plane)(handshake=False) as c:
            hello = await c.connect(maxEventBytes=400)
            assert hello["policy"]["maxEventBytes"] == 400
            sent = await c.call("chat.send", {"sessionKey": "pane", "prompt": "/echo " + "y" * 600})
            for _ in range(200):  # the run's end, as the authority reports it
                snap = await c.call("sessions.snapshot", {"sessionKey": "pane"})
                if snap["lastRunId"] == sent["runId"] and snap["active"] is None:
                    break
                await asyncio.sleep(0.01)
            events = c.events()
        markers = [e for e in events if e["event"] == "stream.resync"]
        assert markers, "the oversized completion was replaced by a marker"
        assert "maxEventBytes" in markers[0]["payload"]["reason"]
        assert not any(
            e["event"] == "agent" and e["payload"]["type"] == "completed" for e in events
        )
        assert snap["lastOk"] is True  # recoverable from the snapshot


async def test_a_suspended_pane_given_1000_events_never_holds_more_than_270() -> None:
    gate = asyncio.Event()
    sent: list[str] = []

    async def send(text: str) -> None:
        await gate.wait()  # the pane is suspended: nothing is read
        sent.append(text)

    async def close(code: int, reason: str) -> None:
        sent.append(f"closed {code}")

    conn = Connection("pane", send=send, close=close, max_event_bytes=65_536)
    conn.online = True
    writer = asyncio.create_task(conn.run_writer())
    try:
        conn.push_event(b'"chat"', b'{"type":"delta","text":"first"}')
        await asyncio.sleep(0)  # the writer takes the first frame and blocks in send
        peak = 0
        for i in range(1000):
            conn.push_event(b'"chat"', b'{"type":"delta","text":"w%d"}' % i)
            peak = max(peak, conn.statistics().queued)
        stats = conn.statistics()
        assert peak <= 270
        assert stats.resyncs == 1  # one overflow marker ...
        assert stats.queued == 0  # ... and falling behind again closes: the pane reconnects
        gate.set()
        await asyncio.wait_for(writer, 5)
        assert sent[-1] == "closed 4008"
    finally:
        gate.set()
        writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)


async def test_a_public_bind_stays_closed_once_its_last_stored_token_is_revoked(
    boot: Callable[..., Runtime], tmp_path: Path
) -> None:
    store = TokenStore(tokens_path(tmp_path / "home"))
    entry, secret = store.create("only")
    async with boot(host="0.0.0.0") as runtime:
        plane = await _plane(runtime)
        url = f"ws://127.0.0.1:{plane.address[1]}/ws"
        async with wire_client(url)(handshake=False) as c:
            assert (await c.connect(auth={"token": secret}))["type"] == "hello-ok"
        store.revoke(entry.id)
        plane.refresh_tokens()
        assert plane.requires_token  # fail closed: no token left is not "no token needed"
        async with connect(url) as ws:
            refused = await WireClient(ws).connect()
        assert refused["error"]["code"] == "UNAUTHORIZED"
