"""A conformance check in the suite: one spec-shaped Streamable HTTP conversation (MCP
2025-06-18, "Transports" and "Lifecycle"), scripted with raw HTTP, played against our server
(``serve_http``) and against a reference server on the official ``mcp`` SDK
(``servers/sdk_mcp_server.py``, the test group's SDK): both must answer it the same way. Then
our own client (``McpClient`` over ``HttpTransport``, what the agent uses) against both.

The conversation: ``initialize`` (the version negotiated, a session id of visible ASCII),
``notifications/initialized`` (202, no body), ``tools/list`` and ``tools/call`` with the
session id and the ``MCP-Protocol-Version`` header, ``ping``, an unknown method (-32601), a
request without the session id (400), an unsupported protocol version header (400), the GET
stream (``text/event-stream``), DELETE, and then the ended session (404)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from lemon_mcp import ClientPeer, HttpTransport, McpClient, ServedResult, ServedTool, serve_http
from lemon_mcp._sse import sse_events

SDK = str(Path(__file__).parent / "servers" / "sdk_mcp_server.py")
VERSION = "2025-06-18"
ACCEPT = "application/json, text/event-stream"
WAIT_S = 10


class _Host:
    """Our server's side of the reference tools: ``echo`` and ``add``."""

    def tools(self) -> Sequence[ServedTool]:
        text = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
        numbers = {"type": "object", "properties": {"a": {"type": "integer"},
                                                    "b": {"type": "integer"}}}  # fmt: skip
        return (
            ServedTool(name="echo", description="Echo the text back.", input_schema=text),
            ServedTool(name="add", description="Add two integers.", input_schema=numbers),
        )

    async def call(
        self, name: str, arguments: Mapping[str, Any], peer: ClientPeer, call_id: str
    ) -> ServedResult:
        if name == "add":
            return ServedResult(text=str(int(arguments["a"]) + int(arguments["b"])))
        return ServedResult(text=str(arguments.get("text", "")))


@contextlib.asynccontextmanager
async def _ours() -> AsyncIterator[str]:
    url: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    task = asyncio.ensure_future(
        serve_http(_Host(), "127.0.0.1:0", on_listening=url.set_result, stop=stop)
    )
    try:
        await asyncio.wait({url, task}, timeout=WAIT_S, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
        yield url.result()
    finally:
        stop.set()
        await asyncio.wait_for(task, WAIT_S)


@contextlib.asynccontextmanager
async def _reference() -> AsyncIterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = await asyncio.create_subprocess_exec(
        sys.executable, SDK, "http", str(port),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = asyncio.get_running_loop().time() + 30
        while True:  # ready when it accepts connections
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                assert asyncio.get_running_loop().time() < deadline, "the SDK server never listened"
                await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), WAIT_S)


@pytest.fixture(params=["lemon", "sdk"])
async def server_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    serving = _ours() if request.param == "lemon" else _reference()
    async with serving as url:
        yield url


def _rpc(rid: int | None, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if rid is not None:
        message["id"] = rid
    if params is not None:
        message["params"] = params
    return message


async def _answer(response: httpx.Response, rid: int) -> dict[str, Any]:
    """The response to request ``rid``: the JSON body, or the SSE stream's message answering
    it (the spec lets a server pick either)."""
    kind = response.headers.get("content-type", "")
    if kind.startswith("application/json"):
        body = json.loads(await response.aread())
        assert isinstance(body, dict)
        return body
    assert kind.startswith("text/event-stream"), kind
    async for event in sse_events(response.aiter_bytes(), max_bytes=1 << 24):
        if not event.data:
            continue  # a priming event
        message = json.loads(event.data)
        if message.get("id") == rid and ("result" in message or "error" in message):
            assert isinstance(message, dict)
            return message
    raise AssertionError(f"the stream ended without the response to {rid}")


async def _post(
    http: httpx.AsyncClient, url: str, message: dict[str, Any], headers: dict[str, str]
) -> tuple[httpx.Response, dict[str, Any] | None]:
    async with http.stream("POST", url, json=message, headers=headers) as r:
        if "id" not in message or r.status_code >= 300:
            await r.aread()
            return r, None
        return r, await _answer(r, message["id"])


async def test_the_streamable_http_conversation_of_the_spec(server_url: str) -> None:
    url = server_url
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        client_info = {"name": "conformance", "version": "1"}
        init = _rpc(
            1,
            "initialize",
            {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": client_info},
        )
        r, body = await _post(http, url, init, {"Accept": ACCEPT})
        assert r.status_code == 200
        assert body is not None
        result = body["result"]
        assert result["protocolVersion"] == VERSION
        assert "tools" in result["capabilities"]
        assert isinstance(result["serverInfo"]["name"], str)
        sid = r.headers["mcp-session-id"]
        assert re.fullmatch(r"[\x21-\x7e]+", sid)  # visible ASCII only, as the spec says
        headers = {"Accept": ACCEPT, "Mcp-Session-Id": sid, "MCP-Protocol-Version": VERSION}

        r, _ = await _post(http, url, _rpc(None, "notifications/initialized"), headers)
        assert r.status_code == 202
        assert r.content == b""

        _, body = await _post(http, url, _rpc(2, "tools/list"), headers)
        assert body is not None
        tools = {t["name"]: t for t in body["result"]["tools"]}
        assert {"echo", "add"} <= set(tools)
        assert tools["echo"]["inputSchema"]["type"] == "object"

        call = _rpc(3, "tools/call", {"name": "echo", "arguments": {"text": "conformant"}})
        _, body = await _post(http, url, call, headers)
        assert body is not None
        assert body["result"]["content"] == [{"type": "text", "text": "conformant"}]
        assert body["result"].get("isError", False) is False
        add = _rpc(4, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})
        _, body = await _post(http, url, add, headers)
        assert body is not None
        assert body["result"]["content"][0]["text"] == "5"

        _, body = await _post(http, url, _rpc(5, "ping"), headers)
        assert body is not None
        assert body["result"] == {}
        _, body = await _post(http, url, _rpc(6, "no/such/method"), headers)
        assert body is not None
        assert body["error"]["code"] == -32601

        no_session = {"Accept": ACCEPT, "MCP-Protocol-Version": VERSION}
        r, _ = await _post(http, url, _rpc(7, "ping"), no_session)
        assert r.status_code == 400
        bad_version = {**headers, "MCP-Protocol-Version": "1999-01-01"}
        r, _ = await _post(http, url, _rpc(8, "ping"), bad_version)
        assert r.status_code == 400

        get = {**headers, "Accept": "text/event-stream"}
        async with http.stream("GET", url, headers=get) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")

        r = await http.delete(url, headers=headers)
        assert r.status_code in (200, 204)
        r, _ = await _post(http, url, _rpc(9, "ping"), headers)
        assert r.status_code == 404  # the ended session
        r = await http.get(url, headers=get)
        assert r.status_code == 404


async def test_our_client_against_our_server_and_the_reference(server_url: str) -> None:
    transport = HttpTransport(name="conformance", url=server_url)
    client = McpClient(transport, name="conformance")
    await client.start()
    try:
        assert transport.session_id
        names = {t["name"] for t in await client.list_tools()}
        assert {"echo", "add"} <= names
        echoed = await client.call_tool("echo", {"text": "both ways"}, deadline_s=WAIT_S)
        assert echoed["content"] == [{"type": "text", "text": "both ways"}]
        added = await client.call_tool("add", {"a": 40, "b": 2}, deadline_s=WAIT_S)
        assert added["content"][0]["text"] == "42"
        await client.ping()
        assert transport.get_stream_state == "open"  # both offer the GET stream
    finally:
        await client.aclose()
