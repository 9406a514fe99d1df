"""OAuth against a real MCP server on the official SDK (bearer tokens required, its
protected-resource metadata served by the SDK) and a small authorization server on loopback in
the same process, speaking the real wire (RFC 8414 metadata, RFC 7591 registration, PKCE,
rotating refresh tokens, client credentials)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import stat
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from lemon_core.config import Config
from lemon_mcp import McpAuthError, McpHubImpl, OAuthClient, OAuthSettings, TokenStore

AUTH_SERVER = str(Path(__file__).parent / "servers" / "oauth_mcp_server.py")
ConfigFor = Callable[..., tuple[Config, Path, Path]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def _auth_server(*mode: str) -> AsyncIterator[str]:
    port = _free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, AUTH_SERVER, str(port), *mode,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        for _ in range(600):  # ready when it accepts connections (bounded: 60 s)
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            await asyncio.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)


@pytest.fixture
async def base() -> AsyncIterator[str]:
    async with _auth_server() as url:
        yield url


async def _browser(url: str) -> None:
    """The person's browser: the authorization server approves at once and redirects to our
    loopback listener, which the browser then opens."""
    async with httpx.AsyncClient(follow_redirects=False) as http:
        answer = await http.get(url)
        assert answer.status_code == 302, answer.text
        landed = await http.get(answer.headers["location"])
        assert "login is done" in landed.text


async def _stats(base: str) -> dict[str, Any]:
    async with httpx.AsyncClient() as http:
        body: dict[str, Any] = (await http.get(f"{base}/test/stats")).json()
        return body


def _oauth_config(base: str, extra: str = "") -> str:
    return f'[mcp.servers.web]\nurl = "{base}/mcp"\nauth = "oauth"\napproval = "allow"\n{extra}'


async def test_login_with_pkce_and_dynamic_registration_then_the_hub_calls_the_tool(
    base: str, config_for: ConfigFor, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    config, home, work = config_for(_oauth_config(base))
    client = OAuthClient(name="web", server_url=f"{base}/mcp", settings=OAuthSettings(),
                         home=home, environ={})  # fmt: skip
    token = await client.login(_browser, timeout_s=30)
    assert token.issuer == base
    assert token.resource == f"{base}/mcp"
    assert token.client_id.startswith("dyn-")
    stats = await _stats(base)
    assert stats["registrations"] == 1
    assert stats["grants"] == ["authorization_code"]
    path = TokenStore(home).path("web")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert token.access_token not in (home / "config.toml").read_text()

    hub = McpHubImpl(home=home, environ={})
    try:
        found = await hub.discover(config, cwd=work)
        assert found.unavailable == {}
        [whoami] = [t for t in found.tools if t.tool == "whoami"]
        assert (await hub.call(whoami, {})).content == "hello from behind oauth"
    finally:
        await hub.aclose()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert token.access_token not in logged
    assert token.refresh_token not in logged


async def test_without_a_login_the_server_is_unavailable_and_says_how_to_log_in(
    base: str, config_for: ConfigFor
) -> None:
    config, home, work = config_for(_oauth_config(base))
    hub = McpHubImpl(home=home, environ={})
    try:
        found = await hub.discover(config, cwd=work)
        assert "needs a login: run `lemon mcp login web`" in found.unavailable["web"]
    finally:
        await hub.aclose()


async def test_client_credentials_fetch_a_token_with_no_login(
    base: str, config_for: ConfigFor
) -> None:
    config, home, work = config_for(
        _oauth_config(
            base,
            '[mcp.servers.web.oauth]\ngrant = "client_credentials"\nclient_id = "svc"\n'
            'client_secret_env = "SVC_SECRET"\n',
        )
    )
    hub = McpHubImpl(home=home, environ={"SVC_SECRET": "svc-secret"})
    try:
        found = await hub.discover(config, cwd=work)
        assert found.unavailable == {}
        [whoami] = [t for t in found.tools if t.tool == "whoami"]
        assert (await hub.call(whoami, {})).content == "hello from behind oauth"
    finally:
        await hub.aclose()
    assert (await _stats(base))["grants"] == ["client_credentials:basic"]
    assert "svc-secret" not in TokenStore(home).path("web").read_text()


async def test_a_wrong_client_secret_is_refused_without_showing_it(
    base: str, config_for: ConfigFor
) -> None:
    config, home, work = config_for(
        _oauth_config(
            base,
            '[mcp.servers.web.oauth]\ngrant = "client_credentials"\nclient_id = "svc"\n'
            'client_secret_env = "SVC_SECRET"\n',
        )
    )
    hub = McpHubImpl(home=home, environ={"SVC_SECRET": "wrong-secret"})
    try:
        found = await hub.discover(config, cwd=work)
        assert "HTTP 401 (invalid_client)" in found.unavailable["web"]
        assert "wrong-secret" not in found.unavailable["web"]
    finally:
        await hub.aclose()


def _expire_soon(home: Path) -> None:
    store = TokenStore(home)
    token = store.load("web")
    assert token is not None
    store.save("web", msgspec.structs.replace(token, expires_at=time.time() + 5))


async def test_a_token_about_to_expire_is_refreshed_before_it_is_sent(
    base: str, config_for: ConfigFor
) -> None:
    config, home, work = config_for(_oauth_config(base))
    client = OAuthClient(name="web", server_url=f"{base}/mcp", settings=OAuthSettings(),
                         home=home, environ={})  # fmt: skip
    first = await client.login(_browser, timeout_s=30)
    _expire_soon(home)
    hub = McpHubImpl(home=home, environ={})
    try:
        found = await hub.discover(config, cwd=work)
        assert found.unavailable == {}
    finally:
        await hub.aclose()
    assert (await _stats(base))["grants"] == ["authorization_code", "refresh_token"]
    now = TokenStore(home).load("web")
    assert now is not None
    assert now.access_token != first.access_token
    assert now.refresh_token != first.refresh_token  # rotated


async def test_a_401_mid_session_refreshes_once_and_retries(
    base: str, config_for: ConfigFor
) -> None:
    config, home, work = config_for(_oauth_config(base))
    client = OAuthClient(name="web", server_url=f"{base}/mcp", settings=OAuthSettings(),
                         home=home, environ={})  # fmt: skip
    await client.login(_browser, timeout_s=30)
    hub = McpHubImpl(home=home, environ={})
    try:
        found = await hub.discover(config, cwd=work)
        [whoami] = [t for t in found.tools if t.tool == "whoami"]
        async with httpx.AsyncClient() as http:
            await http.post(f"{base}/test/expire")  # the server revokes every token
        assert (await hub.call(whoami, {})).content == "hello from behind oauth"
    finally:
        await hub.aclose()
    assert (await _stats(base))["grants"] == ["authorization_code", "refresh_token"]


async def test_two_clients_refreshing_at_once_refresh_once(
    base: str, config_for: ConfigFor
) -> None:
    """Refresh tokens rotate: a second refresh with the old one would fail. The file lock
    makes the second client wait and take the token the first one stored."""
    _config, home, _work = config_for(_oauth_config(base))
    settings = OAuthSettings()
    first = OAuthClient(name="web", server_url=f"{base}/mcp", settings=settings, home=home,
                        environ={})  # fmt: skip
    await first.login(_browser, timeout_s=30)
    _expire_soon(home)
    a = OAuthClient(name="web", server_url=f"{base}/mcp", settings=settings, home=home, environ={})
    b = OAuthClient(name="web", server_url=f"{base}/mcp", settings=settings, home=home, environ={})
    got_a, got_b = await asyncio.gather(a.authorization(), b.authorization())
    assert got_a == got_b
    assert (await _stats(base))["grants"] == ["authorization_code", "refresh_token"]


async def test_a_token_of_another_issuer_is_never_sent(base: str, config_for: ConfigFor) -> None:
    config, home, work = config_for(_oauth_config(base))
    TokenStore(home).save(
        "web",
        msgspec.convert(
            {"issuer": "https://elsewhere.example", "resource": f"{base}/mcp",
             "client_id": "x", "access_token": "foreign-token", "expires_at": time.time() + 3600},
            type=__import__("lemon_mcp").StoredToken,
        ),
    )  # fmt: skip
    client = OAuthClient(name="web", server_url=f"{base}/mcp", settings=OAuthSettings(),
                         home=home, environ={})  # fmt: skip
    assert await client.authorization() is None
    hub = McpHubImpl(home=home, environ={})
    try:
        found = await hub.discover(config, cwd=work)
        assert "needs a login" in found.unavailable["web"]
    finally:
        await hub.aclose()


async def test_logout_forgets_the_token(base: str, config_for: ConfigFor) -> None:
    _config, home, _work = config_for(_oauth_config(base))
    client = OAuthClient(name="web", server_url=f"{base}/mcp", settings=OAuthSettings(),
                         home=home, environ={})  # fmt: skip
    await client.login(_browser, timeout_s=30)
    assert client.logout() is True
    assert TokenStore(home).load("web") is None
    assert client.logout() is False


async def test_a_login_answer_with_the_wrong_state_is_refused(
    base: str, config_for: ConfigFor
) -> None:
    _config, home, _work = config_for(_oauth_config(base))

    async def forged(url: str) -> None:
        async with httpx.AsyncClient(follow_redirects=False) as http:
            location = (await http.get(url)).headers["location"]
            await http.get(location.replace("state=", "state=forged"))

    client = OAuthClient(name="web", server_url=f"{base}/mcp", settings=OAuthSettings(),
                         home=home, environ={})  # fmt: skip
    with pytest.raises(McpAuthError, match="state does not match"):
        await client.login(forged, timeout_s=30)
    assert TokenStore(home).load("web") is None


def test_an_http_issuer_off_loopback_is_refused() -> None:
    from lemon_mcp._oauth import _check_url

    with pytest.raises(McpAuthError, match="not https"):
        _check_url("http://auth.example.com/", "issuer")
    assert _check_url("https://auth.example.com/", "issuer")
    assert json.dumps(_check_url("http://127.0.0.1:9/", "issuer"))


async def test_a_device_code_login_polls_until_the_person_entered_the_code(
    base: str, config_for: ConfigFor
) -> None:
    config, home, work = config_for(_oauth_config(base))
    shown: list[tuple[str, str]] = []

    async def person(uri: str, user_code: str) -> None:
        shown.append((uri, user_code))
        async with httpx.AsyncClient() as http:  # they enter the code on another device
            r = await http.post(f"{base}/device/verify", data={"user_code": user_code})
            assert r.status_code == 200

    client = OAuthClient(name="web", server_url=f"{base}/mcp", settings=OAuthSettings(),
                         home=home, environ={})  # fmt: skip
    token = await client.login_device(person, timeout_s=30)
    assert shown[0][0] == f"{base}/device/verify"
    assert token.issuer == base
    assert (await _stats(base))["grants"] == ["device_code"]  # after one pending poll
    hub = McpHubImpl(home=home, environ={})
    try:
        found = await hub.discover(config, cwd=work)
        assert found.unavailable == {}
    finally:
        await hub.aclose()


async def test_client_credentials_over_the_legacy_sse_transport(config_for: ConfigFor) -> None:
    async with _auth_server("sse") as base:
        config, home, work = config_for(
            f'[mcp.servers.web]\nurl = "{base}/sse"\nauth = "oauth"\napproval = "allow"\n'
            '[mcp.servers.web.oauth]\ngrant = "client_credentials"\nclient_id = "svc"\n'
            'client_secret_env = "SVC_SECRET"\n'
        )
        hub = McpHubImpl(home=home, environ={"SVC_SECRET": "svc-secret"})
        try:
            found = await hub.discover(config, cwd=work)
            assert found.unavailable == {}
            [whoami] = [t for t in found.tools if t.tool == "whoami"]
            assert (await hub.call(whoami, {})).content == "hello from behind oauth"
            [status] = hub.status()
            assert status.detail == "sse (legacy)"
        finally:
            await hub.aclose()


def test_an_issuer_with_a_path_is_looked_up_under_that_path_only() -> None:
    """The MCP spec's order (the conformance suite's auth/metadata-var3): path inserted for
    RFC 8414 and OpenID, then OpenID appended; the root's metadata is another tenant's."""
    from lemon_mcp._oauth import _metadata_urls

    assert _metadata_urls("https://as.example/tenant1/") == [
        "https://as.example/.well-known/oauth-authorization-server/tenant1",
        "https://as.example/.well-known/openid-configuration/tenant1",
        "https://as.example/tenant1/.well-known/openid-configuration",
    ]
    assert _metadata_urls("https://as.example") == [
        "https://as.example/.well-known/oauth-authorization-server",
        "https://as.example/.well-known/openid-configuration",
    ]
