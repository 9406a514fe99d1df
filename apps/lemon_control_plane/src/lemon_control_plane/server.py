"""The control plane server: ``GET /healthz``, ``GET /ws``, over one session port.

``async with ControlPlane(port, config) as cp`` binds the socket (so ``cp.url`` is known and
connections queue in the backlog at once), starts the :class:`~lemon_control_plane.EventBridge`
and the uvicorn server; leaving it cancels the runs in flight through the port (their typed
completion still reaches the clients, within ``shutdown_grace_s``), sends ``shutdown`` to every
connection, closes them and stops the server.

Per connection: a reader (this module) and a writer (:class:`Connection`); requests run as
tasks of the connection (at most ``max_requests_in_flight``), so a slow method never blocks
the reader, and ``health`` is always answered. Every event goes to every connection that
completed the handshake.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import secrets
import socket
import ssl
import time
import uuid
from collections.abc import Callable, Generator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal
from urllib.parse import urlsplit

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from lemon_control_plane._admission import Admission, AdmissionStatistics
from lemon_control_plane._connection import Connection
from lemon_control_plane._error_map import wire_error
from lemon_control_plane._frames import (
    UNKNOWN_ID,
    FrameError,
    Request,
    encode,
    error_frame,
    ok_frame,
    parse_request,
)
from lemon_control_plane._http import header_deadline_protocol
from lemon_control_plane._limiter import AddressLimiter
from lemon_control_plane._log_throttle import LogThrottle
from lemon_control_plane._logins import BrowserLogins, Grant, SignIn
from lemon_control_plane._methods import SCOPES, Method, Methods
from lemon_control_plane._params import NoParams, WatchParams, decode
from lemon_control_plane._port_wire import PortWatches
from lemon_control_plane._secondary import UNSUPPORTED
from lemon_control_plane.bridge import TOPIC_EVENTS, EventBridge
from lemon_control_plane.config import ControlPlaneConfig, hash_token, is_loopback_host
from lemon_control_plane.errors import ControlPlaneError, WireError
from lemon_control_plane.local_token import LOCAL_TOKEN_ID, ensure_local_token
from lemon_control_plane.tokens import StoredToken, TokenStore
from lemon_core.approvals import ExecApprovals
from lemon_core.bus import Bus
from lemon_core.capabilities import ModelCatalog
from lemon_core.mounts import RESERVED_PATHS, HttpMounts
from lemon_core.run_aborts import RunAborts
from lemon_core.sessions import SessionPort
from lemon_core.wire_methods import WireCall, WireMethod, WireMethods

__all__ = ["AUTH_COOKIE", "EVENTS", "PROTOCOL_VERSION", "SERVER_VERSION", "ControlPlane"]

_log = logging.getLogger(__name__)

PROTOCOL_VERSION: Final = 1
SERVER_VERSION: Final = "lemon-py-0.1"
#: The event names this server sends (``features.events``).
EVENTS: Final = (
    "agent",
    "channel.delivery",
    "chat",
    "cron",
    "cron.audit",
    "cron.job",
    "exec.approval.requested",
    "exec.approval.resolved",
    "goal",
    "health",
    "heartbeat",
    "mcp.server",
    "port.event",
    "run.graph.changed",
    "shutdown",
    "stream.resync",
    "task.aborted",
    "task.completed",
    "task.error",
    "task.notice",
    "task.progress",
    "task.question",
    "task.started",
    "task.timeout",
    "tick",
)
#: The cookie a browser page's WebSocket upgrade carries its sign-in in (an HttpOnly,
#: SameSite=Strict cookie the page's own login endpoint sets; the page's script never sees it).
#: It holds a random sign-in id (:meth:`ControlPlane.sign_in`), never a token. A ``connect``
#: without ``params.auth.token`` authenticates with it.
AUTH_COOKIE: Final = "lemon_session"
#: The token id of a connection on a bind that needs none (``local_auth`` off).
_OPEN: Final = "open"
CLOSE_UNAUTHORIZED: Final = 4001
#: The close code after a ``connect`` refused because its address failed too often.
CLOSE_RATE_LIMITED: Final = 4029
CLOSE_GOING_AWAY: Final = 1001
#: The close code of a socket that sent no successful ``connect`` within ``connect_timeout_s``.
CLOSE_CONNECT_TIMEOUT: Final = 1008
#: The loggers where running out of file descriptors floods the log (see ``_log_throttle``).
_THROTTLED_LOGGERS: Final = ("asyncio", "uvicorn.error")


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the process that embeds us owns the signals."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def _rss_mb() -> float | None:
    """This process's resident memory now (Linux ``/proc``), else its peak (``resource``)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
        return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (ImportError, OSError):
        return None
    return round(peak / 1024, 1)


def _bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ControlPlaneError(f"cannot resolve the bind address {host!r}: {exc}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        raise ControlPlaneError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc} "
            "(is another daemon running? pick another port with --port)"
        ) from None
    sock.setblocking(False)
    return sock


class ControlPlane:
    """See the module docstring."""

    def __init__(
        self,
        port: SessionPort,
        config: ControlPlaneConfig | None = None,
        *,
        models: ModelCatalog | None = None,
        mounts: HttpMounts | None = None,
        wire_methods: WireMethods | None = None,
        config_view: Callable[[], Mapping[str, Any]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        bus: Bus | None = None,
        approvals: ExecApprovals | None = None,
        run_aborts: Callable[[], RunAborts | None] | None = None,
    ) -> None:
        self.config = config or ControlPlaneConfig()
        self.mounts = mounts if mounts is not None else HttpMounts()
        """Other apps' ASGI applications, served for every path the plane does not answer."""
        self.wire_methods = wire_methods if wire_methods is not None else WireMethods()
        """Other apps' methods, answered when the plane's own table has no such name."""
        self.tokens = TokenStore(Path(self.config.token_file)) if self.config.token_file else None
        self._stored: dict[str, StoredToken] = {}  # hash -> active stored token
        self._token_signature: tuple[int, int, int] | None = None
        self._load_tokens()
        self.config.check(stored_tokens=len(self._stored))
        self.local_token: str | None = None
        """The owner's token (every scope; see :mod:`lemon_control_plane.local_token`):
        the home's file when ``local_token_file`` is set, else one made for this server's life;
        ``None`` with ``local_auth=False``."""
        if self.config.local_auth:
            self.local_token = (
                ensure_local_token(Path(self.config.local_token_file))
                if self.config.local_token_file
                else "lcp_local_" + secrets.token_urlsafe(32)
            )
        self._local_hash = hash_token(self.local_token) if self.local_token else None
        self.logins = BrowserLogins(
            max_sessions=self.config.web_sessions,
            ttl_s=self.config.web_session_ttl_s,
            link_ttl_s=self.config.login_link_ttl_s,
            clock=clock,
        )
        """Browser sign-ins and one-time sign-in links (see :meth:`sign_in`)."""
        self.limiter = AddressLimiter(
            failures=self.config.auth_failures,
            window_s=self.config.auth_window_s,
            addresses=self.config.auth_addresses,
            clock=clock,
        )
        """Failed authentications per client address (``connect``, the page's sign-ins)."""
        self._port = port
        self._connections: set[Connection] = set()
        self._admission = Admission(
            max_total=self.config.max_connections,
            max_per_client=self.config.max_connections_per_client,
        )
        self._log_throttle = LogThrottle()
        self.bridge = EventBridge(
            port,
            self._broadcast,
            max_sessions=self.config.max_sessions,
            default_model=self.config.default_model,
            bus=bus,
        )
        self._methods = Methods(
            port,
            self.bridge,
            self.config,
            self._status,
            models,
            config_view=config_view,
            approvals=approvals,
            run_aborts=run_aborts,
        )
        self._methods.table["auth.loginNonce"] = Method(
            "auth.loginNonce", "admin", NoParams, self._login_nonce
        )
        self._started = time.monotonic()
        self._closing = False
        self._state: Literal["new", "running", "stopped"] = "new"
        self._sock: socket.socket | None = None
        self._server: _Server | None = None
        self._serve_task: asyncio.Task[None] | None = None
        self._tg: asyncio.TaskGroup | None = None
        self._token_task: asyncio.Task[None] | None = None
        self.app = Starlette(
            routes=[
                Route("/healthz", self._healthz, methods=["GET"]),
                WebSocketRoute("/ws", self._websocket),
            ],
            exception_handlers={404: self._not_found},
        )

    async def asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The server's ASGI entry: ``/healthz`` and ``/ws`` are the plane's own; any other
        path goes to the app mounted for it (:class:`~lemon_core.mounts.HttpMounts`), else 404."""
        if scope["type"] in ("http", "websocket"):
            path = scope.get("path", "")
            if path not in RESERVED_PATHS:
                mount = self.mounts.resolve(path)
                if mount is not None:
                    await mount.app(scope, receive, send)
                    return
        await self.app(scope, receive, send)

    # -- addresses ----------------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        if self._sock is None:
            raise ControlPlaneError("the control plane is not started")
        host, port = self._sock.getsockname()[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        """``http://host:port`` of the running server (``https://`` with TLS)."""
        host, port = self.address
        scheme = "https" if self.config.tls else "http"
        return f"{scheme}://{'[' + host + ']' if ':' in host else host}:{port}"

    @property
    def ws_url(self) -> str:
        """``ws://host:port/ws`` of the running server (``wss://`` with TLS)."""
        return "ws" + self.url.removeprefix("http") + "/ws"

    @property
    def methods(self) -> tuple[str, ...]:
        """The method names advertised in ``hello-ok.features.methods`` (sorted): exactly
        the dispatch table and the apps' registered methods (the methods answered
        ``NOT_IMPLEMENTED`` are not in it)."""
        return tuple(sorted({*self._methods.table, *self.wire_methods.names()}))

    # -- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> ControlPlane:
        if self._state != "new":
            raise ControlPlaneError(f"a control plane starts once; this one is {self._state}")
        self._state = "running"
        tls = self._tls_options()
        self._sock = _bind(self.config.host, self.config.port)
        for name in _THROTTLED_LOGGERS:
            logging.getLogger(name).addFilter(self._log_throttle)
        try:
            self._tg = asyncio.TaskGroup()
            await self._tg.__aenter__()
            await self.bridge.__aenter__()
            uv_config = uvicorn.Config(
                self.asgi,
                interface="asgi3",
                log_config=None,
                access_log=False,
                lifespan="off",
                http=header_deadline_protocol(self.config.header_timeout_s, self._admission),
                ws="websockets-sansio",
                ws_max_size=2 * self.config.max_payload,
                ws_ping_interval=self.config.ws_ping_interval_s,
                ws_ping_timeout=self.config.ws_ping_timeout_s,
                timeout_graceful_shutdown=max(1, int(self.config.shutdown_grace_s)),
                server_header=False,
                proxy_headers=False,
                **tls,
            )
            self._server = _Server(uv_config)
            self._serve_task = self._tg.create_task(self._server.serve(sockets=[self._sock]))
            if self.tokens is not None:
                self._token_task = self._tg.create_task(self._watch_tokens())
        except BaseException:
            self._sock.close()
            self._remove_log_throttle()
            raise
        return self

    def _tls_options(self) -> dict[str, Any]:
        """uvicorn's TLS settings: the configured certificate and key (loaded once here, so a
        bad pair is a clear error at start, not in the server's task), else none."""
        if not self.config.tls:
            return {}
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                str(self.config.tls_cert), str(self.config.tls_key)
            )
        except (ssl.SSLError, OSError) as exc:
            raise ControlPlaneError(
                f"cannot serve TLS with tls_cert {self.config.tls_cert!r} and tls_key "
                f"{self.config.tls_key!r}: {exc} (PEM files: the certificate, then its key)"
            ) from None
        return {"ssl_certfile": self.config.tls_cert, "ssl_keyfile": self.config.tls_key}

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._state != "running":
            return
        self._state = "stopped"
        self._closing = True
        try:
            await self._cancel_runs()
            self._broadcast("shutdown", {"reason": "the daemon is shutting down"}, None)
            for conn in list(self._connections):
                conn.close_soon(CLOSE_GOING_AWAY, "the daemon is shutting down")
            if self._server is not None:
                self._server.should_exit = True
            if self._token_task is not None:
                self._token_task.cancel()
            await self.bridge.__aexit__(None, None, None)
        finally:
            assert self._tg is not None
            try:
                await self._tg.__aexit__(None, None, None)
            finally:
                if self._sock is not None:
                    self._sock.close()
                self._remove_log_throttle()

    def _remove_log_throttle(self) -> None:
        for name in _THROTTLED_LOGGERS:
            logging.getLogger(name).removeFilter(self._log_throttle)

    def statistics(self) -> AdmissionStatistics:
        """The WebSocket connections now, and those refused or timed out since start."""
        return self._admission.statistics()

    # -- tokens -------------------------------------------------------------------------------

    def _load_tokens(self) -> None:
        if self.tokens is None:
            return
        self._token_signature = self.tokens.signature()
        self._stored = {t.hash: t for t in self.tokens.entries() if t.active}

    def refresh_tokens(self) -> int:
        """Re-read the token store if it changed; close the connections whose token was
        revoked or rotated. Returns how many connections were closed."""
        if self.tokens is None or self.tokens.signature() == self._token_signature:
            return 0
        try:
            self._load_tokens()
        except ControlPlaneError as exc:
            _log.error("keeping the previous tokens: %s", exc)
            return 0
        self.logins.retain(self._grant_valid)
        closed = 0
        for conn in self._connections:
            if (
                conn.token_id is not None
                and conn.token_id not in ("env", LOCAL_TOKEN_ID)
                and conn.token_hash not in self._stored
            ):
                conn.close_soon(CLOSE_UNAUTHORIZED, "token revoked")
                closed += 1
        return closed

    async def _watch_tokens(self) -> None:
        # The token file may be written by other processes: its change is seen
        # within one interval.
        while True:
            await asyncio.sleep(self.config.token_check_interval_s)
            self.refresh_tokens()

    @property
    def requires_token(self) -> bool:
        """Whether every ``connect`` must carry a token: always, unless ``local_auth`` is off
        on a loopback bind with no configured or stored token (a non-loopback bind keeps
        requiring one even once every stored token is revoked)."""
        return bool(
            self.config.local_auth
            or self.config.token_hashes
            or self._stored
            or not is_loopback_host(self.config.host)
        )

    def token_valid(self, token: object) -> bool:
        """Whether ``token`` is accepted now (a configured token or an active stored one);
        the store is re-read first if it changed. For a page's login endpoint."""
        self.refresh_tokens()
        return self._authenticate(token) is not None

    def token_scopes(self, token: object) -> frozenset[str] | None:
        """The scopes ``token`` carries now (a configured, local or active stored token), else
        ``None``; the store is re-read first if it changed. For an HTTP surface mounted on this
        server that authenticates with ``Authorization: Bearer`` (the OpenAI-compatible API)."""
        self.refresh_tokens()
        found = self._authenticate(token)
        return None if found is None else found[1]

    def origin_allowed(self, origin: str | None, host: str | None = None) -> bool:
        """Whether a request with this ``Origin`` (``None``: not a browser) and ``Host`` may be
        served: the rule the WebSocket upgrade applies, for the mounted HTTP surfaces."""
        return self._origin_allowed(origin, host)

    def _grant_valid(self, grant: Grant) -> bool:
        """Whether the token a sign-in stands for is still accepted as it was."""
        if grant.token_id == _OPEN:
            return not self.requires_token
        if grant.token_id == LOCAL_TOKEN_ID:
            return self._local_hash is not None and hmac.compare_digest(
                grant.token_hash, self._local_hash
            )
        if grant.token_id == "env":
            return grant.token_hash in self.config.token_hashes
        stored = self._stored.get(grant.token_hash)
        return stored is not None and stored.id == grant.token_id

    # -- browser sign-ins (the lemon_web page) ------------------------------------------------

    def sign_in(self, token: object, *, address: str | None = None) -> SignIn:
        """A page's sign-in with ``token`` (from ``address``): the session id its cookie is to
        carry, or why not (``refused``). The token store is re-read first if it changed."""
        wait = self.limiter.retry_after(address)
        if wait is not None:
            return SignIn(refused="rate_limited", retry_after_s=wait)
        self.refresh_tokens()
        found = self._authenticate(token)
        if found is None:
            self.limiter.failed(address)
            return SignIn(refused="invalid")
        grant = Grant(token_id=found[0], token_hash=hash_token(str(token)), scopes=found[1])
        return SignIn(session=self.logins.open(grant))

    def sign_in_once(self, nonce: object, *, address: str | None = None) -> SignIn:
        """A page's sign-in with a one-time link's nonce (:meth:`login_link`); a nonce works
        once, within ``login_link_ttl_s``, and only while its minter's token is valid."""
        wait = self.limiter.retry_after(address)
        if wait is not None:
            return SignIn(refused="rate_limited", retry_after_s=wait)
        self.refresh_tokens()
        grant = self.logins.redeem(nonce)
        if grant is None or not self._grant_valid(grant):
            self.limiter.failed(address)
            return SignIn(refused="invalid")
        return SignIn(session=self.logins.open(grant))

    def sign_out(self, session: object) -> None:
        """End the page's sign-in ``session`` (its cookie is then nothing)."""
        self.logins.close(session)

    def login_link(self) -> str:
        """A one-time nonce signing a browser in as the owner (the local token, every scope):
        for an in-process owner; over the wire ``auth.loginNonce`` mints one with the
        calling connection's scopes."""
        if self._local_hash is None:
            raise ControlPlaneError("this control plane has no local token (local_auth is off)")
        return self.logins.link(
            Grant(token_id=LOCAL_TOKEN_ID, token_hash=self._local_hash, scopes=frozenset(SCOPES))
        )

    async def _login_nonce(self, conn: Connection, params: NoParams) -> Any:
        """``auth.loginNonce`` (admin): a one-time sign-in nonce for a browser, with this
        connection's token and scopes; the page's ``GET /login?once=<nonce>`` redeems it."""
        grant = Grant(
            token_id=conn.token_id or _OPEN, token_hash=conn.token_hash or "", scopes=conn.scopes
        )
        return {
            "nonce": self.logins.link(grant),
            "expiresInMs": int(self.logins.link_ttl_s * 1000),
        }

    def access_statistics(self) -> dict[str, Any]:
        """The bounded tables of access control: failed authentications per address,
        browser sign-ins and links."""
        logins = self.logins.statistics()
        limits = self.limiter.statistics()
        return {
            "auth": {
                "addresses": limits.addresses,
                "limited": limits.limited,
                "failures": limits.failures,
                "refused": limits.refused,
                "forgotten": limits.forgotten,
            },
            "logins": {
                "sessions": logins.sessions,
                "links": logins.links,
                "opened": logins.opened,
                "expired": logins.expired,
                "evicted": logins.evicted,
            },
        }

    def _authenticate(self, token: object) -> tuple[str, frozenset[str]] | None:
        """(token id, scopes) of a valid token, else None."""
        if not isinstance(token, str) or not token:
            return None
        if self._local_hash is not None and hmac.compare_digest(
            hash_token(token), self._local_hash
        ):
            return LOCAL_TOKEN_ID, frozenset(SCOPES)
        if self.config.accepts_token(token):
            return "env", frozenset(SCOPES)
        stored = self._stored.get(hash_token(token))
        if stored is None:
            return None
        return stored.id, stored.wire_scopes()

    async def _cancel_runs(self) -> None:
        """Cancel what runs through the port; wait (bounded) for the typed completions."""
        sessions = set(self.bridge.active_runs().values())
        if not sessions:
            return
        for key in sessions:
            try:
                await self._port.cancel(session_key=key)
            except Exception:  # one refusing session must not keep the others running
                _log.exception("cancelling the runs of %s at shutdown", key)
        if not await self.bridge.wait_idle(self.config.shutdown_grace_s):
            _log.warning(
                "runs still in flight after %.1fs of shutdown", self.config.shutdown_grace_s
            )

    # -- fan-out ------------------------------------------------------------------------------

    def _broadcast(self, name: str, payload: dict[str, Any], session_key: str | None) -> None:
        name_json = encode(name)
        payload_json = encode(payload)
        topic = TOPIC_EVENTS.get(name)
        for conn in self._connections:
            if conn.wants(session_key) and (topic is None or topic in conn.topics):
                conn.push_event(name_json, payload_json)

    def _status(self) -> dict[str, Any]:
        stats = self._port.statistics()
        bridge = self.bridge.statistics()
        uptime = int((time.monotonic() - self._started) * 1000)
        memory = _rss_mb()
        admission = self._admission.statistics()
        return {
            "server": {
                "version": SERVER_VERSION,
                "uptime_ms": uptime,
                "uptimeMs": uptime,
                "memory_mb": memory,
                "memoryMb": memory,
                "pid": os.getpid(),
                "url": self.url if self._sock is not None else None,
            },
            "connections": {
                "active": len(self._connections),
                "operators": sum(1 for c in self._connections if c.online),
                "clients": admission.clients,
                "refusedTotal": admission.refused_total,
                "refusedPerClient": admission.refused_per_client,
                "connectTimeouts": admission.connect_timeouts,
            },
            "runs": {
                "active": stats.active_runs,
                "submitted": stats.submitted,
            },
            "access": self.access_statistics(),
            "bridge": {
                "followed": bridge.followed,
                "eventsIn": bridge.events_in,
                "eventsOut": bridge.events_out,
                "resyncs": bridge.resyncs,
            },
        }

    # -- HTTP ---------------------------------------------------------------------------------

    async def _healthz(self, request: HttpRequest) -> Response:
        return JSONResponse({"ok": True})

    async def _not_found(self, request: HttpRequest, exc: Exception) -> Response:
        return JSONResponse({"error": "Not found"}, status_code=404)

    def _origin_allowed(self, origin: str | None, host: str | None = None) -> bool:
        """No ``Origin`` (not a browser), a configured extra origin, or the daemon's own
        origin: ``http(s)`` on the port it serves, with a loopback host (``localhost``,
        127.0.0.0/8, ``[::1]``: aliases of the same server) or the host it was bound to; on a
        bind that requires a token, also the page this server serves itself (``Origin``
        host:port = the request's ``Host``; a rebound name must still authenticate). A page
        served by any other web server, a local one on another port included, is refused."""
        if origin is None:
            return True
        if origin in self.config.extra_origins:
            return True
        try:
            parts = urlsplit(origin)
            port = parts.port
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or self._sock is None:
            return False
        if port is None:
            port = 443 if parts.scheme == "https" else 80
        if port != self.address[1]:
            return False
        hostname = (parts.hostname or "").lower()
        bound = self.config.host.strip("[]").lower()
        wildcard = bound in ("0.0.0.0", "::", "")  # a wildcard bind names no origin
        if is_loopback_host(hostname) or (hostname == bound and not wildcard):
            return True
        return self.requires_token and host is not None and parts.netloc == host

    # -- WebSocket ----------------------------------------------------------------------------

    async def _websocket(self, websocket: WebSocket) -> None:
        headers = websocket.headers
        if self._closing or not self._origin_allowed(headers.get("origin"), headers.get("host")):
            await websocket.close(code=1008)  # before accept: the upgrade is refused (403)
            return
        address = websocket.client.host if websocket.client is not None else ""
        refusal = self._admission.admit(address)
        if refusal is not None:  # over a cap: an HTTP answer instead of the upgrade
            with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
                await websocket.send_denial_response(
                    PlainTextResponse(
                        refusal.message, status_code=refusal.status, headers=dict(refusal.headers)
                    )
                )
            return
        try:
            await self._serve_websocket(websocket)
        finally:
            self._admission.release(address)

    async def _serve_websocket(self, websocket: WebSocket) -> None:
        await websocket.accept()

        send_text = websocket.send_text

        async def send(text: str) -> None:
            # try/except, not contextlib.suppress: this runs once per frame per connection.
            try:  # noqa: SIM105 - hot path
                await send_text(text)
            except (WebSocketDisconnect, RuntimeError, OSError):
                pass

        async def close(code: int, reason: str) -> None:
            with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
                await websocket.close(code=code, reason=reason)

        conn = Connection(
            uuid.uuid4().hex,
            send=send,
            close=close,
            max_entries=self.config.connection_queue,
            max_event_bytes=self.config.max_payload,
            state_version=self.bridge.state_version_json,
        )
        conn.cookie_session = websocket.cookies.get(AUTH_COOKIE) or None
        conn.client_address = websocket.client.host if websocket.client else None
        self._connections.add(conn)
        tasks: set[asyncio.Task[None]] = set()
        watches = PortWatches(self._port, conn)
        writer = asyncio.create_task(conn.run_writer())
        deadline = asyncio.get_running_loop().call_later(
            self.config.connect_timeout_s, self._connect_deadline, conn
        )
        try:
            await self._read(websocket, conn, tasks, watches)
        finally:
            deadline.cancel()
            self._connections.discard(conn)
            await watches.aclose()
            for task in (*tasks, writer):
                task.cancel()
            await asyncio.gather(*tasks, writer, return_exceptions=True)

    async def _read(
        self,
        websocket: WebSocket,
        conn: Connection,
        tasks: set[asyncio.Task[None]],
        watches: PortWatches,
    ) -> None:
        limit = self.config.max_payload
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            if text is None:
                conn.push_text(
                    error_frame(
                        UNKNOWN_ID,
                        WireError(
                            "INVALID_REQUEST", "binary frames are not accepted; send JSON text"
                        ),
                    )
                )
                continue
            if len(text) > limit or (
                len(text) * 4 > limit and len(text.encode("utf-8", "surrogatepass")) > limit
            ):
                conn.push_text(
                    error_frame(
                        UNKNOWN_ID,
                        WireError("INVALID_REQUEST", f"frame larger than {limit} bytes"),
                    )
                )
                continue
            try:
                request = parse_request(text)
            except FrameError as exc:
                conn.push_text(error_frame(exc.request_id, exc))
                continue
            if request.method == "connect":
                self._connect(conn, request)
                continue
            if not conn.online:
                conn.push_text(
                    error_frame(
                        request.id,
                        WireError("HANDSHAKE_REQUIRED", "Must send connect request first"),
                    )
                )
                continue
            if request.method in ("port.watch", "port.unwatch"):
                self._watch(conn, request, watches)
                continue
            if len(tasks) >= self.config.max_requests_in_flight:
                conn.push_text(
                    error_frame(
                        request.id,
                        WireError("RATE_LIMITED", "too many requests in flight on this connection"),
                    )
                )
                continue
            task = asyncio.create_task(self._dispatch(conn, request))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    def _connect_deadline(self, conn: Connection) -> None:
        """Close a socket that sent no successful ``connect`` in time (an unauthenticated
        socket must not hold a file descriptor for as long as its client likes)."""
        if conn.online or conn.closing_code is not None:
            return
        self._admission.note_connect_timeout()
        conn.close_soon(
            CLOSE_CONNECT_TIMEOUT, f"no connect within {self.config.connect_timeout_s:g}s"
        )

    def _watch(self, conn: Connection, request: Request, watches: PortWatches) -> None:
        """``port.watch`` / ``port.unwatch``, answered before the next frame is read."""
        if "read" not in conn.scopes:
            conn.push_text(
                error_frame(
                    request.id,
                    WireError("FORBIDDEN", f"Insufficient permissions for {request.method}"),
                )
            )
            return
        try:
            params = decode(request.params, WatchParams)
            watch_id, key = params.watch_id, params.session_key
            if request.method == "port.unwatch":
                conn.push_text(ok_frame(request.id, {"unwatched": watches.unwatch(watch_id)}))
                return
            if not key:
                raise WireError("INVALID_REQUEST", "Missing required fields: sessionKey")
            watches.watch(watch_id, key)
        except Exception as exc:  # mapped once, by class: see _error_map
            conn.push_text(error_frame(request.id, wire_error(exc, request.method)))
            return
        conn.push_text(ok_frame(request.id, {"watchId": watch_id, "sessionKey": key}))

    def _connect(self, conn: Connection, request: Request) -> None:
        if conn.online:
            conn.push_text(
                error_frame(
                    request.id, WireError("ALREADY_CONNECTED", "Connection already established")
                )
            )
            return
        params = request.params
        wait = self.limiter.retry_after(conn.client_address)
        if wait is not None:
            # Refused before any token is looked at: guesses past the limit learn nothing.
            conn.push_text(
                error_frame(
                    request.id,
                    WireError(
                        "RATE_LIMITED",
                        "too many failed authentications from this address; try again in "
                        f"{max(1, round(wait))} s",
                        {"retryAfterMs": int(wait * 1000)},
                    ),
                )
            )
            conn.close_soon(CLOSE_RATE_LIMITED, "rate limited")
            return
        auth = params.get("auth")
        # params.auth.token is the wire's place; a top-level params.token is where Lemon's
        # terminal client's own code would put one (the reference's quirk): taken too.
        token = auth.get("token") if isinstance(auth, dict) else params.get("token")
        scopes = frozenset(SCOPES)
        grant: Grant | None = None
        if token is not None:
            found = self._authenticate(token)
            if found is not None:
                grant = Grant(token_id=found[0], token_hash=hash_token(str(token)), scopes=found[1])
        elif self.requires_token:
            # A browser page: its cookie names a sign-in, whose token must still be valid.
            grant = self.logins.session(conn.cookie_session)
            if grant is not None and not self._grant_valid(grant):
                grant = None
        if grant is None and (self.requires_token or token is not None):
            self.limiter.failed(conn.client_address)
            conn.push_text(
                error_frame(request.id, WireError("UNAUTHORIZED", "invalid or missing token"))
            )
            conn.close_soon(CLOSE_UNAUTHORIZED, "unauthorized")
            return
        if grant is not None:
            conn.token_id, conn.token_hash, scopes = grant.token_id, grant.token_hash, grant.scopes
        asked = params.get("scopes")
        if isinstance(asked, list) and all(isinstance(s, str) for s in asked):
            scopes = scopes & frozenset(asked)
        conn.scopes = scopes
        limit = params.get("maxEventBytes")
        if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
            # A browser pane asks for a smaller per-event bound (seed 003: 65,536 bytes); an
            # event above it becomes the pane's one overflow marker (recover from a snapshot).
            conn.limit_event_bytes(limit)
        client = params.get("client")
        client_id = client.get("id") if isinstance(client, dict) else None
        hello: dict[str, Any] = {
            "type": "hello-ok",
            "protocol": PROTOCOL_VERSION,
            "server": {
                "version": SERVER_VERSION,
                "commit": None,
                "host": socket.gethostname(),
                "connId": conn.conn_id,
            },
            "features": {"methods": list(self.methods), "events": list(EVENTS)},
            "snapshot": {"presence": {}, "health": {"ok": True}},
            "policy": {
                "maxPayload": self.config.max_payload,
                "maxEventBytes": conn.max_event_bytes,
                "maxBufferedBytes": self.config.connection_queue * self.config.max_payload,
                "tickIntervalMs": self.config.tick_interval_ms,
            },
            "auth": {"role": "operator", "scopes": sorted(scopes)},
        }
        if isinstance(client_id, str):
            hello["auth"]["clientId"] = client_id
        conn.push_text(encode(hello).decode())
        conn.online = True

    async def _dispatch(self, conn: Connection, request: Request) -> None:
        method = self._methods.table.get(request.method)
        if method is None and (extension := self.wire_methods.get(request.method)) is not None:
            await self._dispatch_extension(conn, request, extension)
            return
        unsupported = UNSUPPORTED.get(request.method)
        if method is None and unsupported is not None:
            conn.push_text(error_frame(request.id, WireError("NOT_IMPLEMENTED", unsupported)))
            return
        if method is None:
            conn.push_text(
                error_frame(
                    request.id, WireError("METHOD_NOT_FOUND", f"Unknown method: {request.method}")
                )
            )
            return
        if method.scope is not None and method.scope not in conn.scopes:
            conn.push_text(
                error_frame(
                    request.id,
                    WireError("FORBIDDEN", f"Insufficient permissions for {method.name}"),
                )
            )
            return
        # chat.send: the run's events wait until its res is queued (they never overtake it).
        hold = conn.holding() if method.name == "chat.send" else contextlib.nullcontext()
        with hold:
            try:
                params = decode(request.params, method.params)
                frame = ok_frame(request.id, await method.handler(conn, params))
            except Exception as exc:  # mapped once, by class: see _error_map
                frame = error_frame(request.id, wire_error(exc, method.name))
            conn.push_text(frame)

    async def _dispatch_extension(
        self, conn: Connection, request: Request, method: WireMethod
    ) -> None:
        """An app's method (:mod:`lemon_core.wire_methods`): the same scope check and error
        mapping as the plane's own; its handler gets the params as decoded JSON."""
        if method.scope is not None and method.scope not in conn.scopes:
            conn.push_text(
                error_frame(
                    request.id,
                    WireError("FORBIDDEN", f"Insufficient permissions for {method.name}"),
                )
            )
            return
        call = WireCall(
            method=method.name,
            params=request.params,
            scopes=conn.scopes,
            token_id=conn.token_id,
        )
        try:
            frame = ok_frame(request.id, await method.handler(call))
        except Exception as exc:  # mapped once, by class: see _error_map
            frame = error_frame(request.id, wire_error(exc, method.name))
        conn.push_text(frame)
