"""``serve_http``: our MCP server over Streamable HTTP on a real uvicorn on 127.0.0.1. Our own
client and the official SDK's client speak to it (sessions, a tool call answered on an SSE
stream, an approval asked through elicitation on that stream); raw requests check the clean
errors, the DNS-rebinding guard (Host and Origin), the bearer token and a cancelled call."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx
import mcp.types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from lemon_mcp import (
    ClientPeer,
    HttpServeError,
    HttpTransport,
    McpClient,
    ServedResult,
    ServedTool,
    serve_http,
)

JSON_AND_SSE = "application/json, text/event-stream"


class _Host:
    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    def tools(self) -> Sequence[ServedTool]:
        return (
            ServedTool(name="echo", description="Echo.", input_schema={"type": "object"}),
            ServedTool(name="slow", description="Never ends.", input_schema={"type": "object"}),
            ServedTool(name="ask", description="Asks first.", input_schema={"type": "object"}),
        )

    async def call(
        self, name: str, arguments: Mapping[str, Any], peer: ClientPeer, call_id: str
    ) -> ServedResult:
        if name == "slow":
            self.started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        if name == "ask":
            schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
            answer = await peer.elicit("May I?", schema, timeout_s=10)
            if answer is None:
                return ServedResult(text="not approved", is_error=True)
            return ServedResult(text=f"approved: {dict(answer)}")
        return ServedResult(text=str(arguments.get("text", "")))


@contextlib.asynccontextmanager
async def _serving(host: _Host, bind: str = "127.0.0.1:0", **kw: Any) -> AsyncIterator[str]:
    url: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    task = asyncio.ensure_future(
        serve_http(host, bind, on_listening=url.set_result, stop=stop, **kw)
    )
    try:
        either: set[asyncio.Future[Any]] = {url, task}
        await asyncio.wait(either, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()  # raises what stopped it
        yield url.result()
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


def _init(rid: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip


async def _session_id(http: httpx.AsyncClient, url: str, **headers: str) -> str:
    r = await http.post(url, json=_init(), headers={"Accept": JSON_AND_SSE, **headers})
    assert r.status_code == 200, r.text
    assert r.json()["result"]["serverInfo"]["name"] == "lemon"
    return r.headers["mcp-session-id"]


async def test_our_client_over_http_and_delete_ends_the_session() -> None:
    async with _serving(_Host()) as url:
        transport = HttpTransport(name="self", url=url, stateless=True)
        client = McpClient(transport, name="self")
        await client.start()
        try:
            # server/discover at 2026-07-28 got HTTP 400 (a version we do not serve): the
            # client fell back to initialize and a session
            assert not client.stateless
            assert client.protocol_version == "2025-11-25"
            assert transport.session_id
            assert [t["name"] for t in await client.list_tools()] == ["echo", "slow", "ask"]
            result = await client.call_tool("echo", {"text": "hi"}, deadline_s=5)
            assert result == {"content": [{"type": "text", "text": "hi"}], "isError": False}
            await client.ping()
            sid = transport.session_id
        finally:
            await client.aclose()
        async with httpx.AsyncClient() as http:  # the DELETE ended it
            ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
            headers = {"Accept": JSON_AND_SSE, "Mcp-Session-Id": sid}
            r = await http.post(url, json=ping, headers=headers)
            assert r.status_code == 404


async def test_the_sdk_client_gets_an_elicitation_on_the_call_stream() -> None:
    asked: list[str] = []

    async def elicit(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    async with (
        _serving(_Host()) as url,
        streamable_http_client(url) as (read, write),
        ClientSession(read, write, elicitation_callback=elicit) as session,
    ):
        await session.initialize()
        listed = await session.list_tools()
        assert [t.name for t in listed.tools] == ["echo", "slow", "ask"]
        result = await session.call_tool("ask", {})
        assert asked == ["May I?"]
        text = "".join(c.text for c in result.content if isinstance(c, types.TextContent))
        assert text == "approved: {'ok': True}"
        assert not result.is_error


async def test_bad_requests_get_clean_errors() -> None:
    async with _serving(_Host()) as url, httpx.AsyncClient() as http:
        accept = {"Accept": JSON_AND_SSE}
        r = await http.post(
            url, content=b"{nope", headers={**accept, "Content-Type": "application/json"}
        )
        assert (r.status_code, r.json()["error"]["code"]) == (400, -32700)
        r = await http.post(url, json=[_init()], headers=accept)
        assert (r.status_code, r.json()["error"]["code"]) == (400, -32600)
        r = await http.post(url, json={"id": 1, "method": "ping"}, headers=accept)
        assert (r.status_code, r.json()["error"]["code"]) == (400, -32600)
        r = await http.post(url, content=b"{}", headers={**accept, "Content-Type": "text/plain"})
        assert r.status_code == 415
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        r = await http.post(url, json=ping, headers=accept)
        assert r.status_code == 400
        assert "Mcp-Session-Id" in r.json()["error"]["message"]
        r = await http.post(url, json=ping, headers={**accept, "Mcp-Session-Id": "forged"})
        assert r.status_code == 404
        r = await http.post(
            url, json=_init(), headers={**accept, "MCP-Protocol-Version": "1999-01-01"}
        )
        assert r.status_code == 400
        sid = await _session_id(http, url)
        with_sid = {**accept, "Mcp-Session-Id": sid}
        r = await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                            headers=with_sid)  # fmt: skip
        assert r.status_code == 202
        r = await http.post(
            url, json={"jsonrpc": "2.0", "id": 3, "method": "nope"}, headers=with_sid
        )
        assert (r.status_code, r.json()["error"]["code"]) == (200, -32601)
        call = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "rm"}}
        r = await http.post(url, json=call, headers=with_sid)
        assert r.json()["error"]["code"] == -32602
        json_only = {**with_sid, "Accept": "application/json"}
        assert (await http.get(url, headers=json_only)).status_code == 406
        r = await http.get(url, headers={**with_sid, "Last-Event-ID": "12345"})
        assert (r.status_code, r.json()["error"]["code"]) == (400, -32000)  # not held
        async with http.stream("GET", url, headers=with_sid) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
        assert (await http.delete(url, headers=with_sid)).status_code == 204
        assert (await http.delete(url, headers=with_sid)).status_code == 404


async def test_dns_rebinding_guard_checks_host_and_origin() -> None:
    async with _serving(_Host()) as url, httpx.AsyncClient() as http:
        accept = {"Accept": JSON_AND_SSE}
        r = await http.post(url, json=_init(), headers={**accept, "Host": "evil.example"})
        assert r.status_code == 403
        assert "host" in r.json()["error"]["message"]
        r = await http.post(url, json=_init(), headers={**accept, "Origin": "http://evil.example"})
        assert r.status_code == 403
        assert "origin" in r.json()["error"]["message"]
        await _session_id(http, url, Origin="http://localhost:3000")
        await _session_id(http, url, Host="localhost")
    async with (
        _serving(_Host(), allowed_origins=["https://app.example"]) as url,
        httpx.AsyncClient() as http,
    ):
        await _session_id(http, url, Origin="https://app.example")


async def test_a_public_bind_needs_a_token_and_a_token_is_checked() -> None:
    with pytest.raises(HttpServeError, match="bearer token is required"):
        async with _serving(_Host(), "0.0.0.0:0"):
            pass
    with pytest.raises(HttpServeError, match="HOST:PORT"):
        async with _serving(_Host(), "127.0.0.1"):
            pass
    async with _serving(_Host(), token="s3cret") as url, httpx.AsyncClient() as http:
        r = await http.post(url, json=_init(), headers={"Accept": JSON_AND_SSE})
        assert r.status_code == 401
        assert r.headers["www-authenticate"] == "Bearer"
        wrong = {"Accept": JSON_AND_SSE, "Authorization": "Bearer wrong"}
        r = await http.post(url, json=_init(), headers=wrong)
        assert r.status_code == 401
        await _session_id(http, url, Authorization="Bearer s3cret")
        transport = HttpTransport(name="t", url=url, headers={"Authorization": "Bearer s3cret"})
        client = McpClient(transport, name="t")
        await client.start()
        try:
            assert len(await client.list_tools()) == 3
        finally:
            await client.aclose()
    async with _serving(_Host(), "0.0.0.0:0", token="s3cret") as url, httpx.AsyncClient() as http:
        local = url.replace("0.0.0.0", "127.0.0.1")  # a public bind: any Host, with the token
        auth = {"Authorization": "Bearer s3cret"}
        await _session_id(http, local, Host="lemon.example:8765", **auth)
        assert (await http.post(local, json=_init())).status_code == 401
        r = await http.post(local, json=_init(), headers={**auth, "Origin": "http://evil.example"})
        assert r.status_code == 403


async def test_a_cancelled_call_ends_its_stream_without_an_answer() -> None:
    host = _Host()
    async with _serving(host) as url, httpx.AsyncClient(timeout=10) as http:
        sid = await _session_id(http, url)
        with_sid = {"Accept": JSON_AND_SSE, "Mcp-Session-Id": sid}
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "slow"}}

        async def stream() -> list[str]:
            async with http.stream("POST", url, json=call, headers=with_sid) as r:
                assert r.headers["content-type"].startswith("text/event-stream")
                return [line async for line in r.aiter_lines() if line.startswith("data:")]

        reading = asyncio.ensure_future(stream())
        await asyncio.wait_for(host.started.wait(), 5)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": 7}}  # fmt: skip
        assert (await http.post(url, json=cancel, headers=with_sid)).status_code == 202
        await asyncio.wait_for(host.cancelled.wait(), 5)
        assert await asyncio.wait_for(reading, 5) == []
        echo = {"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "yo"}}}  # fmt: skip
        async with http.stream("POST", url, json=echo, headers=with_sid) as r:
            lines = [line async for line in r.aiter_lines() if line.startswith("data:")]
        assert json.loads(lines[0].removeprefix("data:"))["result"]["content"][0]["text"] == "yo"


async def test_the_conformance_client_calls_each_tool_and_accepts_an_elicitation() -> None:
    """``lemon mcp conformance-client``'s work against our server: every tool called (``slow``
    left out: it never ends), the ``ask`` tool's elicitation accepted with the schema's
    defaults; an ``auth/*`` scenario against a server without OAuth fails with the reason."""
    from lemon_mcp import McpError, conformance_client
    from lemon_mcp._conformance import schema_defaults

    class _Quick(_Host):
        def tools(self) -> Sequence[ServedTool]:
            return [t for t in super().tools() if t.name != "slow"]

    said: list[str] = []
    async with _serving(_Quick()) as url:
        await conformance_client(url, scenario="tools_call", say=said.append)
        with pytest.raises(McpError):  # an auth scenario logs in first: this server has no OAuth
            await conformance_client(url, scenario="auth/metadata-default")
    assert said == [
        "initialized: protocol 2025-11-25",
        "tools/list: 2 tool(s)",
        "tools/call echo: ok",
        "tools/call ask: ok",
    ]
    schema = {"type": "object", "properties": {
        "name": {"type": "string", "default": "Ann"}, "n": {"type": "integer"},
        "more": {"type": "object", "properties": {"ok": {"type": "boolean", "default": True}}},
    }}  # fmt: skip
    assert schema_defaults(schema) == {"name": "Ann", "more": {"ok": True}}
