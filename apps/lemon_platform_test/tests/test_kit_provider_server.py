"""The scripted provider server itself: routes, records, gates, bounds."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from lemon_platform_test.providers import Gate, ScriptedProviderServer, ScriptedTurn


async def test_records_requests_and_refuses_unknown_routes(
    scripted_provider: ScriptedProviderServer,
) -> None:
    async with httpx.AsyncClient() as client:
        missing = await client.post(scripted_provider.url + "/v1/nothing", json={"a": 1})
    assert missing.status_code == 404
    (request,) = scripted_provider.requests
    assert (request.method, request.path, request.body) == ("POST", "/v1/nothing", {"a": 1})


async def test_a_gate_holds_the_stream_until_opened(
    scripted_provider: ScriptedProviderServer,
) -> None:
    gate = Gate()
    scripted_provider.script(ScriptedTurn(text="held", pause=gate, pause_after=1))
    async with (
        httpx.AsyncClient() as client,
        client.stream("POST", scripted_provider.openai_base_url + "/chat/completions",
                      json={"model": "m"}) as response,
    ):  # fmt: skip
        chunks = response.aiter_bytes()
        first = await chunks.__anext__()
        assert b"assistant" in first
        assert await gate.wait_reached_async()
        rest = asyncio.ensure_future(chunks.__anext__())
        await asyncio.sleep(0.05)
        assert not rest.done(), "nothing is sent while the gate is closed"
        gate.open()
        assert b"held" in await rest


def test_record_buffer_is_bounded() -> None:
    with ScriptedProviderServer(max_recorded=2) as server:
        for _ in range(3):
            httpx.post(server.url + "/x", json={})
        assert len(server.requests) == 2
        stats = server.statistics()
        assert (stats["served"], stats["recorded"], stats["record_capacity"]) == (3, 2, 2)


def test_url_needs_a_started_server() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        _ = ScriptedProviderServer().url
