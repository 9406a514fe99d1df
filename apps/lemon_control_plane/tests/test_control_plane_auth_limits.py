"""Failed authentications are limited per client address: past the limit an address is refused
(``RATE_LIMITED``, then closed), even with the right token, until its window passes; another
address is not affected; the table of addresses is bounded. Real sockets from two loopback
source addresses (127.0.0.1 and 127.0.0.2) and an injected clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from lemon_control_plane import ControlPlane, ControlPlaneConfig
from lemon_control_plane._limiter import AddressLimiter, address_key
from lemon_control_plane.testing import WireClient
from lemon_core.sessions import SESSION_PORT
from lemon_runtime import Runtime

A = "127.0.0.1"
B = "127.0.0.2"


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def limited(
    boot: Callable[..., Runtime],
) -> AsyncIterator[tuple[ControlPlane, Clock]]:
    clock = Clock()
    async with boot() as runtime:
        port = runtime.context.capabilities.require(SESSION_PORT)
        config = ControlPlaneConfig(port=0, auth_failures=3, auth_window_s=60.0)
        async with ControlPlane(port, config, clock=clock) as plane:
            yield plane, clock


async def _connect(plane: ControlPlane, source: str, token: str | None) -> dict[str, Any]:
    """One ``connect`` from ``source`` (a loopback address of this machine)."""
    async with connect(plane.ws_url, local_addr=(source, 0)) as ws:
        reply = await WireClient(ws, token).connect()
        if reply.get("type") != "hello-ok":
            with pytest.raises(ConnectionClosed) as closed:
                await WireClient(ws).next_frame()
            reply["closed"] = closed.value.rcvd.code if closed.value.rcvd else None
        return reply


async def test_guesses_past_the_limit_are_refused_even_with_the_right_token_until_the_window(
    limited: tuple[ControlPlane, Clock],
) -> None:
    plane, clock = limited
    for _ in range(3):
        wrong = await _connect(plane, A, "lcp_guess")
        assert wrong["error"]["code"] == "UNAUTHORIZED"
    refused = await _connect(plane, A, plane.local_token)
    assert refused["error"]["code"] == "RATE_LIMITED"
    assert refused["error"]["details"]["retryAfterMs"] == 60_000
    assert refused["closed"] == 4029
    assert (await _connect(plane, A, None))["error"]["code"] == "RATE_LIMITED"
    clock.now += 59
    assert (await _connect(plane, A, plane.local_token))["error"]["code"] == "RATE_LIMITED"
    clock.now += 1.5  # the oldest failure left the window
    assert (await _connect(plane, A, plane.local_token))["type"] == "hello-ok"


async def test_one_address_failing_does_not_lock_out_another(
    limited: tuple[ControlPlane, Clock],
) -> None:
    plane, _ = limited
    for _ in range(3):
        await _connect(plane, A, "lcp_guess")
    assert (await _connect(plane, A, plane.local_token))["error"]["code"] == "RATE_LIMITED"
    assert (await _connect(plane, B, plane.local_token))["type"] == "hello-ok"
    stats = plane.access_statistics()["auth"]
    assert (stats["addresses"], stats["limited"], stats["failures"]) == (1, 1, 3)


async def test_page_sign_ins_and_connects_share_the_addresses_limit(
    limited: tuple[ControlPlane, Clock],
) -> None:
    plane, _ = limited
    assert plane.sign_in("wrong", address=A).refused == "invalid"
    assert plane.sign_in_once("wrong", address=A).refused == "invalid"
    assert (await _connect(plane, A, "lcp_guess"))["error"]["code"] == "UNAUTHORIZED"
    signed = plane.sign_in(plane.local_token, address=A)
    assert signed.refused == "rate_limited"
    assert signed.retry_after_s == 60.0
    assert plane.sign_in(plane.local_token, address=B).session is not None


def test_the_address_table_is_bounded_and_ipv6_counts_per_64() -> None:
    clock = Clock()
    limiter = AddressLimiter(failures=2, window_s=60, addresses=3, clock=clock)
    for host in ("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"):
        limiter.failed(host)
    stats = limiter.statistics()
    assert (stats.addresses, stats.forgotten) == (3, 1)
    assert address_key("2001:db8:1:2::1") == address_key("2001:db8:1:2:ffff::9")
    assert address_key("2001:db8:1:3::1") != address_key("2001:db8:1:2::1")
    assert address_key("::ffff:10.0.0.9") == "10.0.0.9"
    assert address_key(None) == "unknown"
    limiter.failed("2001:db8:1:2::1")
    limiter.failed("2001:db8:1:2::2")
    assert limiter.retry_after("2001:db8:1:2::3") == 60.0
    assert limiter.retry_after("10.0.0.4") is None
