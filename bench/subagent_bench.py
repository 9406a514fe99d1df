"""A sync subagent task beside a top-level run of the same prompt, both in the same run; and
with ``--streaming``, the person's run streaming while 8 children stream beside it.

Run: ``.venv/bin/python bench/subagent_bench.py [--runs N]`` and
``.venv/bin/python bench/subagent_bench.py --streaming [--rounds N]``

The ``full`` profile boots on a SQLite store with the scripted provider server (real HTTP on
127.0.0.1) as the model, answering every request at once. Baseline: a top-level run of the
prompt submitted through the session port and awaited until its ``RunEnded``. Subject: the
same prompt as a sync task (``Subagents.run``: the run graph node written, the child submitted
through the session port into its own session, awaited, the node finished). Target (issue 29):
task <= 1.3 x top-level + 5 ms. Medians over the runs, alternating the two so drift hits both.

``--streaming`` (issue 29: "8 concurrent children each streaming 1,000 deltas"): every model
call streams 1,000 one-character deltas, one every millisecond. Baseline: the person's run in
its own session, alone. Subject: the same run while 8 async children of another run (the
parent's session) stream theirs. Figures: the p99 gap between consecutive deltas on the
person's session stream (target: loaded <= 2x idle), and the overflows of a healthy consumer
(the parent's session stream and a ``watch_all`` stream, each read as fast as it comes: target
0). Medians over the rounds, idle and loaded alternating.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import itertools
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

from coding_agent._boot import CodingAgentRuntime
from coding_agent.subagents import ParentRun, TaskRequest
from lemon_core.config import load_config
from lemon_core.execution import ALL_TOOLS, RunRequest, ToolPolicy
from lemon_core.sessions import SESSION_PORT, RunEnded, SessionStream, StreamOverflow, TextDelta
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


DELTAS = 1000
CHILDREN = 8


def _streaming_turn() -> ScriptedTurn:
    return ScriptedTurn(text="x" * DELTAS, chunk_size=1, delay=0.001)


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


async def streaming(rounds: int) -> None:
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
        # Every call streams alike, so whichever run takes a turn gets the same stream.
        server.script(*(_streaming_turn() for _ in range(rounds * (2 + CHILDREN) + 2)))
        async with Runtime(profile="full", config=loaded, store="sqlite") as rt:
            port = rt.context.capabilities.require(SESSION_PORT)
            agent = rt.handle("coding_agent")
            assert isinstance(agent, CodingAgentRuntime)
            assert agent.impl.subagents is not None
            subagents = agent.impl.subagents

            async def person(i: int) -> tuple[list[float], int]:
                """The person's run: the gaps between its deltas (seconds), and its count."""
                key = f"agent:person{i + 1}:main"  # a session of its own each round
                stream = port.watch(key)
                receipt = await port.submit(RunRequest(
                    origin="bench", session_key=key, prompt="stream", cwd=str(work),
                    tool_policy=ToolPolicy(), preapproved=frozenset({ALL_TOOLS})))  # fmt: skip
                arrivals: list[float] = []
                while True:
                    event = await stream.get()
                    if isinstance(event, TextDelta) and event.run_id == receipt.run_id:
                        arrivals.append(time.perf_counter())
                    elif isinstance(event, StreamOverflow):
                        raise SystemExit(f"the person's stream overflowed in round {i}")
                    elif isinstance(event, RunEnded) and event.run_id == receipt.run_id:
                        break
                stream.close()
                return [b - a for a, b in itertools.pairwise(arrivals)], len(arrivals)

            async def consume(stream: SessionStream, seen: Counter[str]) -> None:
                """A healthy consumer: reads each event as it comes (cancelled at the end),
                counts them and its overflow."""
                try:
                    while True:
                        event = await stream.get()
                        seen["events"] += 1
                        if isinstance(event, StreamOverflow):
                            seen["overflows"] += 1
                            return
                finally:
                    stream.close()

            idle_p99: list[float] = []
            loaded_p99: list[float] = []
            overflows = Counter[str]()
            await person(-1)  # warm up
            for r in range(rounds):
                gaps, n = await person(2 * r)
                assert n == DELTAS, n
                idle_p99.append(_p99(gaps))
                parent = ParentRun(run_id=f"run_parent{r}", session_key=f"agent:parent{r}:main",
                                   root_run_id=f"run_parent{r}", depth=0, policy=ToolPolicy(),
                                   cwd=str(work), preapproved=frozenset({ALL_TOOLS}))  # fmt: skip
                parent_seen = Counter[str]()
                all_seen = Counter[str]()
                watchers = [
                    asyncio.ensure_future(consume(port.watch(parent.session_key), parent_seen)),
                    asyncio.ensure_future(consume(port.watch_all(), all_seen)),
                ]
                nodes = [
                    await subagents.start(parent, TaskRequest(prompt="stream", mode="async"))
                    for _ in range(CHILDREN)
                ]
                gaps, n = await person(2 * r + 1)
                assert n == DELTAS, n
                loaded_p99.append(_p99(gaps))
                ended = await subagents.wait(parent, [x.task_id for x in nodes], timeout_s=120)
                assert all(x.status == "completed" for x in ended), [x.status for x in ended]
                for watcher in watchers:
                    watcher.cancel()
                await asyncio.gather(*watchers, return_exceptions=True)
                overflows["parent session"] += parent_seen["overflows"]
                overflows["watch_all"] += all_seen["overflows"]
                overflows["watch_all events"] += all_seen["events"]
        idle = statistics.median(idle_p99) * 1000
        busy = statistics.median(loaded_p99) * 1000
        print(f"person's p99 delta gap, idle (baseline): median {idle:.2f} ms over {rounds}")
        print(f"same with {CHILDREN} children streaming {DELTAS} deltas each: median {busy:.2f} ms "
              f"({busy / idle:.2f}x)")  # fmt: skip
        print(f"  idle p99s: {[round(v * 1000, 2) for v in idle_p99]}")
        print(f"  loaded p99s: {[round(v * 1000, 2) for v in loaded_p99]}")
        print(f"target <= 2x idle: {'met' if busy <= 2 * idle else 'missed'}")
        lost = overflows["parent session"] + overflows["watch_all"]
        print(f"overflows: parent session {overflows['parent session']}, watch_all "
              f"{overflows['watch_all']} (of {overflows['watch_all events']} events read); "
              f"target 0: {'met' if not lost else 'missed'}")  # fmt: skip


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--streaming", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    asyncio.run(streaming(args.rounds) if args.streaming else main(args.runs))
