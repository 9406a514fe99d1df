"""A sync subagent task beside a top-level run of the same prompt, both in the same run.

Run: ``.venv/bin/python bench/subagent_bench.py [--runs N]``

The ``full`` profile boots on a SQLite store with the scripted provider server (real HTTP on
127.0.0.1) as the model, answering every request at once. Baseline: a top-level run of the
prompt submitted through the session port and awaited until its ``RunEnded``. Subject: the
same prompt as a sync task (``Subagents.run``: the run graph node written, the child submitted
through the session port into its own session, awaited, the node finished). Target (issue 29):
task <= 1.3 x top-level + 5 ms. Medians over the runs, alternating the two so drift hits both.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

from coding_agent._boot import CodingAgentRuntime
from coding_agent.subagents import ParentRun, TaskRequest
from lemon_core.config import load_config
from lemon_core.execution import ALL_TOOLS, RunRequest, ToolPolicy
from lemon_core.sessions import SESSION_PORT, RunEnded
from lemon_platform_test.providers import ScriptedProviderServer, ScriptedTurn
from lemon_runtime import Runtime

SESSION = "agent:bench:main"


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, ScriptedProviderServer() as server:
        home = Path(tmp) / "home"
        home.mkdir()
        work = Path(tmp) / "work"
        work.mkdir()
        (home / "config.toml").write_text(
            '[defaults]\nmodel = "scripted:test-model"\n\n[providers.scripted]\n'
            f'kind = "openai_completions"\nbase_url = "{server.openai_base_url}"\n'
        )
        loaded = load_config(home=home, cwd=Path(tmp), environ={})
        server.script(*(ScriptedTurn(text="ok") for _ in range(2 * runs + 2)))
        async with Runtime(profile="full", config=loaded, store="sqlite") as rt:
            port = rt.context.capabilities.require(SESSION_PORT)
            agent = rt.handle("coding_agent")
            assert isinstance(agent, CodingAgentRuntime)
            assert agent.impl.subagents is not None
            subagents = agent.impl.subagents
            parent = ParentRun(run_id="run_bench", session_key=SESSION, root_run_id="run_bench",
                               depth=0, policy=ToolPolicy(), cwd=str(work),
                               preapproved=frozenset({ALL_TOOLS}))  # fmt: skip

            async def top_level(i: int) -> float:
                key = f"agent:bench:main:sub:top{i}"  # a fresh session, as a child gets
                stream = port.watch(key)
                t0 = time.perf_counter()
                receipt = await port.submit(RunRequest(
                    origin="bench", session_key=key, prompt="say ok", cwd=str(work),
                    tool_policy=ToolPolicy(), preapproved=frozenset({ALL_TOOLS})))  # fmt: skip
                while True:
                    event = await stream.get()
                    if isinstance(event, RunEnded) and event.run_id == receipt.run_id:
                        break
                elapsed = time.perf_counter() - t0
                stream.close()
                return elapsed

            async def task(i: int) -> float:
                # A fresh parent identity per task keeps the children-per-run cap out of it.
                p = dataclasses.replace(parent, run_id=f"run_bench{i}")
                t0 = time.perf_counter()
                node = await subagents.run(p, TaskRequest(prompt="say ok"))
                elapsed = time.perf_counter() - t0
                assert node.status == "completed", node
                return elapsed

            await top_level(-1)  # warm up both paths once
            await task(-1)
            tops: list[float] = []
            tasks: list[float] = []
            for i in range(runs):
                tops.append(await top_level(i))
                tasks.append(await task(i))
        top = statistics.median(tops) * 1000
        sub = statistics.median(tasks) * 1000
        target = 1.3 * top + 5
        print(f"top-level run (baseline): median {top:.2f} ms over {runs}")
        print(f"sync task:                median {sub:.2f} ms ({sub / top:.2f}x)")
        print(f"target <= 1.3x + 5 ms = {target:.2f} ms: {'met' if sub <= target else 'missed'}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=30)
    asyncio.run(main(ap.parse_args().runs))
