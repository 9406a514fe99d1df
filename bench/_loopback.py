"""Shared by the loopback benchmarks (agent_bench.py, agent_loop_bench.py): the scripted provider
server run in a child process, an httpx transport that records request bodies and when each
response's first body byte arrives, and percentile helpers. Run the benchmarks as scripts
(``python bench/<name>.py``) so this module is importable.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

__all__ = ["ANSWER", "WARMUP", "RecordingTransport", "ms", "pct", "scripted_server"]

ANSWER = "The quick brown fox jumps over the lazy dog. " * 4
WARMUP = 10

# The server runs in its own process so its work never shares the measured event loop.
# Plan entries: ["text", delay_between_chunks] or ["tool", {"name": ..., "arguments": {...}}].
_CHILD = """
import json, sys
from lemon_platform_test.providers import ScriptedProviderServer, ScriptedToolCall, ScriptedTurn
answer, plan = json.loads(sys.argv[1])
with ScriptedProviderServer(max_recorded=1) as server:
    for kind, value in plan:
        if kind == "text":
            server.script(ScriptedTurn(text=answer, chunk_size=16, delay=value))
        else:
            call = ScriptedToolCall(name=value["name"], arguments=value["arguments"])
            server.script(ScriptedTurn(text="Working.", tool_calls=(call,)))
    print(server.openai_base_url, flush=True)
    sys.stdin.read()
"""


@contextmanager
def scripted_server(plan: list[tuple[str, Any]]) -> Iterator[str]:
    """Start the scripted provider server with ``plan`` in a child process; yield its base URL."""
    command = [sys.executable, "-c", _CHILD, json.dumps([ANSWER, plan])]
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None
        base_url = child.stdout.readline().strip()
        try:
            yield base_url
        finally:
            assert child.stdin is not None
            child.stdin.close()
            child.wait(timeout=30)


class _FirstByteStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, marks: list[float]) -> None:
        self._inner = inner
        self._marks = marks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        first = True
        async for chunk in self._inner:
            if first:
                self._marks.append(time.perf_counter())
                first = False
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class RecordingTransport(httpx.AsyncBaseTransport):
    """Records each request body and when each response's first body byte arrives."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.marks: list[float] = []
        self.bodies: list[bytes] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(request.content)
        response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_FirstByteStream(response.stream, self.marks),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(value: float) -> str:
    return f"{value * 1000:7.3f} ms"
