"""Platform latency of a coding run: provider's first byte -> first ``delta`` on the bus.

The scripted provider server (lemon_platform_test) runs on 127.0.0.1 in a child process with
every answer scripted up front. In the same run the bench measures the whole platform path
(lemon_gateway -> coding_agent's executor -> lemon_agent loop -> lemon_ai provider, and back
through the executor's sink to the bus) next to a baseline of raw httpx streaming the same
responses:

* first-delta latency: from the moment the first response byte reaches the client (timestamped
  by a transport wrapper shared by both sides) to the moment a bus subscriber of ``run:<id>``
  receives the first ``delta`` event, versus to the first text delta a raw httpx + json client
  extracts; for a burst (all frames back to back) and a paced stream (1 ms between frames);
* per-turn overhead: wall time from submission to completion of a run with T turns (T-1
  tool-call turns calling ``todo`` read, then a final answer), minus raw httpx replaying the
  same T request bodies and reading the same streams, divided by T. It includes the executor's
  durable transcript append (write + fsync) at the end of every turn; the bench also reports the
  same runs with ``fsync`` made a no-op to show that cost on its own.

Usage: .venv/bin/python bench/agent_bench.py [--samples 200] [--runs 30] [--turns 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _loopback import WARMUP, RecordingTransport, ms, pct, scripted_server

from coding_agent import CodingExecutor, ExecutorSettings
from lemon_ai import Model, OpenAICompletionsProvider, default_catalogue
from lemon_core.bus import Bus, Delivery, run_topic
from lemon_core.events import Event
from lemon_core.execution import ExecutionCommand, ToolPolicy
from lemon_gateway import Gateway


class Platform:
    """A real gateway with the coding executor, reached through the recording client."""

    def __init__(self, client: httpx.AsyncClient, model: Model, home: Path, cwd: Path) -> None:
        self.bus = Bus()
        self.executor = CodingExecutor(
            home=home,
            model=model,
            provider=OpenAICompletionsProvider(client=client),
            settings=ExecutorSettings(default_policy=ToolPolicy()),
        )
        self.cwd = cwd
        self.gateway = Gateway(bus=self.bus, executor=self.executor)
        self._n = 0

    def command(self, prompt: str) -> ExecutionCommand:
        self._n += 1
        key = f"agent:bench:s{self._n}"
        return ExecutionCommand(
            run_id=f"run_{self._n}",
            session_key=key,
            prompt=prompt,
            conversation_key=("session", key),
            cwd=str(self.cwd),
        )


async def first_delta(
    platform: Platform,
    client: httpx.AsyncClient,
    transport: RecordingTransport,
    model: Model,
    samples: int,
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"platform": [], "raw": [], "platform_ttft": [], "raw_ttft": []}
    url = model.base_url + "/chat/completions"
    body = {"model": model.id, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    for i in range(samples + WARMUP):
        command = platform.command("hi")
        sub = platform.bus.subscribe(
            run_topic(command.run_id), delivery=Delivery(max_entries=1024, bind_current_task=False)
        )
        begin = time.perf_counter()
        handle = platform.gateway.submit_execution(command)
        seen = None
        while seen is None:
            item = await sub.get()
            assert isinstance(item, Event)
            if item.type == "delta":
                seen = time.perf_counter()
        completion = await handle
        assert completion.ok, completion.error
        sub.cancel()
        if i >= WARMUP:
            out["platform"].append(seen - transport.marks[-1])
            out["platform_ttft"].append(seen - begin)
        begin = time.perf_counter()
        got = None
        async with client.stream("POST", url, json=body) as response:
            buffer = b""
            async for chunk in response.aiter_bytes():
                buffer += chunk
                while got is None and b"\n\n" in buffer:
                    frame, buffer = buffer.split(b"\n\n", 1)
                    data = frame.removeprefix(b"data: ")
                    if data != b"[DONE]" and json.loads(data)["choices"][0]["delta"].get("content"):
                        got = time.perf_counter()
        assert got is not None
        if i >= WARMUP:
            out["raw"].append(got - transport.marks[-1])
            out["raw_ttft"].append(got - begin)
    return out


async def per_turn(
    platform: Platform,
    client: httpx.AsyncClient,
    transport: RecordingTransport,
    model: Model,
    runs: int,
    turns: int,
) -> tuple[list[float], list[float]]:
    url = model.base_url + "/chat/completions"
    platform_times: list[float] = []
    raw_times: list[float] = []
    for i in range(runs + 3):
        transport.bodies.clear()
        begin = time.perf_counter()
        completion = await platform.gateway.submit_execution(platform.command("go"))
        elapsed = time.perf_counter() - begin
        assert completion.ok, completion.error
        assert completion.usage is not None
        assert completion.usage.turns == turns
        bodies = list(transport.bodies)
        begin = time.perf_counter()
        for payload in bodies:
            headers = {"content-type": "application/json"}
            async with client.stream("POST", url, content=payload, headers=headers) as response:
                async for chunk in response.aiter_bytes():
                    for frame in chunk.split(b"\n\n"):
                        if frame.startswith(b"data: {"):
                            json.loads(frame[6:])
        raw = time.perf_counter() - begin
        if i >= 3:
            platform_times.append(elapsed / turns)
            raw_times.append(raw / turns)
    return platform_times, raw_times


def _plan(samples: int, runs: int, turns: int) -> list[tuple[str, Any]]:
    plan: list[tuple[str, Any]] = []
    for delay in (0.0, 0.001):
        plan += [("text", delay)] * (2 * (samples + WARMUP))
    one_run = [("tool", {"name": "todo", "arguments": {"action": "read"}})] * (turns - 1) + [
        ("text", 0.0)
    ]
    plan += one_run * (2 * (runs + 3)) * 2  # with fsync, then without
    return plan


async def measure(base_url: str, args: argparse.Namespace) -> None:
    model = default_catalogue().resolve("openai:gpt-4o-mini", base_url=base_url)
    transport = RecordingTransport()
    with tempfile.TemporaryDirectory() as tmp:
        home, cwd = Path(tmp) / "home", Path(tmp) / "work"
        cwd.mkdir()
        async with httpx.AsyncClient(transport=transport, timeout=30) as client:
            platform = Platform(client, model, home, cwd)
            async with platform.gateway:
                burst = await first_delta(platform, client, transport, model, args.samples)
                paced = await first_delta(platform, client, transport, model, args.samples)
                turn, raw_turn = await per_turn(
                    platform, client, transport, model, args.runs, args.turns
                )
                real_fsync = os.fsync
                os.fsync = lambda fd: None
                try:
                    turn_nosync, raw_nosync = await per_turn(
                        platform, client, transport, model, args.runs, args.turns
                    )
                finally:
                    os.fsync = real_fsync

    print(f"python {sys.version.split()[0]}; scripted provider on 127.0.0.1 (child process)")
    for name, data in (("burst", burst), ("paced 1 ms/frame", paced)):
        added = [a - r for a, r in zip(data["platform"], data["raw"], strict=True)]
        raw, plat = data["raw"], data["platform"]
        print(f"first byte -> first delta on the bus, {name} ({args.samples} samples)")
        print(f"  raw httpx baseline        p50 {ms(statistics.median(raw))}"
              f"   p90 {ms(pct(raw, 0.9))}")  # fmt: skip
        print(f"  gateway + executor + bus  p50 {ms(statistics.median(plat))}"
              f"   p90 {ms(pct(plat, 0.9))}")  # fmt: skip
        print(f"  added by the platform     p50 {ms(statistics.median(added))}"
              f"   p90 {ms(pct(added, 0.9))}   (goal < 2 ms)")  # fmt: skip
        ttft_raw = statistics.median(data["raw_ttft"])
        ttft_platform = statistics.median(data["platform_ttft"])
        print(f"  submit/request -> first delta: raw p50 {ms(ttft_raw)},"
              f" platform p50 {ms(ttft_platform)}")  # fmt: skip
    for label, plat_t, raw_t in (
        ("durable transcript (fsync per turn)", turn, raw_turn),
        ("fsync disabled", turn_nosync, raw_nosync),
    ):
        p50, r50 = statistics.median(plat_t), statistics.median(raw_t)
        print(f"per turn, {label} ({args.runs} runs x {args.turns} turns, todo call per turn)")
        print(f"  raw httpx baseline        p50 {ms(r50)}")
        print(f"  gateway + executor        p50 {ms(p50)}")
        print(f"  overhead per turn         p50 {ms(p50 - r50)}   ratio {p50 / r50:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description="platform latency next to raw httpx")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--turns", type=int, default=8)
    args = parser.parse_args()
    with scripted_server(_plan(args.samples, args.runs, args.turns)) as base_url:
        asyncio.run(measure(base_url, args))


if __name__ == "__main__":
    main()
