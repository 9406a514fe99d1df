"""The ``openai`` Python SDK, unmodified, against ``/v1`` on a real daemon over loopback."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import openai
import pytest


def _client(plane: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=plane.url + "/v1", api_key=plane.local_token, max_retries=0)


def _async_client(plane: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=plane.url + "/v1", api_key=plane.local_token, max_retries=0)


async def test_the_sync_client_gets_a_chat_completion(plane: Any) -> None:
    def call() -> openai.types.chat.ChatCompletion:
        with _client(plane) as client:
            return client.chat.completions.create(
                model="lemon",
                messages=[{"role": "user", "content": "/echo hello from the sdk"}],
            )

    completion = await asyncio.to_thread(call)
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.content == "hello from the sdk"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None


async def test_the_async_client_streams_deltas_and_usage(plane: Any) -> None:
    async with _async_client(plane) as client:
        stream = await client.chat.completions.create(
            model="lemon",
            messages=[{"role": "user", "content": "/echo one two three"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        deltas: list[str] = []
        finishes: list[str] = []
        usage = None
        async for chunk in stream:
            for choice in chunk.choices:
                if choice.delta.content:
                    deltas.append(choice.delta.content)
                if choice.finish_reason:
                    finishes.append(choice.finish_reason)
            if chunk.usage is not None:
                usage = chunk.usage
    assert "".join(deltas) == "one two three"
    assert len(deltas) > 1  # streamed, not one block
    assert finishes == ["stop"]
    assert usage is not None


async def test_a_named_session_keeps_the_conversation(plane: Any) -> None:
    async with _async_client(plane) as client:
        first = await client.chat.completions.create(
            model="lemon", user="alice", messages=[{"role": "user", "content": "/echo first"}]
        )
        second = await client.chat.completions.create(
            model="lemon",
            user="alice",
            messages=[
                {"role": "user", "content": "/echo first"},
                {"role": "assistant", "content": first.choices[0].message.content},
                {"role": "user", "content": "/echo second"},
            ],
        )
    assert second.choices[0].message.content == "second"
    page = await plane.port.transcript("openai:alice", limit=20)
    users = [e.text for e in page.entries if e.role == "user"]
    assert users == ["/echo first", "/echo second"]  # the resent history is not repeated


async def test_models_lists_lemon(plane: Any) -> None:
    async with _async_client(plane) as client:
        models = await client.models.list()
    ids = [m.id for m in models.data]
    assert ids[0] == "lemon"


async def test_responses_stream_and_previous_response_id(plane: Any) -> None:
    async with _async_client(plane) as client:
        first = await client.responses.create(model="lemon", input="/echo alpha beta")
        assert first.output_text == "alpha beta"
        events = []
        stream = await client.responses.create(
            model="lemon",
            input="/echo gamma",
            previous_response_id=first.id,
            stream=True,
        )
        async for event in stream:
            events.append(event)
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created"
    assert kinds[-1] == "response.completed"
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "gamma"
    session = first.id.removeprefix("resp_")[:32]
    page = await plane.port.transcript(f"openai:resp-{session}", limit=20)
    assert [e.text for e in page.entries if e.role == "user"] == ["/echo alpha beta", "/echo gamma"]


async def test_errors_come_in_openais_shape(plane: Any) -> None:
    async with _async_client(plane) as client:
        with pytest.raises(openai.NotFoundError) as missing:
            await client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
        assert missing.value.code == "model_not_found"
        with pytest.raises(openai.BadRequestError) as bad:
            await client.chat.completions.create(
                model="lemon", messages=[{"role": "robot", "content": "hi"}]
            )
        assert bad.value.param == "messages[0].role"
    wrong = openai.AsyncOpenAI(base_url=plane.url + "/v1", api_key="lcp_wrong", max_retries=0)
    async with wrong:
        with pytest.raises(openai.AuthenticationError):
            await wrong.models.list()


async def test_no_token_is_a_401_and_a_foreign_origin_a_403(plane: Any) -> None:
    async with httpx.AsyncClient(base_url=plane.url) as http:
        anonymous = await http.get("/v1/models")
        assert anonymous.status_code == 401
        assert anonymous.json()["error"]["type"] == "authentication_error"
        headers = {"authorization": f"Bearer {plane.local_token}"}
        foreign = await http.get(
            "/v1/models", headers={**headers, "origin": "https://evil.example"}
        )
        assert foreign.status_code == 403
        assert foreign.json()["error"]["code"] == "origin_not_allowed"
        preflight = await http.options(
            "/v1/chat/completions", headers={"origin": "https://evil.example"}
        )
        assert preflight.status_code == 403
        assert "access-control-allow-origin" not in preflight.headers


async def test_a_body_over_the_bound_is_a_413(plane: Any) -> None:
    async with httpx.AsyncClient(base_url=plane.url) as http:
        response = await http.post(
            "/v1/chat/completions",
            headers={"authorization": f"Bearer {plane.local_token}"},
            content=b"x" * (5 * 1024 * 1024),
        )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"


async def test_an_approval_is_denied_without_an_interactive_client(plane: Any) -> None:
    async with _async_client(plane) as client:
        completion = await client.chat.completions.create(
            model="lemon",
            user="approvals",
            messages=[{"role": "user", "content": '/tool bash {"command": "echo hi"}'}],
        )
    assert completion.choices[0].message.content is not None
    page = await plane.port.transcript("openai:approvals", limit=20)
    outcomes = [e.outcome for e in page.entries if e.role == "tool"]
    assert outcomes == ["denied"]


async def test_a_client_disconnect_cancels_the_run(boot: Any) -> None:
    """Deterministic: the client goes away only once the session's events say the bash call
    runs (no timing), and the run must then end cancelled, counted as a disconnect."""
    from lemon_core.sessions import SESSION_PORT, RunEnded, ToolCard
    from lemon_openai import OpenAIApp

    config = '[openai_api]\nenabled = true\npreapprove = ["bash"]\n'
    async with boot(config) as runtime:
        plane = runtime.handle("lemon_control_plane")
        port = runtime.context.capabilities.require(SESSION_PORT)
        app = runtime.handle("lemon_openai")
        assert isinstance(app, OpenAIApp)
        assert app.api is not None
        watch = port.watch("openai:slow")
        body = {
            "model": "lemon",
            "user": "slow",
            "stream": True,
            "messages": [{"role": "user", "content": '/tool bash {"command": "sleep 60"}'}],
        }
        headers = {"authorization": f"Bearer {plane.local_token}"}
        async with (
            httpx.AsyncClient(base_url=plane.url, timeout=30) as http,
            http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as response,
        ):
            assert response.status_code == 200
            async with asyncio.timeout(30):
                async for event in watch:
                    if isinstance(event, ToolCard) and event.phase == "started":
                        break
                    assert not isinstance(event, RunEnded), event
        # the connection is closed while bash sleeps: the run ends cancelled
        async with asyncio.timeout(30):
            async for event in watch:
                if isinstance(event, RunEnded):
                    break
        watch.close()
        assert not event.ok
        assert str(event.error_code) == "cancelled"
        assert app.api.statistics()["cancelled_by_disconnect"] == 1
