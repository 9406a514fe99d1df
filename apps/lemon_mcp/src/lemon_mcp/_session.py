"""A session's own MCP servers: the ones a client gave for it (ACP's ``session/new``
``mcpServers``), carried on each run request as :class:`~lemon_core.mcp.McpServerSpec`.

:class:`SessionServers` keeps one connection per (session key, server name), started on the
first run of that session that brings the definition, reused by its later runs while the
definition is unchanged, restarted when it changes. A server of one session is never offered
to another session's runs: the key and each offered tool name the session
(:attr:`McpToolSpec.session_key`), and a call for a tool whose session has no running server
of that name is an error output.

Bounds: at most ``max_servers`` session servers run at once (the least recently used idle ones
are stopped first to make room), and one unused for ``idle_s`` is stopped by a timer (a task
that wakes when the least recently used one is due, and only while there are servers; one whose
start or refresh holds its lock waits for the next wake, at least :data:`_MIN_SWEEP_S` later),
or at the next discovery of any session, whichever comes first. A start is bounded by
``startup_timeout_s``; a run waits at most ``wait_s`` for it (a slower one goes on starting,
owned here, and is offered to the next run). A failed server is retried by the next run after
``retry_s``. A session server's tools all ask (approval ``ask``): the client chose the server,
the person still approves each call.

A stdio server gets the hub's environment less its secrets (the hub's own rule, through
``stdio_transport``) plus the ``env`` the client gave; an HTTP server gets the client's
``headers``. Those values go to the server only (never a log, an output or the tool list).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec

from lemon_core.mcp import McpDiscovery, McpServerSpec, McpToolOutput, McpToolSpec
from lemon_mcp._client import McpClient, Transport, close_owned
from lemon_mcp._content import call_output
from lemon_mcp._naming import tool_names
from lemon_mcp._schema import normalise_schema
from lemon_mcp._section import McpServerConfig
from lemon_mcp.errors import McpError

__all__ = ["SessionServers"]

log = logging.getLogger("lemon_mcp")

_MAX_DESCRIPTION: Final = 2000
#: The idle timer's shortest wait (a server due but busy is looked at again this much later).
_MIN_SWEEP_S: Final = 1.0
StdioFactory = Callable[[str, McpServerConfig], Transport]


@dataclass(kw_only=True, slots=True)
class _Entry:
    session_key: str
    spec: McpServerSpec
    digest: str
    client: McpClient | None = None
    tools: list[Mapping[str, Any]] = field(default_factory=list)
    error: str | None = None
    retry_at: float = 0.0
    last_used: float = 0.0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class SessionServers:
    """See the module docstring (loop-only; :meth:`aclose` ends every server)."""

    def __init__(
        self,
        *,
        stdio_transport: StdioFactory,
        max_servers: int = 32,
        idle_s: float = 900.0,
        startup_timeout_s: float = 30.0,
        call_timeout_s: float = 300.0,
        retry_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stdio = stdio_transport
        self._max = max_servers
        self._idle_s = idle_s
        self._startup_s = startup_timeout_s
        self._call_s = call_timeout_s
        self._retry_s = retry_s
        self._clock = clock
        self._entries: dict[tuple[str, str], _Entry] = {}
        # Starts a run stopped waiting for: owned here, cancelled by aclose.
        self._background: set[asyncio.Task[str | None]] = set()
        # The clean-up of a start cancelled midway: aclose waits for it (the process ended).
        self._cleanups: set[asyncio.Task[object]] = set()
        self._sweeper: asyncio.Task[None] | None = None

    def statistics(self) -> dict[str, int]:
        running = sum(1 for e in self._entries.values() if e.client is not None)
        return {"servers": len(self._entries), "running": running, "max_servers": self._max}

    async def merge(
        self,
        found: McpDiscovery,
        *,
        session_key: str,
        servers: Sequence[McpServerSpec],
        cwd: Path,
        wait_s: float,
    ) -> McpDiscovery:
        """``found`` (the configured servers' tools) with the tools of ``session_key``'s own
        ``servers`` added; names stay unique across both (a pair that collides gets the
        naming rule's hash suffix)."""
        configured = {t.server for t in found.tools} | set(found.unavailable)
        unavailable = dict(found.unavailable)
        wanted: list[McpServerSpec] = []
        for spec in servers:
            if spec.name in configured:
                unavailable[spec.name] = (
                    "the session's server has the name of a configured server; rename it"
                )
            else:
                wanted.append(spec)
        await self._reap(session_key, {s.name for s in wanted})
        tasks = {
            spec.name: asyncio.ensure_future(self._ready(session_key, spec, cwd)) for spec in wanted
        }
        pending: set[asyncio.Task[str | None]] = set()
        if tasks:
            _done, pending = await asyncio.wait(tasks.values(), timeout=wait_s)
        offered: list[tuple[str, Mapping[str, Any]]] = []
        for name, task in tasks.items():
            if task in pending:
                self._background.add(task)
                task.add_done_callback(self._background.discard)
                unavailable[name] = f"still starting after {wait_s:g} s; offered to the next run"
                continue
            error = task.result()
            if error is not None:
                unavailable[name] = error
                continue
            entry = self._entries[(session_key, name)]
            entry.last_used = self._clock()
            offered += [(name, t) for t in entry.tools if isinstance(t.get("name"), str)]
        pairs = [(t.server, t.tool) for t in found.tools]
        pairs += [(n, str(t["name"])) for n, t in offered]
        names = tool_names(pairs)
        tools = [msgspec.structs.replace(t, name=names[(t.server, t.tool)]) for t in found.tools]
        tools += [
            McpToolSpec(
                name=names[(n, str(t["name"]))],
                server=n,
                tool=str(t["name"]),
                description=_description(n, t),
                parameters=normalise_schema(t.get("inputSchema")),
                approval="ask",
                session_key=session_key,
            )
            for n, t in offered
        ]
        return McpDiscovery(tools=tuple(tools), unavailable=unavailable)

    async def _ready(self, session_key: str, spec: McpServerSpec, cwd: Path) -> str | None:
        key = (session_key, spec.name)
        digest = _digest(spec)
        entry = self._entries.get(key)
        if entry is not None and entry.digest != digest:
            await self._stop(entry)
            entry = None
        if entry is None:
            entry = _Entry(session_key=session_key, spec=spec, digest=digest)
            entry.last_used = self._clock()
            self._entries[key] = entry
            self._arm()
        async with entry.lock:
            client = entry.client
            if client is not None and client.closed_reason is None:
                if not client.tools_stale:
                    return None
                try:
                    entry.tools = await client.list_tools()
                    return None
                except McpError as exc:
                    return await self._failed(entry, f"tools/list failed: {exc}")
            if client is not None:
                return await self._failed(entry, client.closed_reason or "the connection ended")
            if entry.error is not None and self._clock() < entry.retry_at:
                return entry.error
            return await self._start(entry, cwd)

    async def _start(self, entry: _Entry, cwd: Path) -> str | None:
        spec = entry.spec
        try:
            transport = self._transport(spec, cwd)
        except McpError as exc:
            return await self._failed(entry, str(exc))
        client = McpClient(transport, name=spec.name)
        entry.client = client
        try:
            async with asyncio.timeout(self._startup_s):
                await client.start()
                entry.tools = await client.list_tools()
        except asyncio.CancelledError:
            cleanup: asyncio.Task[object] = asyncio.ensure_future(
                self._failed(entry, "the start was cancelled")
            )
            self._cleanups.add(cleanup)
            cleanup.add_done_callback(self._cleanups.discard)
            await asyncio.shield(cleanup)
            raise
        except TimeoutError:
            return await self._failed(entry, f"did not start within {self._startup_s:g} s")
        except McpError as exc:
            return await self._failed(entry, str(exc))
        entry.error = None
        log.info(
            "mcp session server %s of %s ready: %d tools",
            spec.name,
            entry.session_key,
            len(entry.tools),
        )
        return None

    def _transport(self, spec: McpServerSpec, cwd: Path) -> Transport:
        if spec.transport == "stdio":
            config = McpServerConfig(
                command=spec.command, args=spec.args, env=dict(spec.env), cwd=str(cwd)
            )
            return self._stdio(spec.name, config)
        from lemon_mcp._http import HttpTransport  # httpx only when an HTTP server is used

        return HttpTransport(name=spec.name, url=spec.url, headers=dict(spec.headers))

    async def _failed(self, entry: _Entry, reason: str) -> str:
        entry.error = reason
        entry.retry_at = self._clock() + self._retry_s
        log.warning(
            "mcp session server %s of %s unavailable: %s",
            entry.spec.name,
            entry.session_key,
            reason,
        )
        client, entry.client = entry.client, None
        if client is not None:
            await close_owned(client, self._cleanups)
        return reason

    async def _reap(self, session_key: str, keep: set[str]) -> None:
        """Stop servers idle for ``idle_s``, then the least recently used others until the
        ones this run needs fit under ``max_servers`` (never one this run needs)."""
        now = self._clock()
        needed = {(session_key, name) for name in keep}
        for key, entry in list(self._entries.items()):
            if key not in needed and now - entry.last_used >= self._idle_s:
                await self._drop(key)
        extra = len(needed - set(self._entries))
        others = sorted(
            (e.last_used, k) for k, e in self._entries.items() if k not in needed
        )  # oldest first
        while others and len(self._entries) + extra > self._max:
            _, key = others.pop(0)
            await self._drop(key)

    def _arm(self) -> None:
        """Start the idle timer unless it runs (it ends when no server is left)."""
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    async def _sweep(self) -> None:
        """Stop each server once unused for ``idle_s``: wait until the least recently used one
        is due (a later use moves it on), stop those due whose lock is free, again."""
        while self._entries:
            oldest = min(e.last_used for e in self._entries.values())
            due = oldest + self._idle_s - self._clock()
            if due > 0:
                await asyncio.sleep(due)  # the timer's wait
                continue
            for key, entry in list(self._entries.items()):
                idle = self._clock() - entry.last_used >= self._idle_s
                if idle and not entry.lock.locked() and self._entries.get(key) is entry:
                    await self._drop(key)
            if self._entries:
                await asyncio.sleep(_MIN_SWEEP_S)

    async def _drop(self, key: tuple[str, str]) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            log.info("mcp session server %s of %s stopped (idle)", key[1], key[0])
            await self._stop(entry)

    async def _stop(self, entry: _Entry) -> None:
        client, entry.client = entry.client, None
        if client is not None:
            await close_owned(client, self._cleanups)

    async def call(self, tool: McpToolSpec, arguments: Mapping[str, Any]) -> McpToolOutput:
        entry = self._entries.get((tool.session_key or "", tool.server))
        client = entry.client if entry is not None else None
        if entry is None or client is None:
            reason = (entry.error if entry is not None else None) or "it is not running"
            return McpToolOutput(
                content=f"server {tool.server} is unavailable: {reason}", is_error=True
            )
        entry.last_used = self._clock()

        async def lost(reason: str) -> None:
            async with entry.lock:
                if entry.client is client:
                    await self._failed(entry, reason)

        return await call_output(
            client,
            server=tool.server,
            tool=tool.tool,
            arguments=arguments,
            deadline_s=self._call_s,
            lost=lost,
        )

    async def aclose(self) -> None:
        """Stop every session server (their process groups ended)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        for task in list(self._background):
            task.cancel()
        for task in list(self._background):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        entries, self._entries = list(self._entries.values()), {}
        await asyncio.gather(*(self._stop(e) for e in entries))
        # A start cancelled above, or a stop whose caller was (the idle timer's), ends its
        # server in a task of its own: wait for each (a clean-up may begin a close).
        while self._cleanups:
            await asyncio.gather(*list(self._cleanups), return_exceptions=True)


def _digest(spec: McpServerSpec) -> str:
    encoded = msgspec.json.encode(msgspec.to_builtins(spec), order="sorted")
    return hashlib.sha256(encoded).hexdigest()


def _description(server: str, tool: Mapping[str, Any]) -> str:
    text = str(tool.get("description") or tool.get("title") or "").strip()
    if len(text) > _MAX_DESCRIPTION:
        text = text[:_MAX_DESCRIPTION] + "..."
    return f"[MCP server {server}, this session's] {text}".strip()
