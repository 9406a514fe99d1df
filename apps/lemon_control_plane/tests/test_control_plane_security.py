"""Who may drive the daemon: loopback by default, a token for anything else, no browser page
from another origin, and tokens only as hashes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from lemon_control_plane import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    PORT_ENV,
    TOKEN_ENV,
    ControlPlane,
    ControlPlaneConfig,
    ControlPlaneConfigError,
    hash_token,
)
from lemon_control_plane.testing import ClientFactory as Client
from lemon_control_plane.testing import WireClient, wire_client
from lemon_core.runtime_errors import AppHookError
from lemon_runtime import Runtime


def test_the_default_bind_is_loopback_on_4040() -> None:
    config = ControlPlaneConfig.from_settings({}, environ={})
    assert (config.host, config.port) == (DEFAULT_HOST, DEFAULT_PORT) == ("127.0.0.1", 4040)
    config.check()
    assert ControlPlaneConfig.from_settings({}, environ={PORT_ENV: "4555"}).port == 4555


def test_a_bad_port_is_a_clear_error() -> None:
    with pytest.raises(ControlPlaneConfigError, match="must be a number"):
        ControlPlaneConfig.from_settings({}, environ={PORT_ENV: "forty"})


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "example.org"])
def test_a_non_loopback_bind_without_a_token_refuses_to_start(host: str) -> None:
    with pytest.raises(ControlPlaneConfigError, match="without a token"):
        ControlPlaneConfig(host=host).check()
    ControlPlaneConfig(host=host, token_hashes=frozenset({hash_token("t")})).check()


async def test_the_daemon_refuses_to_boot_on_a_public_bind_without_a_token(
    boot: Callable[..., Runtime],
) -> None:
    runtime = boot(host="0.0.0.0")
    with pytest.raises(AppHookError, match="without a token"):
        await runtime.start()


def test_tokens_are_kept_hashed() -> None:
    config = ControlPlaneConfig.from_settings({}, environ={TOKEN_ENV: "s3cret-token"})
    assert "s3cret-token" not in repr(config)
    assert config.accepts_token("s3cret-token")
    assert not config.accepts_token("other")
    assert not config.accepts_token(None)


async def _refused(url: str, origin: str) -> int:
    with pytest.raises(InvalidStatus) as refused:
        async with connect(url, origin=origin):  # type: ignore[arg-type]  # websockets types Origin as a NewType of str
            pass
    return refused.value.response.status_code


async def _accepted(url: str, origin: str, token: str | None) -> bool:
    async with connect(url, origin=origin) as ws:  # type: ignore[arg-type]  # as above
        return (await WireClient(ws, token).connect())["type"] == "hello-ok"


async def test_a_page_from_another_origin_cannot_open_the_socket(daemon: ControlPlane) -> None:
    port = daemon.address[1]
    other = port + 1 if port < 65535 else port - 1
    for origin in (
        "http://evil.example",
        f"http://evil.example:{port}",  # DNS rebinding: a foreign name resolving to loopback
        "http://localhost:5173",  # another local web server
        f"http://127.0.0.1:{other}",
        "http://localhost",
        "null",
        f"file://localhost:{port}",
        "http://[::1",
    ):
        assert await _refused(daemon.ws_url, origin) == 403, origin
    # The daemon's own origin, under each loopback alias of its port (the web page it serves).
    for origin in (
        f"http://127.0.0.1:{port}",
        f"http://localhost:{port}",
        f"http://LOCALHOST:{port}",
        f"http://[::1]:{port}",
        f"https://127.0.0.1:{port}",
    ):
        assert await _accepted(daemon.ws_url, origin, daemon.local_token), origin


async def test_configured_extra_origins_are_accepted(boot: Callable[..., Runtime]) -> None:
    async with boot(extra_origins=["http://localhost:5173"]) as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        assert await _accepted(plane.ws_url, "http://localhost:5173", plane.local_token)
        assert await _refused(plane.ws_url, "http://localhost:5174") == 403


async def test_with_tokens_configured_a_connection_must_present_one(
    boot: Callable[..., Runtime],
) -> None:
    async with boot(tokens=["s3cret-token"]) as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        open_client: Client = wire_client(plane.ws_url)
        async with open_client(handshake=False) as c:
            refused = await c.connect()
            assert refused["ok"] is False
            assert refused["error"]["code"] == "UNAUTHORIZED"
            assert "s3cret" not in str(refused)
            with pytest.raises(ConnectionClosed):
                await c.next_frame()
        async with open_client(handshake=False) as c:
            hello = await c.connect(auth={"token": "s3cret-token"})
            assert hello["type"] == "hello-ok"
            assert (await c.request("health"))["ok"] is True


async def test_a_connection_may_ask_for_fewer_scopes(client: Client) -> None:
    async with client(handshake=False) as c:
        hello = await c.connect(scopes=["read"])
        assert hello["auth"]["scopes"] == ["read"]
        res = await c.request("chat.send", {"sessionKey": "s", "prompt": "hi"})
    assert res["error"] == {
        "code": "FORBIDDEN",
        "message": "Insufficient permissions for chat.send",
    }
