"""An HTTP error answer that carries a JSON-RPC error body (as the SDK's server answers an
unknown method with HTTP 404 and -32601): the caller sees the status and the JSON-RPC error's
code and message, not a bare "HTTP 404". Against a real server on 127.0.0.1 (Starlette on
uvicorn, in the test's loop) speaking Streamable HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from lemon_mcp import HttpTransport, McpClient, McpHttpStatusError

WAIT_S = 10


async def _mcp(request: Request) -> Response:
    """``initialize`` and ``tools/list`` answer; ``tools/call`` of ``missing`` is an HTTP 404
    with a JSON-RPC error; ``tools/call`` of ``broken`` an HTTP 500 with a page, not JSON. It
    keeps no session (a 404 in a session would mean the session ended)."""
    message: dict[str, Any] = await request.json()
    rid, method = message.get("id"), message.get("method")
    if rid is None:
        return Response(status_code=202)
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "errors", "version": "0"}}  # fmt: skip
        return JSONResponse({"jsonrpc": "2.0", "id": rid, "result": result})  # no session
    if method == "tools/call" and message["params"]["name"] == "broken":
        return Response("<html>oops</html>", 500, media_type="text/html")
    if method == "tools/call":
        error = {"code": -32601, "message": "Method not found: no tool 'missing'"}
        return JSONResponse({"jsonrpc": "2.0", "id": rid, "error": error}, 404)
    return JSONResponse({"jsonrpc": "2.0", "id": rid, "result": {"tools": []}})


@contextlib.asynccontextmanager
async def _client() -> AsyncIterator[McpClient]:
    app = Starlette(routes=[Route("/mcp", _mcp, methods=["POST", "GET", "DELETE"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off"))
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    client = McpClient(HttpTransport(name="errors", url=url), name="errors")
    try:
        deadline = asyncio.get_running_loop().time() + WAIT_S
        while not server.started:
            assert asyncio.get_running_loop().time() < deadline, "uvicorn never started"
            await asyncio.sleep(0.005)
        await client.start()
        yield client
    finally:
        await client.aclose()
        server.should_exit = True
        await asyncio.wait_for(task, WAIT_S)
        sock.close()


async def test_an_http_error_keeps_the_json_rpc_error_it_carries() -> None:
    async with _client() as client:
        with pytest.raises(McpHttpStatusError) as caught:
            await client.call_tool("missing", {}, deadline_s=WAIT_S)
    error = caught.value
    assert error.status == 404
    assert (error.rpc_code, error.rpc_message) == (-32601, "Method not found: no tool 'missing'")
    assert str(error) == (
        "the server answered HTTP 404: Method not found: no tool 'missing' (JSON-RPC error -32601)"
    )


async def test_an_http_error_without_a_json_rpc_body_says_only_the_status() -> None:
    async with _client() as client:
        with pytest.raises(McpHttpStatusError) as caught:
            await client.call_tool("broken", {}, deadline_s=WAIT_S)
    error = caught.value
    assert (error.status, error.rpc_code, error.rpc_message) == (500, None, None)
    assert str(error) == "the server answered HTTP 500"
