"""The browser's pinning proxy over real sockets: credentials, a CONNECT tunnel and a plain
request to the checked address, refusals (403 with the reason), a chunked body refused, and
the pin (a name the guard resolved is connected to by that address, never resolved again)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator

import pytest

from lemon_browser import AddressGuard, PinningProxy
from lemon_browser.testing import FixtureSite


class Names:
    """A resolver stub: fixed answers per name, counting the lookups."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.calls = 0

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls += 1
        if host not in self.answers:
            raise OSError(f"no such name {host}")
        return self.answers[host]


@pytest.fixture
async def site() -> AsyncIterator[FixtureSite]:
    async with FixtureSite() as s:
        s.page("/hello", "<p>hello through the proxy</p>")
        yield s


def _auth(proxy: PinningProxy) -> str:
    token = base64.b64encode(f"{proxy.username}:{proxy.password}".encode()).decode()
    return f"Proxy-Authorization: Basic {token}\r\n"


async def _exchange(proxy: PinningProxy, raw: bytes, then: bytes = b"") -> bytes:
    port = int(proxy.server.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        if then:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            writer.write(then)
            await writer.drain()
            return head + await asyncio.wait_for(reader.read(), 10)
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


async def test_without_the_credential_the_proxy_answers_407(site: FixtureSite) -> None:
    async with PinningProxy(guard=AddressGuard(allow_hosts=[site.host_port])) as proxy:
        answer = await _exchange(proxy, f"GET {site.url('/hello')} HTTP/1.1\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 407 ")
    assert b'Proxy-Authenticate: Basic realm="lemon-browser"' in answer
    assert site.requests == []


async def test_a_plain_request_goes_to_the_checked_address_of_the_name(
    site: FixtureSite,
) -> None:
    names = Names({"pinned.test": ["127.0.0.1"]})  # no real resolver knows this name
    guard = AddressGuard(allow_hosts=[f"pinned.test:{site.port}"], resolver=names)
    async with PinningProxy(guard=guard) as proxy:
        url = f"http://pinned.test:{site.port}/hello"
        request = f"GET {url} HTTP/1.1\r\nHost: pinned.test:{site.port}\r\n{_auth(proxy)}"
        answer = await _exchange(proxy, (request + "Connection: keep-alive\r\n\r\n").encode())
        assert proxy.statistics()["requests"] == 1
    assert answer.startswith(b"HTTP/1.1 200")
    assert b"hello through the proxy" in answer
    seen = site.requests[0]
    assert seen.path == "/hello"
    assert seen.headers["host"] == f"pinned.test:{site.port}"
    assert seen.headers["connection"] == "close"
    assert "proxy-authorization" not in seen.headers  # the credential stays with the proxy
    assert names.calls == 1


async def test_a_connect_tunnel_carries_bytes_to_the_checked_address(site: FixtureSite) -> None:
    async with PinningProxy(guard=AddressGuard(allow_hosts=[site.host_port])) as proxy:
        connect = f"CONNECT {site.host_port} HTTP/1.1\r\n{_auth(proxy)}\r\n".encode()
        inner = f"GET /hello HTTP/1.1\r\nHost: {site.host_port}\r\n\r\n".encode()
        answer = await _exchange(proxy, connect, then=inner)
        assert proxy.statistics()["tunnels"] == 1
    assert answer.startswith(b"HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.1 200")
    assert b"hello through the proxy" in answer


async def test_a_refused_address_gets_403_with_the_reason_and_is_recorded(
    site: FixtureSite,
) -> None:
    async with PinningProxy(guard=AddressGuard()) as proxy:  # loopback not allowed
        plain = await _exchange(
            proxy, f"GET {site.url('/hello')} HTTP/1.1\r\n{_auth(proxy)}\r\n".encode()
        )
        tunnel = await _exchange(
            proxy, f"CONNECT 169.254.169.254:443 HTTP/1.1\r\n{_auth(proxy)}\r\n".encode()
        )
        refusals = list(proxy.refusals)
        assert proxy.statistics()["refused"] == 2
    assert plain.startswith(b"HTTP/1.1 403 ")
    assert b"X-Lemon-Refused: 127.0.0.1 is a loopback address" in plain
    assert tunnel.startswith(b"HTTP/1.1 403 ")
    assert b"metadata" in tunnel
    assert [r.target for r in refusals] == [site.url("/hello"), "https://169.254.169.254:443/"]
    assert site.requests == []


async def test_a_chunked_request_body_and_a_malformed_line_are_refused(
    site: FixtureSite,
) -> None:
    async with PinningProxy(guard=AddressGuard(allow_hosts=[site.host_port])) as proxy:
        chunked = await _exchange(proxy, (
            f"POST {site.url('/hello')} HTTP/1.1\r\n{_auth(proxy)}"
            "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        ).encode())  # fmt: skip
        garbage = await _exchange(proxy, b"NONSENSE\r\n\r\n")
    assert chunked.startswith(b"HTTP/1.1 411 ")
    assert garbage.startswith(b"HTTP/1.1 400 ")
    assert site.requests == []


class Stalled:
    """A resolver that never answers (a DNS server that went away)."""

    def __init__(self) -> None:
        self.asked = asyncio.Event()

    async def resolve(self, host: str, port: int) -> list[str]:
        self.asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_closing_ends_a_connection_waiting_on_a_lookup(
    caplog: pytest.LogCaptureFixture,
) -> None:
    resolver = Stalled()
    proxy = PinningProxy(guard=AddressGuard(resolver=resolver))
    await proxy.__aenter__()
    port = int(proxy.server.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"CONNECT stalled.test:443 HTTP/1.1\r\n{_auth(proxy)}\r\n".encode())
    await writer.drain()
    await asyncio.wait_for(resolver.asked.wait(), 10)
    assert proxy.statistics()["open"] == 1
    await asyncio.wait_for(proxy.aclose(), 10)
    assert proxy.statistics()["open"] == 0
    assert await asyncio.wait_for(reader.read(), 10) == b""  # closed, nothing answered
    writer.close()
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
