"""OAuth 2.1 for HTTP servers (``auth = "oauth"``): discovery, registration, tokens.

Discovery follows the MCP authorization spec: the protected-resource metadata (RFC 9728; its
URL from the 401's ``WWW-Authenticate: Bearer resource_metadata=...`` or the well-known path
under the server's URL), then the authorization server's metadata (RFC 8414 and OpenID
Connect well-known paths, its ``issuer`` checked against the one asked for). A server without
protected-resource metadata (the 2025-03-26 era) has its own origin as the authorization
server. A client is registered dynamically (RFC 7591) unless ``oauth.client_id`` is set.
The scopes asked for: ``oauth.scopes``, else the ``scope`` the server's 401 names (a login
asks the server for its 401 first), else the resource metadata's ``scopes_supported``.

Grants: ``client_credentials`` (a configured client id and the secret's variable; a token is
fetched when needed), and ``authorization_code`` with PKCE S256 and a loopback redirect
(:meth:`OAuthClient.login`, run by ``lemon mcp login NAME``). Every token request names the
``resource`` (RFC 8707). A token is refreshed a minute before it expires, one refresh at a
time across processes (an exclusive lock on the token's file), and re-read after the lock is
taken, so a rotated refresh token is never used twice.

Tokens live in ``$LEMON_HOME/mcp/tokens/NAME.json`` (directory 0700, file 0600), bound to
the issuer and the resource: a token from another issuer is never sent. They are never put
in a config file, a log line or an error message. Endpoints must be https (loopback hosts
may use http), and redirects are refused.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fcntl
import hashlib
import html
import logging
import os
import re
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import httpx
import msgspec

from lemon_mcp._section import OAuthSettings
from lemon_mcp.errors import McpAuthError

__all__ = ["OAuthClient", "StoredToken", "TokenStore"]

log = logging.getLogger("lemon_mcp")

_EARLY_S: Final = 60.0
_LOCK_WAIT_S: Final = 30.0
_LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
_PARAM_RE: Final = re.compile(r'([A-Za-z_]+)\s*=\s*(?:"([^"]*)"|([^\s,]+))')


class StoredToken(msgspec.Struct, frozen=True, kw_only=True):
    """One server's token as kept in its file (never logged)."""

    issuer: str
    resource: str
    client_id: str
    client_secret: str = ""
    """A secret the authorization server issued at registration (never a configured one)."""
    access_token: str
    token_type: str = "Bearer"
    refresh_token: str = ""
    expires_at: float | None = None
    scope: str = ""

    def fresh(self, now: float) -> bool:
        return self.expires_at is None or self.expires_at - _EARLY_S > now


class TokenStore:
    """``$LEMON_HOME/mcp/tokens/``: one 0600 file per server and a lock file beside it."""

    def __init__(self, home: Path) -> None:
        self.dir = home / "mcp" / "tokens"

    def path(self, name: str) -> Path:
        return self.dir / f"{name}.json"

    def load(self, name: str) -> StoredToken | None:
        try:
            return msgspec.json.decode(self.path(name).read_bytes(), type=StoredToken)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            return None

    def save(self, name: str, token: StoredToken) -> None:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.dir, 0o700)
        tmp = self.dir / f".{name}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(msgspec.json.encode(token))
        os.replace(tmp, self.path(name))

    def delete(self, name: str) -> bool:
        try:
            self.path(name).unlink()
        except FileNotFoundError:
            return False
        return True

    @contextlib.asynccontextmanager
    async def locked(self, name: str) -> AsyncIterator[None]:
        """Hold the server's token lock (across processes), waiting at most 30 s."""
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.dir / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + _LOCK_WAIT_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise McpAuthError(f"the token of {name} stays locked") from None
                    await asyncio.sleep(0.05)  # another process is refreshing: poll its lock
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


class _Endpoints(msgspec.Struct, frozen=True, kw_only=True):
    issuer: str
    resource: str
    authorization_endpoint: str = ""
    token_endpoint: str
    registration_endpoint: str = ""
    device_endpoint: str = ""
    auth_methods: tuple[str, ...] = ("client_secret_basic",)
    scopes: tuple[str, ...] = ()


def _challenge_params(header: str | None) -> dict[str, str]:
    if not header:
        return {}
    return {m[0].lower(): m[1] or m[2] for m in _PARAM_RE.findall(header)}


def _check_url(url: str, what: str) -> str:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme == "https" or (parts.scheme == "http" and host in _LOOPBACK):
        return url
    raise McpAuthError(f"the {what} {url!r} is not https (only loopback hosts may use http)")


def _well_known(base: str, suffix: str) -> list[str]:
    parts = urlsplit(base)
    path = parts.path.rstrip("/")
    root = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    urls = [f"{root}/.well-known/{suffix}{path}"] if path else []
    return [*urls, f"{root}/.well-known/{suffix}"]


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def _metadata_urls(issuer: str) -> list[str]:
    """Where an authorization server's metadata is looked for, in the MCP spec's order. An
    issuer with a path: RFC 8414 and OpenID with the path inserted after ``.well-known``, then
    OpenID with it appended; never the root's (another tenant's). Without a path: RFC 8414,
    then OpenID, at the root."""
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    root = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    if not path:
        return [f"{root}/.well-known/oauth-authorization-server",
                f"{root}/.well-known/openid-configuration"]  # fmt: skip
    return [
        f"{root}/.well-known/oauth-authorization-server{path}",
        f"{root}/.well-known/openid-configuration{path}",
        f"{root}{path}/.well-known/openid-configuration",
    ]


class OAuthClient:
    """One server's OAuth: implements :class:`lemon_mcp._http.HttpAuth` (loop-only)."""

    def __init__(
        self,
        *,
        name: str,
        server_url: str,
        settings: OAuthSettings,
        home: Path,
        environ: Mapping[str, str],
        timeout_s: float = 30.0,
    ) -> None:
        self.name = name
        self.server_url = server_url
        self.settings = settings
        self.store = TokenStore(home)
        self._environ = environ
        self._timeout = timeout_s
        self._token: StoredToken | None = None
        self._endpoints: _Endpoints | None = None
        self._challenge: str | None = None
        self._clock = time.time
        self.reauthorize: Callable[[str], Awaitable[None] | None] | None = None
        """Set: a scope step-up (403 ``insufficient_scope``) logs in again with the wider
        scope, showing the authorization URL through this (as :meth:`login`'s ``open_url``);
        unset (the agent's hub), it fails saying which ``lemon mcp login`` to run. A step-up
        is tried once per request."""

    # -- HttpAuth ----------------------------------------------------------------------------

    async def authorization(self) -> str | None:
        token = self._token or self.store.load(self.name)
        if token is not None and self._endpoints is None:
            await self.endpoints()  # check the token's issuer before it is ever sent
        if token is None or not self._bound(token):
            token = None
            if self.settings.grant != "client_credentials":
                return None  # the server's 401 says a login is needed
        if token is None or not token.fresh(self._clock()):
            token = await self._renew(token)
        self._token = token
        return f"Bearer {token.access_token}"

    async def unauthorized(self, www_authenticate: str | None) -> bool:
        self._challenge = www_authenticate
        params = _challenge_params(www_authenticate)
        stale = self._token
        self._token = None
        if params.get("error") == "insufficient_scope" and stale is not None:
            wanted = tuple(params.get("scope", "").split())
            if self.reauthorize is not None and wanted:
                endpoints = await self.endpoints()
                scopes = tuple(dict.fromkeys((*endpoints.scopes, *wanted)))
                self._endpoints = msgspec.structs.replace(endpoints, scopes=scopes)
                self._token = await self.login(self.reauthorize, timeout_s=self._timeout)
                return True
            raise McpAuthError(
                f"server {self.name} needs scope {params.get('scope', '?')!r}: run "
                f"`lemon mcp login {self.name}` (with oauth.scopes naming it)"
            )
        if self.settings.grant == "client_credentials" or (stale and stale.refresh_token):
            self._endpoints = None  # rediscover: the server may have moved its issuer
            self._token = await self._renew(stale, force=True)
            return True
        raise McpAuthError(f"server {self.name} needs a login: run `lemon mcp login {self.name}`")

    def _bound(self, token: StoredToken) -> bool:
        endpoints = self._endpoints
        return endpoints is None or (
            token.issuer == endpoints.issuer and token.resource == endpoints.resource
        )

    # -- renewing ----------------------------------------------------------------------------

    async def _renew(self, seen: StoredToken | None, *, force: bool = False) -> StoredToken:
        """A fresh token: refreshed (or fetched with client credentials) under the lock; a
        token another process refreshed meanwhile is taken as is."""
        async with self.store.locked(self.name):
            current = self.store.load(self.name)
            if (
                current is not None
                and seen is not None
                and current != seen
                and current.fresh(self._clock())
            ):
                return current  # another process (or client) refreshed it meanwhile
            token = current or seen
            endpoints = await self.endpoints()
            if token is not None and (token.issuer, token.resource) != (
                endpoints.issuer, endpoints.resource,
            ):  # fmt: skip
                token = None  # bound to another issuer: never sent here
            if not force and token is not None and token.fresh(self._clock()):
                return token
            if token is not None and token.refresh_token:
                fresh = await self._token_request(
                    endpoints,
                    {"grant_type": "refresh_token", "refresh_token": token.refresh_token},
                    client_id=token.client_id,
                    client_secret=token.client_secret or self._configured_secret(),
                    previous=token,
                )
            elif self.settings.grant == "client_credentials":
                form = {"grant_type": "client_credentials"}
                if self.settings.scopes:
                    form["scope"] = " ".join(self.settings.scopes)
                fresh = await self._token_request(
                    endpoints, form, client_id=self.settings.client_id,
                    client_secret=self._configured_secret(), previous=None,
                )  # fmt: skip
            else:
                raise McpAuthError(
                    f"server {self.name} needs a login: run `lemon mcp login {self.name}`"
                )
            self.store.save(self.name, fresh)
            return fresh

    def _configured_secret(self) -> str:
        var = self.settings.client_secret_env
        if not var:
            return ""
        if var not in self._environ:
            raise McpAuthError(f"oauth.client_secret_env names an unset variable: {var}")
        return self._environ[var]

    async def _token_request(
        self,
        endpoints: _Endpoints,
        form: dict[str, str],
        *,
        client_id: str,
        client_secret: str,
        previous: StoredToken | None,
    ) -> StoredToken:
        form = {**form, "resource": endpoints.resource}
        headers = {"Accept": "application/json"}
        methods = endpoints.auth_methods
        if client_secret and "client_secret_basic" in methods:
            pair = f"{_quote(client_id)}:{_quote(client_secret)}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        elif client_secret:
            form.update(client_id=client_id, client_secret=client_secret)
        else:
            form["client_id"] = client_id
        body = await self._post(endpoints.token_endpoint, form, headers)
        access = body.get("access_token")
        if not isinstance(access, str) or not access:
            raise McpAuthError("the token endpoint answered no access_token")
        expires = body.get("expires_in")
        return StoredToken(
            issuer=endpoints.issuer,
            resource=endpoints.resource,
            client_id=client_id,
            client_secret=previous.client_secret if previous else "",
            access_token=access,
            token_type=str(body.get("token_type") or "Bearer"),
            refresh_token=str(
                body.get("refresh_token") or (previous.refresh_token if previous else "")
            ),
            expires_at=self._clock() + float(expires) if isinstance(expires, int | float) else None,
            scope=str(body.get("scope") or (previous.scope if previous else "")),
        )

    # -- discovery ---------------------------------------------------------------------------

    async def endpoints(self) -> _Endpoints:
        """The authorization server's endpoints for this server (discovered once)."""
        if self._endpoints is not None:
            return self._endpoints
        resource = self.server_url
        issuer: str | None = None
        scopes: tuple[str, ...] = tuple(self.settings.scopes)
        hinted = _challenge_params(self._challenge).get("resource_metadata")
        candidates = _well_known(self.server_url, "oauth-protected-resource")
        if hinted:
            candidates.insert(0, _check_url(hinted, "resource metadata URL"))
        meta = None
        for url in candidates:
            meta = await self._get_json(url)
            if meta is not None:
                break
        if meta is None and self._challenge is None:
            hinted = await self._probe_challenge()
            if hinted:
                meta = await self._get_json(_check_url(hinted, "resource metadata URL"))
        if not scopes:  # the spec's choice: the 401's scope, else the scopes supported
            scopes = tuple(_challenge_params(self._challenge).get("scope", "").split())
        servers = meta.get("authorization_servers") if meta is not None else None
        if meta is not None and isinstance(servers, list) and servers:
            issuer = str(servers[0])
            resource = str(meta.get("resource") or resource)
            supported = meta.get("scopes_supported")
            if not scopes and isinstance(supported, list):
                scopes = tuple(str(s) for s in supported)
        legacy = issuer is None
        if issuer is None:  # 2025-03-26: the server's origin is its authorization server
            parts = urlsplit(self.server_url)
            issuer = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
        _check_url(issuer, "issuer")
        meta = None
        for url in _metadata_urls(issuer):
            meta = await self._get_json(url)
            if meta is not None:
                break
        if meta is None and legacy:
            # 2025-03-26 without metadata: the default endpoints at the server's origin.
            meta = {"issuer": issuer, "authorization_endpoint": f"{issuer}/authorize",
                    "token_endpoint": f"{issuer}/token",
                    "registration_endpoint": f"{issuer}/register"}  # fmt: skip
        if meta is None:
            raise McpAuthError(f"no authorization server metadata found for {issuer}")
        named = str(meta.get("issuer", "")).rstrip("/")
        if legacy and named and _origin(named) == issuer:
            # 2025-03-26 asks for no issuer match: the origin's metadata may name a path of
            # that origin (never another origin); tokens are bound to the issuer it names.
            issuer = named
        if named != issuer.rstrip("/"):
            raise McpAuthError(
                f"the authorization server's metadata names issuer {meta.get('issuer')!r}, "
                f"not {issuer!r}; refused"
            )
        token = meta.get("token_endpoint")
        if not isinstance(token, str):
            raise McpAuthError(f"{issuer} has no token_endpoint")
        methods = meta.get("token_endpoint_auth_methods_supported")
        self._endpoints = _Endpoints(
            issuer=issuer,
            resource=resource,
            authorization_endpoint=_check_url(str(meta.get("authorization_endpoint") or token),
                                              "authorization endpoint"),
            token_endpoint=_check_url(token, "token endpoint"),
            registration_endpoint=str(meta.get("registration_endpoint") or ""),
            device_endpoint=str(meta.get("device_authorization_endpoint") or ""),
            auth_methods=tuple(methods) if isinstance(methods, list) else ("client_secret_basic",),
            scopes=scopes,
        )  # fmt: skip
        return self._endpoints

    async def _endpoints_for_login(self) -> _Endpoints:
        """:meth:`endpoints`, having first asked the server for its 401 when none was seen:
        the scope its ``WWW-Authenticate`` names is the one a first login asks for."""
        if self._endpoints is None and self._challenge is None:
            await self._probe_challenge()
        return await self.endpoints()

    async def _probe_challenge(self) -> str | None:
        """An unauthenticated request to the server: its 401 names the resource metadata."""
        async with self._http() as http:
            with contextlib.suppress(httpx.HTTPError):
                r = await http.post(
                    self.server_url, content=b"{}",
                    headers={"Content-Type": "application/json",
                             "Accept": "application/json, text/event-stream"},
                )  # fmt: skip
                if r.status_code == 401:
                    self._challenge = r.headers.get("www-authenticate")
                    return _challenge_params(self._challenge).get("resource_metadata")
        return None

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            timeout=self._timeout, follow_redirects=False, verify=True, trust_env=False
        )

    async def _get_json(self, url: str) -> dict[str, Any] | None:
        async with self._http() as http:
            try:
                r = await http.get(url, headers={"Accept": "application/json"})
            except httpx.HTTPError:
                return None
        if r.status_code != 200:
            return None
        with contextlib.suppress(ValueError):
            body = r.json()
            return body if isinstance(body, dict) else None
        return None

    async def _post(
        self, url: str, form: Mapping[str, str], headers: Mapping[str, str]
    ) -> dict[str, Any]:
        async with self._http() as http:
            try:
                r = await http.post(url, data=dict(form), headers=dict(headers))
            except httpx.HTTPError as exc:
                raise McpAuthError(f"the token endpoint failed: {type(exc).__name__}") from None
        try:
            body = r.json()
        except ValueError:
            body = None
        if r.status_code != 200 or not isinstance(body, dict):
            error = body.get("error") if isinstance(body, dict) else None
            raise McpAuthError(
                f"the token endpoint answered HTTP {r.status_code}"
                + (f" ({error})" if isinstance(error, str) else "")
            )
        return body

    # -- login -------------------------------------------------------------------------------

    async def login(
        self, open_url: Callable[[str], Awaitable[None] | None], *, timeout_s: float = 300.0
    ) -> StoredToken:
        """Authorization code + PKCE with a loopback redirect; ``open_url`` shows the person
        the authorization URL (a browser). Client credentials need no login: it fetches one."""
        endpoints = await self._endpoints_for_login()
        if self.settings.grant == "client_credentials":
            token = await self._renew(None, force=True)
            self._token = token
            return token
        got: asyncio.Future[dict[str, str]] = asyncio.get_running_loop().create_future()
        handlers: set[asyncio.Task[Any]] = set()

        async def on_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            if task is not None:
                handlers.add(task)
            with contextlib.suppress(OSError, asyncio.IncompleteReadError, ValueError):
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                target = head.split(b" ", 2)[1].decode("ascii", "replace")
                parts = urlsplit(target)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                ok = parts.path == "/callback" and ("code" in query or "error" in query)
                if ok and not got.done():
                    got.set_result(query)
                text = "Lemon: the login is done; you may close this window." if ok else "?"
                page = f"<html><body><p>{html.escape(text)}</p></body></html>".encode()
                writer.write(
                    b"HTTP/1.1 %d OK\r\ncontent-type: text/html\r\ncontent-length: %d\r\n"
                    b"connection: close\r\n\r\n%s" % (200 if ok else 404, len(page), page)
                )
                await writer.drain()
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

        listener = await asyncio.start_server(on_request, "127.0.0.1", self.settings.redirect_port)
        try:
            port = listener.sockets[0].getsockname()[1]
            redirect_uri = f"http://127.0.0.1:{port}/callback"
            client_id, client_secret = await self._client_for(endpoints, redirect_uri)
            verifier = secrets.token_urlsafe(48)
            challenge = (
                base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
                .rstrip(b"=")
                .decode()
            )
            state = secrets.token_urlsafe(24)
            params = {
                "response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri,
                "code_challenge": challenge, "code_challenge_method": "S256", "state": state,
                "resource": endpoints.resource,
            }  # fmt: skip
            if endpoints.scopes:
                params["scope"] = " ".join(endpoints.scopes)
            sep = "&" if "?" in endpoints.authorization_endpoint else "?"
            shown = open_url(endpoints.authorization_endpoint + sep + urlencode(params))
            if shown is not None:
                await shown
            try:
                answer = await asyncio.wait_for(got, timeout_s)
            except TimeoutError:
                raise McpAuthError(f"no login within {timeout_s:g} s") from None
        finally:
            listener.close()
            await listener.wait_closed()
            if handlers:  # each answers and closes its connection within its own bound
                await asyncio.wait(handlers, timeout=15)
        if answer.get("state") != state:
            raise McpAuthError("the login answer's state does not match; refused")
        if "error" in answer:
            raise McpAuthError(f"the login was refused: {answer['error']}")
        async with self.store.locked(self.name):
            seed = StoredToken(
                issuer=endpoints.issuer,
                resource=endpoints.resource,
                client_id=client_id,
                client_secret=client_secret,
                access_token="",
            )
            token = await self._token_request(
                endpoints,
                {"grant_type": "authorization_code", "code": answer.get("code", ""),
                 "redirect_uri": redirect_uri, "code_verifier": verifier},
                client_id=client_id, client_secret=client_secret, previous=seed,
            )  # fmt: skip
            self.store.save(self.name, token)
        self._token = token
        return token

    async def login_device(
        self, show: Callable[[str, str], Awaitable[None] | None], *, timeout_s: float = 600.0
    ) -> StoredToken:
        """The device authorization grant (RFC 8628) for a machine without a browser:
        ``show(verification_uri, user_code)`` tells the person where to enter the code; the
        token endpoint is polled at the server's interval (``slow_down`` adds 5 s)."""
        endpoints = await self._endpoints_for_login()
        if not endpoints.device_endpoint:
            raise McpAuthError(
                f"{endpoints.issuer} offers no device code login; use `lemon mcp login "
                f"{self.name}` on a machine with a browser"
            )
        client_id, client_secret = await self._client_for(endpoints, None)
        form = {"client_id": client_id, "resource": endpoints.resource}
        if endpoints.scopes:
            form["scope"] = " ".join(endpoints.scopes)
        grant = await self._post(
            _check_url(endpoints.device_endpoint, "device authorization endpoint"), form, {}
        )
        device_code = str(grant.get("device_code") or "")
        user_code = str(grant.get("user_code") or "")
        uri = str(grant.get("verification_uri_complete") or grant.get("verification_uri") or "")
        if not (device_code and user_code and uri):
            raise McpAuthError("the device authorization answer lacks its codes")
        shown = show(uri, user_code)
        if shown is not None:
            await shown
        interval = float(grant.get("interval") or 5)
        deadline = time.monotonic() + min(timeout_s, float(grant.get("expires_in") or timeout_s))
        seed = StoredToken(
            issuer=endpoints.issuer,
            resource=endpoints.resource,
            client_id=client_id,
            client_secret=client_secret,
            access_token="",
        )
        while True:
            try:
                token = await self._token_request(
                    endpoints,
                    {"grant_type": "urn:ietf:params:oauth:grant-type:device_code",
                     "device_code": device_code},
                    client_id=client_id, client_secret=client_secret, previous=seed,
                )  # fmt: skip
                break
            except McpAuthError as exc:
                if "(slow_down)" in str(exc):
                    interval += 5
                elif "(authorization_pending)" not in str(exc):
                    raise
            if time.monotonic() + interval > deadline:
                raise McpAuthError(f"no login within {timeout_s:g} s") from None
            await asyncio.sleep(interval)  # the protocol's polling interval
        async with self.store.locked(self.name):
            self.store.save(self.name, token)
        self._token = token
        return token

    async def _client_for(self, endpoints: _Endpoints, redirect_uri: str | None) -> tuple[str, str]:
        if self.settings.client_id:
            return self.settings.client_id, self._configured_secret()
        if not endpoints.registration_endpoint:
            raise McpAuthError(
                f"{endpoints.issuer} offers no dynamic client registration: set oauth.client_id"
            )
        async with self._http() as http:
            try:
                r = await http.post(
                    _check_url(endpoints.registration_endpoint, "registration endpoint"),
                    json={
                        "client_name": "Lemon",
                        "redirect_uris": [redirect_uri] if redirect_uri else [],
                        "grant_types": (
                            ["authorization_code", "refresh_token"]
                            if redirect_uri
                            else ["urn:ietf:params:oauth:grant-type:device_code", "refresh_token"]
                        ),
                        "response_types": ["code"] if redirect_uri else [],
                        "token_endpoint_auth_method": "none",
                    },
                )
            except httpx.HTTPError as exc:
                raise McpAuthError(f"client registration failed: {type(exc).__name__}") from None
        body = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
        if r.status_code not in (200, 201) or not isinstance(body.get("client_id"), str):
            raise McpAuthError(f"client registration answered HTTP {r.status_code}")
        return body["client_id"], str(body.get("client_secret") or "")

    def logout(self) -> bool:
        """Forget the server's token (True when there was one)."""
        self._token = None
        return self.store.delete(self.name)


def _quote(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")
