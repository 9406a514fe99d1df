"""The editor handle record and ``editor_call``: loopback only, bounded, clear errors."""

from __future__ import annotations

import asyncio
import json

import pytest

from lemon_core.execution import (
    EditorCallError,
    EditorHandle,
    ExecutionContractError,
    RunRequest,
    editor_call,
)


def test_the_handle_is_loopback_with_a_port_and_a_token() -> None:
    EditorHandle(host="127.0.0.1", port=1, token="t")
    EditorHandle(host="::1", port=65535, token="t", read=True)
    for bad in (
        {"host": "10.0.0.1", "port": 1, "token": "t"},
        {"host": "localhost", "port": 1, "token": "t"},
        {"host": "127.0.0.1", "port": 0, "token": "t"},
        {"host": "127.0.0.1", "port": 1, "token": ""},
    ):
        with pytest.raises(ExecutionContractError):
            EditorHandle(**bad)  # type: ignore[arg-type]
    with pytest.raises(ExecutionContractError, match="EditorHandle"):
        RunRequest(origin="acp", session_key="acp:a", prompt="hi", editor={"host": "x"})  # type: ignore[arg-type]


async def test_editor_call_answers_results_errors_and_a_gone_endpoint() -> None:
    answers = iter(
        [
            {"result": {"content": "text"}},
            {"error": {"code": -32002, "message": "no buffer"}},
        ]
    )
    seen: list[dict[str, object]] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(json.loads(await reader.readline()))
        answer = next(answers, None)
        if answer is not None:
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    handle = EditorHandle(host="127.0.0.1", port=port, token="tok", read=True)
    async with server:
        assert await editor_call(handle, "fs/read_text_file", {"path": "/p"}) == {"content": "text"}
        with pytest.raises(EditorCallError, match="no buffer") as refused:
            await editor_call(handle, "fs/read_text_file", {"path": "/p"})
        assert refused.value.code == -32002
        with pytest.raises(EditorCallError, match="closed before answering"):
            await editor_call(handle, "fs/read_text_file", {"path": "/p"})
        with pytest.raises(EditorCallError, match="not a call"):
            await editor_call(handle, "session/prompt", {})
    assert seen[0] == {"token": "tok", "method": "fs/read_text_file", "params": {"path": "/p"}}
    with pytest.raises(EditorCallError, match="connection is gone"):
        await editor_call(handle, "fs/read_text_file", {"path": "/p"})
