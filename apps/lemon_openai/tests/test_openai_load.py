"""Many requests at once: every one answered, within the gateway's limits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx

from lemon_core.execution import ENGINE_RUNTIME
from lemon_core.sessions import SESSION_PORT
from lemon_openai import OpenAIApp
from lemon_runtime import Runtime


async def test_fifty_concurrent_requests_complete_within_the_gateways_limits(
    boot: Callable[..., Runtime],
) -> None:
    async with boot() as runtime:
        plane: Any = runtime.handle("lemon_control_plane")
        gateway: Any = runtime.context.capabilities.require(ENGINE_RUNTIME)
        port = runtime.context.capabilities.require(SESSION_PORT)
        app = runtime.handle("lemon_openai")
        assert isinstance(app, OpenAIApp)
        assert app.api is not None
        slots = gateway.statistics().slots.max
        peak = 0
        events = port.watch_all()

        async def sample() -> None:  # on every session event: the slots in use
            nonlocal peak
            while True:
                await events.get()
                peak = max(peak, gateway.statistics().slots.in_flight)

        async def one(http: httpx.AsyncClient, i: int) -> tuple[int, str]:
            response = await http.post(
                "/v1/chat/completions",
                json={"model": "lemon", "messages": [{"role": "user", "content": f"/echo n{i}"}]},
            )
            body = response.json()
            if response.status_code != 200:
                return response.status_code, str(body)
            return 200, body["choices"][0]["message"]["content"]

        sampler = asyncio.ensure_future(sample())
        limits = httpx.Limits(max_connections=100)
        async with httpx.AsyncClient(
            base_url=plane.url,
            headers={"authorization": f"Bearer {plane.local_token}"},
            timeout=120,
            limits=limits,
        ) as http:
            results = await asyncio.gather(*(one(http, i) for i in range(50)))
        events.close()
        sampler.cancel()
        await asyncio.wait({sampler})
        assert results == [(200, f"n{i}") for i in range(50)]
        assert 1 <= peak <= slots
        stats = app.api.statistics()
        assert stats["refused"] == 0
        assert stats["active"] == 0
        assert gateway.statistics().runs.failed == 0
