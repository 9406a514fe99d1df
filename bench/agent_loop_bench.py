"""Agent loop latency: first provider byte -> first message_update, and per-turn overhead.

The scripted provider server (lemon_platform_test) runs on 127.0.0.1 in a child process, with
every answer scripted up front, so the server does not compete with the measured client for the
GIL. In the same run the bench measures the agent loop (lemon_agent over lemon_ai's
OpenAI-compatible provider) next to a baseline of raw httpx streaming the same responses:

* first-delta latency: from the moment the first response byte reaches the client (timestamped by
  a transport wrapper shared by both sides) to the first ``message_update`` event the agent's
  consumer receives, versus to the first text delta a raw httpx + json client extracts; for a
  burst (all frames back to back) and a paced stream (1 ms between frames, like a model's token
  cadence);
* per-turn overhead: wall time of a run with T turns (T-1 tool-call turns with a no-op tool and a
  final answer) minus raw httpx replaying the same T request bodies and reading the same streams,
  divided by T.

Usage: .venv/bin/python bench/agent_loop_bench.py [--samples 300] [--runs 40] [--turns 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from typing import Any

import httpx
from _loopback import WARMUP, RecordingTransport, ms, pct, scripted_server

from lemon_agent import Agent, AgentConfig, MessageUpdateEvent, Tool, ToolContext, ToolRegistry
from lemon_ai import Model, OpenAICompletionsProvider, default_catalogue


async def _noop(ctx: ToolContext) -> str:
    return "ok"


async def first_delta(
    client: httpx.AsyncClient, transport: RecordingTransport, model: Model, samples: int
) -> dict[str, list[float]]:
    provider = OpenAICompletionsProvider(client=client)
    out: dict[str, list[float]] = {"agent": [], "raw": [], "agent_ttft": [], "raw_ttft": []}
    url = model.base_url + "/chat/completions"
    body = {"model": model.id, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    for i in range(samples + WARMUP):
        agent = Agent(AgentConfig(model=model, provider=provider))
        begin = time.perf_counter()
        seen = None
        async with agent.start("hi") as run:
            async for event in run:
                if seen is None and isinstance(event, MessageUpdateEvent):
                    seen = time.perf_counter()
        assert seen is not None
        if i >= WARMUP:
            out["agent"].append(seen - transport.marks[-1])
            out["agent_ttft"].append(seen - begin)
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
    client: httpx.AsyncClient, transport: RecordingTransport, model: Model, runs: int, turns: int
) -> tuple[list[float], list[float]]:
    provider = OpenAICompletionsProvider(client=client)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    tools = ToolRegistry([Tool(name="noop", description="no-op", execute=_noop, parameters=schema)])
    url = model.base_url + "/chat/completions"
    agent_times: list[float] = []
    raw_times: list[float] = []
    for i in range(runs + 3):
        agent = Agent(AgentConfig(model=model, provider=provider, tools=tools))
        transport.bodies.clear()
        begin = time.perf_counter()
        result = await agent.prompt("go")
        elapsed = time.perf_counter() - begin
        assert result.turns == turns, result
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
            agent_times.append(elapsed / turns)
            raw_times.append(raw / turns)
    return agent_times, raw_times


def _plan(samples: int, runs: int, turns: int) -> list[tuple[str, Any]]:
    plan: list[tuple[str, Any]] = []
    for delay in (0.0, 0.001):
        plan += [("text", delay)] * (2 * (samples + WARMUP))
    one_run: list[tuple[str, Any]] = [
        ("tool", {"name": "noop", "arguments": {"n": t}}) for t in range(turns - 1)
    ] + [("text", 0.0)]
    plan += one_run * (2 * (runs + 3))
    return plan


async def measure(base_url: str, args: argparse.Namespace) -> None:
    model = default_catalogue().resolve("openai:gpt-4o-mini", base_url=base_url)
    transport = RecordingTransport()
    async with httpx.AsyncClient(transport=transport, timeout=30) as client:
        burst = await first_delta(client, transport, model, args.samples)
        paced = await first_delta(client, transport, model, args.samples)
        agent_turn, raw_turn = await per_turn(client, transport, model, args.runs, args.turns)

    print(f"python {sys.version.split()[0]}; scripted provider on 127.0.0.1 (child process)")
    for name, data in (("burst", burst), ("paced 1 ms/frame", paced)):
        added = [a - r for a, r in zip(data["agent"], data["raw"], strict=True)]
        raw, agent = data["raw"], data["agent"]
        print(f"first byte -> first delta, {name} ({args.samples} samples)")
        print(f"  raw httpx baseline   p50 {ms(statistics.median(raw))}   p90 {ms(pct(raw, 0.9))}")
        print(
            f"  agent loop           p50 {ms(statistics.median(agent))}   p90 {ms(pct(agent, 0.9))}"
        )
        print(f"  added by the loop    p50 {ms(statistics.median(added))}   (goal < 2 ms)")
        ttft_raw, ttft_agent = (
            statistics.median(data["raw_ttft"]),
            statistics.median(data["agent_ttft"]),
        )
        print(f"  request -> first delta: raw p50 {ms(ttft_raw)}, agent p50 {ms(ttft_agent)}")
    agent_p50, raw_p50 = statistics.median(agent_turn), statistics.median(raw_turn)
    print(f"per turn ({args.runs} runs x {args.turns} turns, one tool call + result per turn)")
    print(f"  raw httpx baseline   p50 {ms(raw_p50)}")
    print(f"  agent loop           p50 {ms(agent_p50)}")
    print(
        f"  overhead per turn    p50 {ms(agent_p50 - raw_p50)}   ratio {agent_p50 / raw_p50:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="agent loop latency next to raw httpx")
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--turns", type=int, default=8)
    args = parser.parse_args()
    with scripted_server(_plan(args.samples, args.runs, args.turns)) as base_url:
        asyncio.run(measure(base_url, args))


if __name__ == "__main__":
    main()
