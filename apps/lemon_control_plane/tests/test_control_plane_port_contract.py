"""The SessionPort contract kit against :class:`WebSocketSessionPort`: the same behaviour as
the in-process port, over the real control plane on the real daemon profile (router, gateway,
a real SQLite store, the runtime's ExecApprovals), whose agent app is replaced by one running
the kit's scripted executor. Skipped while the kit is not installed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lemon_control_plane import (
    ControlPlane,
    ControlPlaneOptions,
    WebSocketSessionPort,
    WebSocketSessionStream,
)
from lemon_core.approvals import ApprovalOutcome
from lemon_core.bus import session_topic
from lemon_core.capabilities import APPROVALS
from lemon_core.config import load_config
from lemon_core.events import ApprovalDecision, Event
from lemon_runtime import Runtime, discover_apps

from ._scripted_agent import scripted_agent_app

kit = pytest.importorskip("lemon_platform_test.session_kit")
executor_kit = pytest.importorskip("lemon_platform_test.executor")


class _Bounded:
    """A port sharing ``port``'s connection whose streams hold at most ``n`` events."""

    def __init__(self, port: WebSocketSessionPort, n: int) -> None:
        self._port, self._n = port, n

    def watch(self, session_key: str) -> WebSocketSessionStream:
        return self._port.watch(session_key, max_entries=self._n)

    def watch_all(self) -> WebSocketSessionStream:
        return self._port.watch_all(max_entries=self._n)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._port, name)


@dataclass(kw_only=True)
class WireHarness:
    runtime: Runtime
    executor: Any
    port: WebSocketSessionPort
    other_port: WebSocketSessionPort
    _asks: dict[str, asyncio.Task[ApprovalOutcome]] = field(default_factory=dict)

    def port_with(self, *, stream_max_entries: int) -> Any:
        return _Bounded(self.port, stream_max_entries)

    async def ask_approval(
        self, *, session_key: str, run_id: str, tool: str, action: Mapping[str, Any]
    ) -> str:
        approvals = self.runtime.context.capabilities.require(APPROVALS)
        loop = asyncio.get_running_loop()
        asked: asyncio.Future[str] = loop.create_future()
        task = loop.create_task(
            approvals.request(
                tool=tool,
                action=action,
                run_id=run_id,
                session_key=session_key,
                agent_id="kit",
                on_requested=lambda pending: asked.set_result(pending.id),
            )
        )
        await asyncio.wait({asked, task}, return_when=asyncio.FIRST_COMPLETED)
        if not asked.done():
            task.result()
        self._asks[asked.result()] = task
        return asked.result()

    async def approval_outcome(self, approval_id: str) -> ApprovalDecision:
        return (await self._asks[approval_id]).decision

    def publish_on_session(self, session_key: str, event: Event) -> None:
        self.runtime.bus.broadcast(session_topic(session_key), event)

    async def close(self) -> None:
        for task in self._asks.values():
            task.cancel()
        await asyncio.gather(*self._asks.values(), return_exceptions=True)


async def _running(tmp_path: Path) -> AsyncIterator[WireHarness]:
    """The runtime lives in a task that owns it (start and stop in one task)."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[WireHarness] = loop.create_future()
    stop = asyncio.Event()
    scripted = executor_kit.ScriptedExecutor()

    async def own() -> None:
        home = tmp_path / "home"
        home.mkdir()
        apps = {**discover_apps(), "coding_agent": scripted_agent_app(scripted)}
        runtime = Runtime(
            profile="daemon",
            config=load_config(home=home, cwd=tmp_path, environ={}),
            apps=apps,
            options=[ControlPlaneOptions(port=0, cwd=str(tmp_path))],
        )
        async with runtime:
            plane = runtime.handle("lemon_control_plane")
            assert isinstance(plane, ControlPlane)
            async with (
                WebSocketSessionPort(plane.ws_url, token=plane.local_token) as port,
                WebSocketSessionPort(plane.ws_url, token=plane.local_token) as other,
            ):
                harness = WireHarness(
                    runtime=runtime, executor=scripted, port=port, other_port=other
                )
                ready.set_result(harness)
                try:
                    await stop.wait()
                finally:
                    await harness.close()

    owner = loop.create_task(own())
    await asyncio.wait({ready, owner}, return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():
        owner.result()
    try:
        yield ready.result()
    finally:
        stop.set()
        await owner


class TestWebSocketSessionPort(kit.SessionPortContract):  # type: ignore[misc, name-defined]  # the kit is found at run time
    @pytest.fixture
    async def session_harness(self, tmp_path: Path) -> AsyncIterator[Any]:
        async for harness in _running(tmp_path):
            yield harness
