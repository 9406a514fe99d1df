"""Where the OAuth client finds the authorization server, against a real server on 127.0.0.1
(Starlette on uvicorn, in the test's loop): our own MCP server (``McpHttpApp``) behind a bearer
check, and a small authorization server beside it (RFC 8414 / OpenID metadata, RFC 7591
registration, authorization code with PKCE S256). Each layout is one the conformance suite
checks: a 2025-03-26 server (no protected-resource metadata; its origin names an issuer with a
path, or has no metadata at all and uses the default endpoints), and an issuer with a path
whose metadata sits under that path only (the root's is another tenant's)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import secrets
import socket
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlencode

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from lemon_core.config import Config
from lemon_mcp import (
    ClientPeer,
    HttpTransport,
    McpClient,
    McpHubImpl,
    OAuthClient,
    OAuthSettings,
    ServedResult,
    ServedTool,
)
from lemon_mcp._server_http import McpHttpApp

ConfigFor = Callable[..., tuple[Config, Path, Path]]
Layout = Literal["legacy-named-path", "legacy-defaults", "issuer-path"]
WAIT_S = 10
_RESOURCE_METADATA = "/.well-known/oauth-protected-resource/mcp"


class _Host:
    def tools(self) -> Sequence[ServedTool]:
        return (ServedTool(name="whoami", description="Hello.", input_schema={"type": "object"}),)

    async def call(
        self, name: str, arguments: Mapping[str, Any], peer: ClientPeer, call_id: str
    ) -> ServedResult:
        return ServedResult(text="hello from behind oauth")


@dataclass
class _AuthServer:
    """The authorization server's state, and every path asked for (for the assertions)."""

    layout: Layout
    base: str = ""
    asked: list[str] = field(default_factory=list)
    clients: dict[str, list[str]] = field(default_factory=dict)
    codes: dict[str, dict[str, str]] = field(default_factory=dict)
    tokens: dict[str, set[str]] = field(default_factory=dict)
    """Each access token and its scopes."""
    required_scope: str = ""
    """Set: ``/mcp`` answers 403 ``insufficient_scope`` to a token without it (a step-up)."""
    scopes_asked: list[str] = field(default_factory=list)
    challenge_scope: str = ""
    """Set: the 401's ``WWW-Authenticate`` names this scope (and the resource metadata
    offers ``scopes_supported`` wider than it)."""
    challenge_names_scope: bool = True

    @property
    def issuer(self) -> str:
        return self.base if self.layout == "legacy-defaults" else f"{self.base}/tenant1"

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.base}/authorize",
            "token_endpoint": f"{self.base}/token",
            "registration_endpoint": f"{self.base}/register",
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
        }

    def routes(self) -> list[Route]:
        routes = [
            Route("/authorize", self.authorize),
            Route("/token", self.token, methods=["POST"]),
            Route("/register", self.register, methods=["POST"]),
        ]
        if self.layout == "legacy-named-path":  # the origin's metadata names a path issuer
            routes.append(Route("/.well-known/oauth-authorization-server", self.serve_metadata))
        if self.layout == "issuer-path":
            routes += [
                Route(_RESOURCE_METADATA, self.resource_metadata),
                Route("/tenant1/.well-known/openid-configuration", self.serve_metadata),
                Route("/.well-known/oauth-authorization-server", self.other_tenant),
                Route("/.well-known/openid-configuration", self.other_tenant),
            ]
        return routes

    async def resource_metadata(self, request: Request) -> Response:
        meta: dict[str, Any] = {
            "resource": f"{self.base}/mcp",
            "authorization_servers": [self.issuer],
        }
        if self.challenge_scope:
            meta["scopes_supported"] = [self.challenge_scope, "admin"]
        return JSONResponse(meta)

    async def serve_metadata(self, request: Request) -> Response:
        return JSONResponse(self.metadata())

    async def other_tenant(self, request: Request) -> Response:
        return JSONResponse({**self.metadata(), "issuer": self.base})

    async def register(self, request: Request) -> Response:
        body = await request.json()
        client_id = "dyn-" + secrets.token_hex(4)
        self.clients[client_id] = list(body.get("redirect_uris") or [])
        return JSONResponse({"client_id": client_id, "token_endpoint_auth_method": "none"}, 201)

    async def authorize(self, request: Request) -> Response:
        q = request.query_params
        if q.get("redirect_uri") not in self.clients.get(q.get("client_id", ""), []):
            return JSONResponse({"error": "invalid_client"}, 400)
        code = secrets.token_urlsafe(16)
        self.scopes_asked.append(q.get("scope", ""))
        self.codes[code] = {"client_id": q["client_id"], "challenge": q["code_challenge"],
                            "scope": q.get("scope", "")}  # fmt: skip
        target = q["redirect_uri"] + "?" + urlencode({"code": code, "state": q.get("state", "")})
        return RedirectResponse(target, status_code=302)

    async def token(self, request: Request) -> Response:
        form = await request.form()
        entry = self.codes.pop(str(form.get("code")), None)
        digest = hashlib.sha256(str(form.get("code_verifier", "")).encode()).digest()
        challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        if entry is None or entry["challenge"] != challenge:
            return JSONResponse({"error": "invalid_grant"}, 400)
        access = "at-" + secrets.token_hex(8)
        self.tokens[access] = set(entry["scope"].split())
        return JSONResponse({"access_token": access, "token_type": "Bearer", "expires_in": 3600})


@contextlib.asynccontextmanager
async def _serving(layout: Layout) -> AsyncIterator[_AuthServer]:
    auth = _AuthServer(layout)
    mcp = McpHttpApp(_Host())
    oauth = Starlette(routes=auth.routes())

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            auth.asked.append(scope["path"])
        if scope["type"] == "http" and scope["path"] == "/mcp":
            header = dict(scope["headers"]).get(b"authorization", b"").decode()
            scopes = auth.tokens.get(header.removeprefix("Bearer "))
            if scopes is not None and auth.required_scope not in {"", *scopes}:
                wanted = f'Bearer error="insufficient_scope", scope="{auth.required_scope}"'
                response = JSONResponse({"error": "insufficient_scope"}, 403,
                                        headers={"WWW-Authenticate": wanted})  # fmt: skip
                await response(scope, receive, send)
                return
            if scopes is None:
                challenge = "Bearer"  # 2025-03-26: no resource_metadata to point at
                if layout == "issuer-path":
                    challenge += f' resource_metadata="{auth.base}{_RESOURCE_METADATA}"'
                if auth.challenge_scope and auth.challenge_names_scope:
                    challenge += f', scope="{auth.challenge_scope}"'
                response = JSONResponse({"error": "invalid_token"}, 401,
                                        headers={"WWW-Authenticate": challenge})  # fmt: skip
                await response(scope, receive, send)
                return
            await mcp.asgi(scope, receive, send)
            return
        await oauth(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    auth.base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off"))
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while not server.started:
            assert asyncio.get_running_loop().time() < deadline, "uvicorn never started"
            await asyncio.sleep(0.005)
        yield auth
    finally:
        await mcp.aclose()
        server.should_exit = True
        await asyncio.wait_for(task, WAIT_S)
        sock.close()


async def _browser(url: str) -> None:
    """The person's browser: the server approves at once; the redirect reaches our listener."""
    async with httpx.AsyncClient(follow_redirects=False) as http:
        answer = await http.get(url)
        assert answer.status_code == 302, answer.text
        landed = await http.get(answer.headers["location"])
        assert "login is done" in landed.text


async def _login_then_call(auth: _AuthServer, config_for: ConfigFor) -> str:
    """Log in (``lemon mcp login``'s path), then the hub discovers and calls ``whoami``;
    the token's issuer is returned."""
    config, home, work = config_for(
        f'[mcp.servers.web]\nurl = "{auth.base}/mcp"\nauth = "oauth"\napproval = "allow"\n'
    )
    client = OAuthClient(name="web", server_url=f"{auth.base}/mcp", settings=OAuthSettings(),
                         home=home, environ={})  # fmt: skip
    token = await client.login(_browser, timeout_s=WAIT_S)
    hub = McpHubImpl(home=home, environ={})
    try:
        found = await hub.discover(config, cwd=work)
        assert found.unavailable == {}
        [whoami] = [t for t in found.tools if t.tool == "whoami"]
        assert (await hub.call(whoami, {})).content == "hello from behind oauth"
    finally:
        await hub.aclose()
    return token.issuer


async def test_a_2025_03_26_server_whose_origin_names_an_issuer_with_a_path(
    config_for: ConfigFor,
) -> None:
    """No protected-resource metadata: the origin is the authorization server, and its
    metadata may name an issuer on that origin with a path (2025-03-26 asks for no match)."""
    async with _serving("legacy-named-path") as auth:
        assert await _login_then_call(auth, config_for) == f"{auth.base}/tenant1"
        assert "/.well-known/oauth-protected-resource/mcp" in auth.asked  # looked for first


async def test_a_2025_03_26_server_without_metadata_uses_the_default_endpoints(
    config_for: ConfigFor,
) -> None:
    async with _serving("legacy-defaults") as auth:
        assert await _login_then_call(auth, config_for) == auth.base
        assert {"/register", "/authorize", "/token"} <= set(auth.asked)


async def test_an_issuer_with_a_path_is_found_under_its_path_never_at_the_root(
    config_for: ConfigFor,
) -> None:
    """The root's metadata is another tenant's: it is never asked for. The spec's order:
    RFC 8414 and OpenID with the path inserted, then OpenID with the path appended."""
    async with _serving("issuer-path") as auth:
        assert await _login_then_call(auth, config_for) == f"{auth.base}/tenant1"
        looked = [p for p in auth.asked if "openid" in p or "authorization-server" in p]
        assert looked[:3] == [
            "/.well-known/oauth-authorization-server/tenant1",
            "/.well-known/openid-configuration/tenant1",
            "/tenant1/.well-known/openid-configuration",
        ]
        assert "/.well-known/oauth-authorization-server" not in auth.asked
        assert "/.well-known/openid-configuration" not in auth.asked


async def test_a_403_insufficient_scope_logs_in_again_with_the_wider_scope_once(
    config_for: ConfigFor,
) -> None:
    """Where ``reauthorize`` is set (the conformance entry), a 403 naming a scope the token
    lacks is a second login asking for it, and the request is retried with the new token."""
    _config, home, _work = config_for("")
    async with _serving("issuer-path") as auth:
        oauth = OAuthClient(name="web", server_url=f"{auth.base}/mcp", settings=OAuthSettings(),
                            home=home, environ={})  # fmt: skip
        oauth.reauthorize = _browser
        await oauth.login(_browser, timeout_s=WAIT_S)
        client = McpClient(HttpTransport(name="web", url=f"{auth.base}/mcp", auth=oauth),
                           name="web")  # fmt: skip
        try:
            await client.start()
            auth.required_scope = "write"  # the tool now needs a wider scope
            result = await client.call_tool("whoami", {}, deadline_s=WAIT_S)
            assert result["content"][0]["text"] == "hello from behind oauth"
        finally:
            await client.aclose()
    assert auth.scopes_asked == ["", "write"]


async def test_without_reauthorize_a_403_insufficient_scope_says_which_login_to_run(
    config_for: ConfigFor,
) -> None:
    """The agent's hub does not log in by itself: the error names the scope and the command
    (it was a bare HTTP 403)."""
    async with _serving("issuer-path") as auth:
        config, home, work = config_for(
            f'[mcp.servers.web]\nurl = "{auth.base}/mcp"\nauth = "oauth"\napproval = "allow"\n'
        )
        oauth = OAuthClient(name="web", server_url=f"{auth.base}/mcp", settings=OAuthSettings(),
                            home=home, environ={})  # fmt: skip
        await oauth.login(_browser, timeout_s=WAIT_S)
        hub = McpHubImpl(home=home, environ={})
        try:
            found = await hub.discover(config, cwd=work)
            [whoami] = [t for t in found.tools if t.tool == "whoami"]
            auth.required_scope = "write"
            output = await hub.call(whoami, {})
            assert output.is_error
            assert "needs scope 'write': run `lemon mcp login web`" in output.content
        finally:
            await hub.aclose()
    assert auth.scopes_asked == [""]


async def test_the_first_login_asks_for_the_scope_the_401_names(config_for: ConfigFor) -> None:
    """The spec's scope choice: the 401's ``scope`` first, the resource metadata's
    ``scopes_supported`` (here wider: ``admin`` too) only without one."""
    _config, home, _work = config_for("")
    async with _serving("issuer-path") as auth:
        auth.challenge_scope = "mcp:tools"
        oauth = OAuthClient(name="web", server_url=f"{auth.base}/mcp", settings=OAuthSettings(),
                            home=home, environ={})  # fmt: skip
        await oauth.login(_browser, timeout_s=WAIT_S)
    assert auth.scopes_asked == ["mcp:tools"]


async def test_without_a_scope_in_the_401_the_login_asks_for_the_scopes_supported(
    config_for: ConfigFor,
) -> None:
    _config, home, _work = config_for("")
    async with _serving("issuer-path") as auth:
        auth.challenge_scope = "mcp:tools"
        auth.challenge_names_scope = False
        oauth = OAuthClient(name="web", server_url=f"{auth.base}/mcp", settings=OAuthSettings(),
                            home=home, environ={})  # fmt: skip
        await oauth.login(_browser, timeout_s=WAIT_S)
    assert auth.scopes_asked == ["mcp:tools admin"]
