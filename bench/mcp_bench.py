"""MCP figures, each next to its baseline measured in the same run.

1. Tool-call overhead: an ``echo`` call through the agent's MCP tool (the coding agent's tool
   wrapper -> the hub -> the stdio client -> the server process -> the result rendered), next
   to a raw JSON-RPC round trip (one line written, one line read) to another process of the
   same server. Target (issue 28): p50 <= 1.5x the raw p50 + 1 ms.
2. Start-up: ``discover`` with 10 configured servers that are all disabled (nothing to start)
   next to an empty ``[mcp]``; and, for the record, a cold ``discover`` that starts 10 servers.
3. Building the tool list for 500 tools across 10 servers (names, filters, specs): target 5 ms.

Run: ``python bench/mcp_bench.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from coding_agent.tools.mcp import mcp_tools
from lemon_agent import AbortSignal, ToolContext
from lemon_core.config import Config, load_config
from lemon_mcp import McpHubImpl, tool_names

SERVER = Path(__file__).parents[1] / "apps/lemon_mcp/tests/servers/scripted_mcp_server.py"
CALLS = 400
WARMUP = 30


def _config(home: Path, text: str) -> Config:
    (home / "config.toml").write_text(text, encoding="utf-8")
    return load_config(environ={}, cwd=home, home=home).config


def _server(name: str, enabled: bool = True) -> str:
    return (
        f'[mcp.servers.{name}]\ncommand = "{sys.executable}"\nargs = ["{SERVER}", "ok"]\n'
        f'approval = "allow"\nenabled = {"true" if enabled else "false"}\n'
    )


def _p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def _raw_round_trips() -> list[float]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SERVER),
        "ok",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    }
    proc.stdin.write(json.dumps(init).encode() + b"\n")
    await proc.stdin.drain()
    await proc.stdout.readline()
    samples = []
    for i in range(WARMUP + CALLS):
        message = {
            "jsonrpc": "2.0",
            "id": i + 1,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hello"}},
        }
        began = time.perf_counter()
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        await proc.stdin.drain()
        json.loads(await proc.stdout.readline())
        if i >= WARMUP:
            samples.append(time.perf_counter() - began)
    proc.stdin.close()
    await proc.wait()
    return samples


async def _agent_calls(home: Path) -> list[float]:
    config = _config(home, _server("b"))
    hub = McpHubImpl(home=home, environ={"PATH": os.environ["PATH"]})
    try:
        tools, _approvals, _note, _origins = await mcp_tools(hub, config, home)
        echo = next(t for t in tools if t.name == "mcp_b_echo")

        async def update(_: str) -> None:
            return None

        samples = []
        for i in range(WARMUP + CALLS):
            ctx = ToolContext(
                tool_call_id=f"c{i}",
                name=echo.name,
                arguments={"text": "hello"},
                signal=AbortSignal(),
                update=update,
            )
            began = time.perf_counter()
            result = await echo.execute(ctx)
            if i >= WARMUP:
                samples.append(time.perf_counter() - began)
            assert not isinstance(result, str)
            assert result.content == "hello"
        return samples
    finally:
        await hub.aclose()


async def _discover_ms(home: Path, text: str, rounds: int = 20) -> float:
    config = _config(home, text)
    samples = []
    for _ in range(rounds):
        hub = McpHubImpl(home=home, environ={"PATH": os.environ["PATH"]})
        began = time.perf_counter()
        await hub.discover(config, cwd=home)
        samples.append(time.perf_counter() - began)
        await hub.aclose()
    return _p50(samples)


def _tool_list_ms() -> float:
    pairs = [(f"server{s}", f"tool_{t}") for s in range(10) for t in range(50)]
    samples = []
    for _ in range(50):
        began = time.perf_counter()
        names = tool_names(pairs)
        assert len(set(names.values())) == 500
        samples.append(time.perf_counter() - began)
    return _p50(samples)


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        raw = await _raw_round_trips()
        agent = await _agent_calls(home)
        raw50, agent50 = _p50(raw), _p50(agent)
        target = 1.5 * raw50 + 1.0
        print(
            f"tool call p50: raw JSON-RPC {raw50:.3f} ms, through the agent's MCP tool "
            f"{agent50:.3f} ms ({agent50 / raw50:.2f}x); target <= {target:.3f} ms: "
            f"{'met' if agent50 <= target else 'MISSED'}"
        )
        empty = await _discover_ms(home, "")
        disabled = await _discover_ms(home, "".join(_server(f"s{i}", False) for i in range(10)))
        print(
            f"discover, 10 servers configured and disabled: {disabled:.3f} ms "
            f"(empty [mcp]: {empty:.3f} ms; adds {disabled - empty:.3f} ms, target <= 20 ms)"
        )
        cold = await _discover_ms(home, "".join(_server(f"s{i}") for i in range(10)), rounds=3)
        print(f"discover, 10 servers started cold (concurrently): {cold:.1f} ms")
        print(
            f"tool list for 500 tools across 10 servers: {_tool_list_ms():.3f} ms (target <= 5 ms)"
        )


if __name__ == "__main__":
    asyncio.run(main())
