"""``lemon mcp serve --http``'s server side of the GET stream and of resumption, over real HTTP
(uvicorn on 127.0.0.1): the session's GET stream carries server-initiated messages
(``notifications/tools/list_changed``; the ask of a call answered with JSON), a new GET takes
it over, DELETE ends it; every event has an id, and a GET with ``Last-Event-ID`` replays what
followed it on its own stream (a cut ``tools/call`` stream's response included), then goes
on live. Our own client follows the GET stream and refreshes its tools."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import httpx
import uvicorn

from lemon_mcp import ClientPeer, HttpTransport, McpClient, ServedResult, ServedTool
from lemon_mcp._server_http import McpHttpApp
from lemon_mcp._sse import SseEvent, sse_events

JSON_AND_SSE = "application/json, text/event-stream"
WAIT_S = 10


class _Host:
    """``echo``; ``ask`` asks the person (elicitation) and answers what they said."""

    def tools(self) -> Sequence[ServedTool]:
        return (
            ServedTool(name="echo", description="Echo.", input_schema={"type": "object"}),
            ServedTool(name="ask", description="Asks first.", input_schema={"type": "object"}),
        )

    async def call(
        self, name: str, arguments: Mapping[str, Any], peer: ClientPeer, call_id: str
    ) -> ServedResult:
        if name == "ask":
            answer = await peer.elicit("May I?", {"type": "object"}, timeout_s=WAIT_S)
            return ServedResult(text=f"answer: {dict(answer) if answer is not None else None}")
        return ServedResult(text=str(arguments.get("text", "")))


@contextlib.asynccontextmanager
async def _serving() -> AsyncIterator[tuple[McpHttpApp, str]]:
    app = McpHttpApp(_Host())
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    config = uvicorn.Config(app.asgi, log_config=None, access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        await _poll(lambda: server.started)
        yield app, f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        await app.aclose()
        server.should_exit = True
        await asyncio.wait_for(task, WAIT_S)
        sock.close()


def _rpc(rid: int | None, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if rid is not None:
        message["id"] = rid
    if params is not None:
        message["params"] = params
    return message


async def _session(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    init = _rpc(1, "initialize", {
        "protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "t", "version": "0"}})  # fmt: skip
    r = await http.post(url, json=init, headers={"Accept": JSON_AND_SSE})
    assert r.status_code == 200, r.text
    assert r.json()["result"]["capabilities"]["tools"] == {"listChanged": True}
    headers = {
        "Accept": JSON_AND_SSE,
        "Mcp-Session-Id": r.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-06-18",
    }
    r = await http.post(url, json=_rpc(None, "notifications/initialized"), headers=headers)
    assert r.status_code == 202
    return headers


class _Reader:
    """One open SSE response, read event by event with a deadline."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._events = sse_events(response.aiter_bytes(), max_bytes=1 << 24)

    async def next(self) -> SseEvent | None:
        """The next event, or None once the server ended the stream."""
        try:
            return await asyncio.wait_for(anext(self._events), WAIT_S)
        except StopAsyncIteration:
            return None


@contextlib.asynccontextmanager
async def _get(
    http: httpx.AsyncClient, url: str, headers: dict[str, str], last: str | None = None
) -> AsyncIterator[_Reader]:
    asked = {**headers, "Accept": "text/event-stream"}
    if last is not None:
        asked["Last-Event-ID"] = last
    async with http.stream("GET", url, headers=asked, timeout=None) as r:
        assert r.status_code == 200, await r.aread()
        assert r.headers["content-type"].startswith("text/event-stream")
        yield _Reader(r)


async def _poll(condition: Callable[[], bool]) -> None:
    """Until ``condition()`` holds, within the deadline."""
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the condition never held"
        await asyncio.sleep(0.005)


async def _until_attached(app: McpHttpApp, sid: str) -> None:
    """The server attached the GET stream (its headers may reach us before it did)."""
    session = app._sessions[sid]
    await _poll(lambda: session.standalone.live is not None)


async def test_the_get_stream_carries_list_changed_and_resumes_after_last_event_id() -> None:
    async with _serving() as (app, url), httpx.AsyncClient() as http:
        headers = await _session(http, url)
        sid = headers["Mcp-Session-Id"]
        async with _get(http, url, headers) as stream:
            await _until_attached(app, sid)
            await app.tools_changed()
            await app.tools_changed()
            first, second = await stream.next(), await stream.next()
        assert first is not None
        assert second is not None
        assert json.loads(first.data) == _rpc(None, "notifications/tools/list_changed")
        assert first.id is not None
        assert second.id is not None
        assert int(second.id) > int(first.id)
        # sent while no GET stream was open: kept, and replayed after the last id seen
        await _poll(lambda: app._sessions[sid].standalone.live is None)
        await app.tools_changed()
        async with _get(http, url, headers, last=second.id) as resumed:
            replayed = await resumed.next()
            assert replayed is not None
            assert replayed.id is not None
            assert int(replayed.id) > int(second.id)
            assert json.loads(replayed.data)["method"] == "notifications/tools/list_changed"
            await app.tools_changed()  # then it goes on live
            live = await resumed.next()
            assert live is not None
            assert live.id is not None
            assert int(live.id) > int(replayed.id)


async def test_a_new_get_takes_the_stream_over_and_delete_ends_it() -> None:
    async with _serving() as (app, url), httpx.AsyncClient() as http:
        headers = await _session(http, url)
        sid = headers["Mcp-Session-Id"]
        async with _get(http, url, headers) as old:
            await _until_attached(app, sid)
            queue = app._sessions[sid].standalone.live
            async with _get(http, url, headers) as new:
                await _poll(lambda: app._sessions[sid].standalone.live is not queue)
                assert await old.next() is None  # the old one ended
                await app.tools_changed()
                event = await new.next()
                assert event is not None  # each message on one stream only
                r = await http.delete(url, headers=headers)
                assert r.status_code == 204
                assert await new.next() is None  # the session ended: so did its stream
        r = await http.get(url, headers={**headers, "Accept": "text/event-stream"})
        assert r.status_code == 404


async def test_a_cut_call_stream_is_resumed_on_a_get_with_its_response() -> None:
    async with _serving() as (_app, url), httpx.AsyncClient() as http:
        headers = await _session(http, url)
        call = _rpc(7, "tools/call", {"name": "ask", "arguments": {}})
        async with http.stream("POST", url, json=call, headers=headers, timeout=None) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            ask = await _Reader(r).next()
        # the POST's stream is cut (closed by us) right after the elicitation arrived
        assert ask is not None
        assert ask.id is not None
        question = json.loads(ask.data)
        assert question["method"] == "elicitation/create"
        answer = {"jsonrpc": "2.0", "id": question["id"],
                  "result": {"action": "accept", "content": {"ok": True}}}  # fmt: skip
        r = await http.post(url, json=answer, headers=headers)
        assert r.status_code == 202
        # the call went on; its response waits in the session for the resumption
        async with _get(http, url, headers, last=ask.id) as resumed:
            response = await resumed.next()
            assert response is not None
            assert await resumed.next() is None  # the call's stream ends with its response
        body = json.loads(response.data)
        assert body["id"] == 7
        assert body["result"]["content"][0]["text"] == "answer: {'ok': True}"
        assert response.id is not None
        assert int(response.id) > int(ask.id)
        # resuming after the response: nothing more, the stream ends at once
        async with _get(http, url, headers, last=response.id) as again:
            assert await again.next() is None


async def test_the_ask_of_a_call_answered_with_json_travels_on_the_get_stream() -> None:
    async with _serving() as (app, url), httpx.AsyncClient() as http:
        headers = await _session(http, url)
        json_only = {**headers, "Accept": "application/json"}
        async with _get(http, url, headers) as stream:
            await _until_attached(app, headers["Mcp-Session-Id"])
            call = _rpc(8, "tools/call", {"name": "ask", "arguments": {}})
            answered = asyncio.ensure_future(http.post(url, json=call, headers=json_only))
            ask = await stream.next()
            assert ask is not None
            question = json.loads(ask.data)
            assert question["method"] == "elicitation/create"
            answer = {"jsonrpc": "2.0", "id": question["id"],
                      "result": {"action": "accept", "content": {"n": 1}}}  # fmt: skip
            assert (await http.post(url, json=answer, headers=headers)).status_code == 202
            r = await asyncio.wait_for(answered, WAIT_S)
        assert r.headers["content-type"].startswith("application/json")
        assert r.json()["result"]["content"][0]["text"] == "answer: {'n': 1}"


async def test_our_client_follows_the_get_stream_and_hears_the_tools_changed() -> None:
    async with _serving() as (app, url):
        transport = HttpTransport(name="self", url=url)
        client = McpClient(transport, name="self")
        changed = asyncio.Event()
        client.on_tools_changed = changed.set
        await client.start()
        try:
            sid = transport.session_id
            assert sid is not None
            await _until_attached(app, sid)
            assert transport.get_stream_state == "open"
            await app.tools_changed()
            await asyncio.wait_for(changed.wait(), WAIT_S)
            result = await client.call_tool("echo", {"text": "still fine"}, deadline_s=5)
            assert result["content"] == [{"type": "text", "text": "still fine"}]
        finally:
            await client.aclose()
        assert app.session_count == 0  # its DELETE ended the session, and the stream
