"""Shared by the loopback benchmarks (agent_bench.py, agent_loop_bench.py): an httpx transport
that records request bodies and when each response's first body byte arrives, and percentile
helpers. Run the benchmarks as scripts (``python bench/<name>.py``) so this module is importable.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import httpx

__all__ = ["RecordingTransport", "ms", "pct"]


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
