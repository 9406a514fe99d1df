"""Runtime boot and one terminal message, each printed beside a baseline from the same run.

Run: ``.venv/bin/python bench/runtime_chat_bench.py [--messages N] [--repeats R]``

1. Boot + stop of the ``full`` profile (coding_agent, lemon_gateway, lemon_router from their
   ``lemon.apps`` entry points, memory store); baseline: opening and closing the bus and a
   memory store alone (what every runtime pays before any app starts).
2. One message on the offline provider (``/echo hi``): RunRequest through the router, the
   gateway and the coding executor until the session sees the terminal phase; baseline: the
   same command submitted straight to the gateway (``Gateway.submit_execution``) and awaited,
   i.e. what the router adds on top of execution.

Figures are medians over the repeats; ratios are runtime path / baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from lemon_core.bus import Bus, Delivery, session_topic
from lemon_core.config import load_config
from lemon_core.execution import (
    ENGINE_RUNTIME,
    ROUTER_BRIDGE,
    ExecutionCommand,
    RunRequest,
    ToolPolicy,
)
from lemon_gateway import Gateway
from lemon_infra import MemoryStore
from lemon_router import Router
from lemon_runtime import Runtime

SESSION = "agent:bench:main"


async def boot_once(home: Path) -> tuple[float, float]:
    loaded = load_config(home=home, cwd=home, environ={})
    t0 = time.perf_counter()
    async with Runtime(profile="full", config=loaded, store="memory"):
        pass
    runtime_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    bus = Bus()
    store = MemoryStore()
    await store.close()
    bus.close()
    return runtime_s, time.perf_counter() - t0


async def messages(home: Path, cwd: str, n: int) -> tuple[float, float]:
    loaded = load_config(home=home, cwd=home, environ={})
    async with Runtime(profile="full", config=loaded, store="memory") as rt:
        router = rt.context.capabilities.require(ROUTER_BRIDGE)
        assert isinstance(router, Router)
        gateway = rt.context.capabilities.require(ENGINE_RUNTIME)
        assert isinstance(gateway, Gateway)
        delivery = Delivery(max_entries=100_000)
        sub = rt.bus.subscribe(session_topic(SESSION), delivery=delivery)
        routed: list[float] = []
        direct: list[float] = []
        for i in range(n):
            t0 = time.perf_counter()
            receipt = await router.submit(
                RunRequest(
                    origin="bench",
                    session_key=SESSION,
                    prompt="/echo hi",
                    cwd=cwd,
                    tool_policy=ToolPolicy(),
                    meta={"disable_auto_resume": True},
                )
            )
            while True:
                e = await delivery.get()
                if (
                    getattr(e, "type", "") == "run_phase_changed"
                    and e.payload.run_id == receipt.run_id
                    and e.payload.phase.terminal
                ):
                    break
            routed.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            handle = gateway.submit_execution(
                ExecutionCommand(
                    run_id=f"direct-{i}",
                    session_key="agent:bench:direct",
                    prompt="/echo hi",
                    cwd=cwd,
                    conversation_key=("session", f"agent:bench:direct-{i}"),
                    tool_policy=ToolPolicy(),
                )
            )
            await handle
            direct.append(time.perf_counter() - t0)
        sub.cancel()
        return statistics.median(routed), statistics.median(direct)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        os.environ["LEMON_HOME"] = str(home)  # the coding executor's transcripts
        boots = [await boot_once(home) for _ in range(args.repeats)]
        msgs = [await messages(home, tmp, args.messages) for _ in range(args.repeats)]
    b_rt = statistics.median(b for b, _ in boots)
    b_base = statistics.median(b for _, b in boots)
    m_rt = statistics.median(m for m, _ in msgs)
    m_base = statistics.median(m for _, m in msgs)
    print(f"{'benchmark':<48}{'runtime':>12}{'baseline':>12}{'ratio':>8}")
    print(
        f"{'boot + stop, full profile (memory store)':<48}"
        f"{b_rt * 1e3:>10.2f}ms{b_base * 1e3:>10.3f}ms{b_rt / b_base:>8.0f}"
    )
    print(
        f"{'one /echo message, router->gateway->executor':<48}"
        f"{m_rt * 1e3:>10.2f}ms{m_base * 1e3:>10.2f}ms{m_rt / m_base:>8.2f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
