"""The hub: the MCP servers of one runtime, started lazily and shared by its runs.

:meth:`McpHubImpl.discover` takes a run's configuration (loaded for its working directory):
for each enabled server (a project server only once approved, see :mod:`lemon_mcp._approvals`)
it reuses the running session of the same definition, or starts one (``initialize`` then
``tools/list``) bounded by ``startup_timeout_s``. Servers start concurrently; one that fails,
hangs or is not approved is reported in ``unavailable`` and costs the run nothing more. A
failed server is not retried before its backoff delay has passed (so a broken server does
not slow every run), and a server whose definition changed is stopped and started anew.
:meth:`McpHubImpl.call` is bounded by ``call_timeout_s``; its failures are error outputs the
model reads ("server X is unavailable: <reason>").

Secrets: ``env_from``, ``bearer_token_env`` and ``headers_env`` are read from the hub's
environment when a server starts; their values go to the server only (never logged, never in
an output, never in the tool list).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import fnmatch
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from lemon_core.backoff import Backoff
from lemon_core.config import Config
from lemon_core.mcp import McpDiscovery, McpServerSpec, McpToolOutput, McpToolSpec
from lemon_mcp._approvals import ProjectApprovals, project_server_names
from lemon_mcp._client import McpClient, Transport, close_owned
from lemon_mcp._content import call_output
from lemon_mcp._naming import tool_names
from lemon_mcp._schema import normalise_schema
from lemon_mcp._section import McpConfig, McpServerConfig, definition_hash
from lemon_mcp._session import SessionServers
from lemon_mcp._stdio import StdioTransport
from lemon_mcp.errors import McpAuthError, McpError, McpHttpStatusError

__all__ = ["McpHubImpl", "ServerState", "ServerStatus"]

log = logging.getLogger("lemon_mcp")

_RESTART: Final = Backoff(initial=1.0, cap=60.0, jitter=0.0)
# Never inherited by a server (it gets its own secrets through env_from only): the names the
# configuration calls secrets, and names that look like one (the coding tools' rule).
_SECRET_PATTERNS: Final = (
    "*_KEY", "*_KEYS", "*_TOKEN", "*_TOKENS", "*SECRET*", "*PASSWORD*", "*PASSWD*",
    "*_CREDENTIALS", "*_DSN", "LEMON_REDIS_URL",
)  # fmt: skip
_MAX_DESCRIPTION: Final = 2000


def _needs_login(exc: McpError) -> bool:
    return isinstance(exc, McpAuthError) or (
        isinstance(exc, McpHttpStatusError) and exc.status == 401
    )


class ServerState(enum.Enum):
    STOPPED = "stopped"
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerStatus:
    """What ``lemon mcp list`` shows of one server."""

    name: str
    transport: str
    state: ServerState
    tools: int
    last_error: str | None
    detail: str = ""
    """How it is reached once started (``streamable-http``, ``sse (legacy)``, ``stdio``)."""
    needs_login: bool = False
    """Failed for want of an OAuth login (``lemon mcp login NAME``)."""


@dataclass(kw_only=True, slots=True)
class _Server:
    name: str
    config: McpServerConfig
    digest: str
    state: ServerState = ServerState.STOPPED
    client: McpClient | None = None
    tools: list[Mapping[str, Any]] = field(default_factory=list)
    last_error: str | None = None
    failures: int = 0
    retry_at: float = 0.0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    detail: str = ""
    stderr: str = ""
    """The stderr ring of the last process that ended (``lemon mcp logs`` after a crash)."""
    refreshing: bool = False
    needs_login: bool = False
    """The last start failed for want of an OAuth login (``lemon mcp login NAME``)."""


class McpHubImpl:
    """Implements :class:`lemon_core.mcp.McpHub` (loop-only); :meth:`aclose` ends every server."""

    def __init__(self, *, home: Path, environ: Mapping[str, str]) -> None:
        self._home = home
        self._environ = dict(environ)
        self._servers: dict[str, _Server] = {}
        self._approvals = ProjectApprovals(home)
        self._clock = time.monotonic
        # Starts a run stopped waiting for (discover_wait_s): owned here, cancelled by aclose.
        self._background: set[asyncio.Task[str | None]] = set()
        # The clean-up of a start cancelled midway, and every client's close (close_owned):
        # aclose waits for them (the processes ended), whoever began them was cancelled or not.
        self._cleanups: set[asyncio.Task[object]] = set()
        self._config_secrets: frozenset[str] = frozenset()
        # The servers a session's client gave (ACP's mcpServers): keyed by session.
        self._sessions = SessionServers(stdio_transport=self.transport_for)
        self._listeners: list[Callable[[str, str], None]] = []

    def subscribe(self, listener: Callable[[str, str], None]) -> Callable[[], None]:
        """Call ``listener(server, change)`` on each state change (``starting``, ``ready``,
        ``failed``, ``needs_login`` (failed for want of an OAuth login), ``lost`` (a ready
        server's connection ended: it restarts on next use), ``stopped``, ``tools_changed``);
        returns what unsubscribes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _changed(self, name: str, change: str) -> None:
        for listener in list(self._listeners):
            try:
                listener(name, change)
            except Exception:  # a listener's fault is its own: never stop the hub
                log.exception("mcp status listener failed")

    # -- discovery -------------------------------------------------------------------------

    def configured(
        self, config: Config, *, cwd: Path
    ) -> tuple[dict[str, McpServerConfig], dict[str, str]]:
        """The servers a run may start, and why each other configured server may not."""
        section = config.section(McpConfig)
        if not section.servers:
            return {}, {}
        project, from_project = project_server_names(cwd, self._home)
        usable: dict[str, McpServerConfig] = {}
        refused: dict[str, str] = {}
        for name, server in section.servers.items():
            if not server.enabled:
                continue
            digest = definition_hash(server)
            if (
                project is not None
                and name in from_project
                and not self._approvals.approved(project, name, digest)
            ):
                refused[name] = (
                    f"defined in {project} and not approved (or changed since): run "
                    f"`lemon mcp approve {name}` in this project to use it"
                )
                continue
            usable[name] = server
        return usable, refused

    async def discover(
        self,
        config: Config,
        *,
        cwd: Path,
        session_key: str | None = None,
        servers: Sequence[McpServerSpec] = (),
    ) -> McpDiscovery:
        found = await self._discover_configured(config, cwd=cwd)
        if session_key is None or not servers:
            return found
        return await self._sessions.merge(
            found,
            session_key=session_key,
            servers=servers,
            cwd=cwd,
            wait_s=config.section(McpConfig).discover_wait_s,
        )

    async def _discover_configured(self, config: Config, *, cwd: Path) -> McpDiscovery:
        self._config_secrets = frozenset(config.secret_env_names())
        usable, unavailable = self.configured(config, cwd=cwd)
        if not usable:
            return McpDiscovery(unavailable=unavailable)
        names = sorted(usable)
        tasks = {n: asyncio.ensure_future(self._ready(n, usable[n])) for n in names}
        wait_s = config.section(McpConfig).discover_wait_s
        _done, pending = await asyncio.wait(tasks.values(), timeout=wait_s)
        offered: list[tuple[str, McpServerConfig, Mapping[str, Any]]] = []
        for name, task in tasks.items():
            if task in pending:
                self._background.add(task)
                task.add_done_callback(self._background.discard)
                unavailable[name] = (
                    f"still starting after {wait_s:g} s (discover_wait_s); it will be offered "
                    "to the next run once up"
                )
                continue
            error = task.result()
            if error is not None:
                unavailable[name] = error
                continue
            server = self._servers[name]
            for tool in server.tools:
                tool_name = tool.get("name")
                if not isinstance(tool_name, str) or not server.config.offers(tool_name):
                    continue
                if server.config.approval_of(tool_name) == "deny":
                    continue
                offered.append((name, server.config, tool))
        names_for = tool_names((n, str(t["name"])) for n, _, t in offered)
        specs = tuple(
            McpToolSpec(
                name=names_for[(n, str(t["name"]))],
                server=n,
                tool=str(t["name"]),
                description=_description(n, t),
                parameters=_parameters(t.get("inputSchema")),
                approval=cfg.approval_of(str(t["name"])),
            )
            for n, cfg, t in offered
        )
        return McpDiscovery(tools=specs, unavailable=unavailable)

    async def _ready(self, name: str, config: McpServerConfig) -> str | None:
        """``None`` once ``name`` is running with a fresh tool list, else why it is not."""
        digest = definition_hash(config)
        server = self._servers.get(name)
        if server is not None and server.digest != digest:
            await self._stop(server)
            server = None
        if server is None:
            server = _Server(name=name, config=config, digest=digest)
            self._servers[name] = server
        async with server.lock:
            client = server.client
            if server.state is ServerState.READY and client is not None:
                if client.closed_reason is None and not client.tools_stale:
                    return None
                if client.closed_reason is None:
                    try:
                        server.tools = await client.list_tools()
                        return None
                    except McpError as exc:
                        await self._failed(server, f"tools/list failed: {exc}")
                        return server.last_error
                await self._failed(server, client.closed_reason or "the connection ended")
            if server.state is ServerState.FAILED and self._clock() < server.retry_at:
                return server.last_error
            return await self._start(server)

    async def _start(self, server: _Server) -> str | None:
        server.state = ServerState.STARTING
        self._changed(server.name, "starting")
        config = server.config
        began = self._clock()
        try:
            transport = self._transport(server.name, config)
        except McpError as exc:
            await self._failed(server, str(exc))
            return server.last_error
        client = McpClient(transport, name=server.name)
        server.client = client
        try:
            async with asyncio.timeout(config.startup_timeout_s):
                try:
                    await client.start()
                except McpHttpStatusError as exc:
                    if config.http_transport != "auto" or exc.status not in (400, 404, 405):
                        raise
                    # An older server: the legacy HTTP+SSE transport at the same URL.
                    log.info("mcp server %s: HTTP %d to initialize, trying legacy SSE",
                             server.name, exc.status)  # fmt: skip
                    with contextlib.suppress(McpError, OSError):
                        await client.aclose()
                    client = McpClient(
                        self._transport(server.name, config, legacy=True), name=server.name
                    )
                    server.client = client
                    await client.start()
                server.tools = await client.list_tools()
        except asyncio.CancelledError:
            cleanup: asyncio.Task[object] = asyncio.ensure_future(
                self._failed(server, "the start was cancelled")
            )
            self._cleanups.add(cleanup)
            cleanup.add_done_callback(self._cleanups.discard)
            await asyncio.shield(cleanup)
            raise
        except TimeoutError:
            await self._failed(
                server, f"did not start within startup_timeout_s ({config.startup_timeout_s:g} s)"
            )
            return server.last_error
        except McpError as exc:
            await self._failed(server, str(exc), needs_login=_needs_login(exc))
            return server.last_error
        server.state = ServerState.READY
        server.failures = 0
        server.last_error = None
        server.detail = _detail(client.transport)
        client.on_tools_changed = lambda: self._tools_changed(server, client)
        client.on_lost = lambda _reason: self._lost(server, client)
        self._changed(server.name, "ready")
        log.info(
            "mcp server %s ready: %d tools in %.0f ms",
            server.name,
            len(server.tools),
            (self._clock() - began) * 1000,
        )
        return None

    def _lost(self, server: _Server, client: McpClient) -> None:
        if server.client is client and server.state is ServerState.READY:
            self._changed(server.name, "lost")

    async def _failed(self, server: _Server, reason: str, *, needs_login: bool = False) -> None:
        server.failures += 1
        server.state = ServerState.FAILED
        server.last_error = reason
        server.retry_at = self._clock() + _RESTART.delay(server.failures)
        log.warning("mcp server %s unavailable: %s", server.name, reason)
        server.needs_login = needs_login
        self._changed(server.name, "needs_login" if needs_login else "failed")
        client, server.client = server.client, None
        if client is not None:
            await close_owned(client, self._cleanups)
            if isinstance(client.transport, StdioTransport):
                server.stderr = client.transport.stderr_tail()

    def _tools_changed(self, server: _Server, client: McpClient) -> None:
        """``notifications/tools/list_changed``: list again in the background (one refresh at
        a time; a change announced meanwhile is picked up by the next run's check)."""
        if server.refreshing or server.client is not client:
            return
        server.refreshing = True
        task = asyncio.get_running_loop().create_task(self._refresh(server, client))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _refresh(self, server: _Server, client: McpClient) -> str | None:
        try:
            async with server.lock:
                if server.client is not client or client.closed_reason is not None:
                    return None
                before = {str(t.get("name")) for t in server.tools}
                try:
                    server.tools = await client.list_tools()
                except McpError as exc:
                    log.info("mcp server %s: refreshing its tools failed: %s", server.name, exc)
                    return str(exc)
                after = {str(t.get("name")) for t in server.tools}
                # Only the difference is told, never every tool again.
                log.info(
                    "mcp server %s: tools changed (+%s -%s)",
                    server.name,
                    ",".join(sorted(after - before)) or "none",
                    ",".join(sorted(before - after)) or "none",
                )
                self._changed(server.name, "tools_changed")
                return None
        finally:
            server.refreshing = False

    def transport_for(self, name: str, config: McpServerConfig) -> Transport:
        """A new, unstarted transport for ``config`` (its secrets read now); raises
        :class:`~lemon_mcp.McpError` when a variable it names is unset."""
        return self._transport(name, config)

    def _transport(self, name: str, config: McpServerConfig, *, legacy: bool = False) -> Transport:
        if config.transport == "stdio":
            env = {
                k: v
                for k, v in self._environ.items()
                if k not in self._config_secrets
                and not any(fnmatch.fnmatchcase(k.upper(), p) for p in _SECRET_PATTERNS)
            }
            env.update(config.env)
            missing = [v for v in config.env_from.values() if v not in self._environ]
            if missing:
                raise McpError(f"env_from names unset variable(s): {', '.join(sorted(missing))}")
            env.update({k: self._environ[v] for k, v in config.env_from.items()})
            return StdioTransport(
                name=name,
                command=config.command,
                args=config.args,
                env=env,
                cwd=Path(config.cwd).expanduser() if config.cwd else None,
            )
        # httpx only when an HTTP server is used
        from lemon_mcp._http import HttpAuth, HttpTransport, SseTransport

        headers: dict[str, str] = {}
        wanted = dict(config.headers_env)
        if config.bearer_token_env:
            wanted["Authorization"] = config.bearer_token_env
        missing = [v for v in wanted.values() if v not in self._environ]
        if missing:
            raise McpError(f"the server's secrets are unset: {', '.join(sorted(missing))}")
        for header, var in wanted.items():
            value = self._environ[var]
            headers[header] = (
                f"Bearer {value}"
                if header == "Authorization" and (var == config.bearer_token_env)
                else value
            )
        auth: HttpAuth | None = None
        if config.auth == "oauth":
            from lemon_mcp._oauth import OAuthClient

            auth = OAuthClient(
                name=name, server_url=config.url, settings=config.oauth, home=self._home,
                environ=self._environ,
            )  # fmt: skip
        if legacy or config.http_transport == "sse":
            return SseTransport(name=name, url=config.url, headers=headers, auth=auth)
        return HttpTransport(name=name, url=config.url, headers=headers, auth=auth)

    # -- calls -----------------------------------------------------------------------------

    async def call(self, tool: McpToolSpec, arguments: Mapping[str, Any]) -> McpToolOutput:
        if tool.session_key is not None:
            return await self._sessions.call(tool, arguments)
        server = self._servers.get(tool.server)
        client = server.client if server is not None else None
        if server is None or client is None or server.state is not ServerState.READY:
            reason = server.last_error if server is not None else None
            return _unavailable(tool.server, reason or "it is not running")

        async def lost(reason: str) -> None:
            async with server.lock:
                if server.client is client:
                    await self._failed(server, reason)

        return await call_output(
            client,
            server=tool.server,
            tool=tool.tool,
            arguments=arguments,
            deadline_s=server.config.call_timeout_s,
            lost=lost,
        )

    # -- status and lifecycle --------------------------------------------------------------

    def status(self) -> list[ServerStatus]:
        return [
            ServerStatus(
                name=s.name,
                transport=s.config.transport,
                state=s.state,
                tools=len(s.tools),
                last_error=s.last_error,
                detail=s.detail,
                needs_login=s.state is ServerState.FAILED and s.needs_login,
            )
            for s in sorted(self._servers.values(), key=lambda s: s.name)
        ]

    def stderr_tail(self, name: str) -> str:
        server = self._servers.get(name)
        transport = server.client.transport if server and server.client else None
        if isinstance(transport, StdioTransport):
            return transport.stderr_tail()
        return server.stderr if server is not None else ""

    async def _stop(self, server: _Server) -> None:
        client, server.client = server.client, None
        server.state = ServerState.STOPPED
        self._changed(server.name, "stopped")
        if client is not None:
            await close_owned(client, self._cleanups)

    async def aclose(self) -> None:
        """Stop every server (their process groups ended)."""
        for task in list(self._background):
            task.cancel()
        for task in list(self._background):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        servers, self._servers = list(self._servers.values()), {}
        await asyncio.gather(*(self._stop(s) for s in servers), self._sessions.aclose())
        # A start cancelled above, or a stop whose caller was, ends its server in a task of
        # its own: wait for each (a clean-up may begin a close: until none is left).
        while self._cleanups:
            await asyncio.gather(*list(self._cleanups), return_exceptions=True)


def _detail(transport: Transport) -> str:
    if isinstance(transport, StdioTransport):
        return "stdio"
    return "sse (legacy)" if type(transport).__name__ == "SseTransport" else "streamable-http"


def _unavailable(server: str, reason: str) -> McpToolOutput:
    return McpToolOutput(content=f"server {server} is unavailable: {reason}", is_error=True)


def _description(server: str, tool: Mapping[str, Any]) -> str:
    text = str(tool.get("description") or tool.get("title") or "").strip()
    if len(text) > _MAX_DESCRIPTION:
        text = text[:_MAX_DESCRIPTION] + "..."
    return f"[MCP server {server}] {text}".strip()


def _parameters(schema: object) -> dict[str, Any]:
    return normalise_schema(schema)
