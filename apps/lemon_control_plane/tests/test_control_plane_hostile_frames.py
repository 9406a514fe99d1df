"""Hostile frames over a raw WebSocket: deep nesting before authentication, absurd limits.

Each answer is a typed error ``res`` (or a bounded ``ok``), never a dead connection, an
``INTERNAL_ERROR`` or a traceback in the log.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lemon_control_plane._frames import MAX_DEPTH, FrameError, parse_request, too_deep
from lemon_control_plane.testing import ClientFactory as Client
from lemon_control_plane.testing import WireClient


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


async def _next_res(c: WireClient) -> dict[str, Any]:
    """The next ``res`` frame not read yet (events before it are skipped)."""
    while True:
        frame = await c.next_frame()
        if frame.get("type") == "res":
            return frame


def _tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info is not None or "Traceback" in r.getMessage()]


async def test_a_deeply_nested_frame_before_connect_gets_a_typed_error_and_the_socket_lives(
    client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # About 2 KB: 1,000 levels of nesting in the params of a frame sent before `connect`.
    raw = '{"type":"req","id":"deep","method":"health","params":{"x":' + _nested(1000) + "}}"
    assert len(raw) < 2100
    async with client(handshake=False) as c:
        for _ in range(3):
            await c.send_raw(raw)
            frame = await _next_res(c)
            assert frame["ok"] is False
            assert (frame["id"], frame["error"]["code"]) == ("unknown", "INVALID_REQUEST")
            assert "nested" in frame["error"]["message"]
        hello = await c.connect()
        assert hello["type"] == "hello-ok"
        assert (await c.request("health"))["ok"] is True
    assert _tracebacks(caplog) == []


async def test_nesting_up_to_the_bound_is_accepted(client: Client) -> None:
    inner = _nested(MAX_DEPTH - 2)  # the frame object and params are two levels
    async with client() as c:
        await c.send_raw('{"type":"req","id":"ok","method":"health","params":{"x":' + inner + "}}")
        frame = await c.until(lambda f: f.get("type") == "res" and f.get("id") == "ok")
        assert frame["ok"] is True


@pytest.mark.parametrize(
    "raw",
    [
        '{"type":"req","id":"a","method":"health","params":{"x":' + _nested(5000) + "}}",
        _nested(MAX_DEPTH + 1),
        '{"a":' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1),
        # An unterminated string does not hide the brackets before it.
        "[" * (MAX_DEPTH + 1) + '"\\"' * 1000,
    ],
)
def test_the_parser_refuses_deep_nesting_without_recursing(raw: str) -> None:
    with pytest.raises(FrameError, match="nested deeper than") as refused:
        parse_request(raw)
    assert refused.value.code == "INVALID_REQUEST"


def test_brackets_inside_strings_are_not_nesting() -> None:
    # Escaped quotes do not end a string.
    raw = '{"type":"req","id":"s","method":"health","params":{"x":"\\"' + "[" * 5000 + '"}}'
    request = parse_request(raw)
    assert request.params["x"] == '"' + "[" * 5000


def test_the_parser_bounds_nesting_of_bytes_too() -> None:
    with pytest.raises(FrameError, match="nested"):
        parse_request(_nested(2000).encode())


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


_tricky_text = st.text(alphabet='[]{}"\\ ,:a\u00e9\U0001f600', max_size=6)
_nested_json = st.recursive(
    st.none() | st.integers() | _tricky_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_tricky_text, inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(value=_nested_json, limit=st.integers(min_value=0, max_value=6), ascii_only=st.booleans())
def test_the_nesting_count_agrees_with_the_decoded_value(
    value: object, limit: int, ascii_only: bool
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert too_deep(text, limit) == (_depth(value) > limit)
    assert too_deep(text.encode(), limit) == (_depth(value) > limit)
