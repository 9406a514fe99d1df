"""Hostile frames over a raw WebSocket: deep nesting before authentication, absurd limits.

Each answer is a typed error ``res`` (or a bounded ``ok``), never a dead connection, an
``INTERNAL_ERROR`` or a traceback in the log.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from websockets.sync.client import connect as ws_connect

from lemon_control_plane import ControlPlane, ControlPlaneConfig, ControlPlaneOptions
from lemon_control_plane._frames import MAX_DEPTH, FrameError, parse_request, too_deep
from lemon_control_plane.testing import ClientFactory as Client
from lemon_control_plane.testing import WireClient, plane_client
from lemon_core.config import load_config
from lemon_core.sessions import SESSION_PORT, SessionPort
from lemon_runtime import Runtime


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


# -- limits ------------------------------------------------------------------------------------

SESSION = "agent:default:main"
HUGE = 2**70
#: (method, params besides the limit, the port method the limit reaches, its maximum)
LIMITED = [
    ("sessions.list", {}, "sessions", 500),
    ("port.sessions", {}, "sessions", 500),
    ("chat.history", {"sessionKey": SESSION}, "transcript", 200),
    ("port.transcript", {"sessionKey": SESSION}, "transcript", 500),
    ("runs.recent.list", {}, "runs", 500),
    ("port.runs", {}, "runs", 10_000),
]


class _RecordingPort:
    """The daemon's own session port, recording the ``limit`` each read asked it for."""

    def __init__(self, port: SessionPort) -> None:
        self._port = port
        self.limits: dict[str, list[int]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._port, name)

    def _note(self, name: str, limit: int) -> None:
        self.limits.setdefault(name, []).append(limit)

    async def sessions(self, *, limit: int = 50) -> Any:
        self._note("sessions", limit)
        return await self._port.sessions(limit=limit)

    async def transcript(
        self, session_key: str, *, limit: int = 50, before: int | None = None
    ) -> Any:
        self._note("transcript", limit)
        return await self._port.transcript(session_key, limit=limit, before=before)

    async def runs(self, *, limit: int = 50, since_ms: int | None = None) -> Any:
        self._note("runs", limit)
        return await self._port.runs(limit=limit, since_ms=since_ms)


@pytest.fixture
async def recorded(
    boot: Callable[..., Runtime], tmp_path: Path
) -> AsyncIterator[tuple[_RecordingPort, ControlPlane]]:
    log = tmp_path / "daemon.log"
    log.write_text("".join(f"2026-01-01 00:00:00,000 INFO line {i}\n" for i in range(1500)))
    async with boot() as runtime:
        port = _RecordingPort(runtime.context.capabilities.require(SESSION_PORT))
        config = ControlPlaneConfig(port=0, log_file=str(log))
        async with ControlPlane(port, config) as plane:  # type: ignore[arg-type]  # a port by delegation
            yield port, plane


@pytest.mark.parametrize(("method", "params", "reaches", "top"), LIMITED)
async def test_a_huge_limit_is_clamped_to_the_methods_maximum(
    recorded: tuple[_RecordingPort, ControlPlane],
    method: str,
    params: dict[str, Any],
    reaches: str,
    top: int,
) -> None:
    port, plane = recorded
    async with plane_client(plane)() as c:
        for limit in (HUGE, 2**63, top + 1):
            res = await c.request(method, {**params, "limit": limit})
            assert res["ok"] is True, res
        assert (await c.request(method, {**params, "limit": top - 1}))["ok"] is True
    assert port.limits[reaches] == [top, top, top, top - 1]


async def test_logs_tail_and_runs_active_list_clamp_a_huge_limit(
    recorded: tuple[_RecordingPort, ControlPlane],
) -> None:
    _, plane = recorded
    async with plane_client(plane)() as c:
        tail = await c.call("logs.tail", {"limit": HUGE})
        assert len(tail["logs"]) == 1000
        assert tail["logs"][-1]["message"] == "line 1499"
        assert (await c.call("runs.active.list", {"limit": HUGE}))["runs"] == []


_LIMIT_METHODS = sorted({m for m, *_ in LIMITED} | {"logs.tail", "runs.active.list"})


@pytest.mark.parametrize("method", _LIMIT_METHODS)
@pytest.mark.parametrize(
    ("limit", "code", "says"),
    [
        (-1, "INVALID_PARAMS", "limit must be at least 1, got -1"),
        (0, "INVALID_PARAMS", "limit must be at least 1, got 0"),
        (-HUGE, "INVALID_PARAMS", "limit must be at least 1"),
        (True, "INVALID_REQUEST", "Type errors: limit: expected integer, got bool"),
        (2.5, "INVALID_REQUEST", "Type errors: limit: expected integer, got float"),
        ("9", "INVALID_REQUEST", "Type errors: limit: expected integer, got string"),
        ([9], "INVALID_REQUEST", "Type errors: limit: expected integer, got list"),
    ],
)
async def test_a_limit_that_is_not_a_positive_integer_is_refused_with_a_clear_message(
    client: Client, method: str, limit: object, code: str, says: str
) -> None:
    async with client() as c:
        res = await c.request(method, {"sessionKey": SESSION, "limit": limit})
    assert res["ok"] is False
    assert res["error"]["code"] == code
    assert says in res["error"]["message"]


@pytest.mark.parametrize(
    ("method", "name"),
    [("chat.history", "before"), ("port.transcript", "before"), ("port.runs", "sinceMs")],
)
async def test_a_position_param_is_bounded_too(client: Client, method: str, name: str) -> None:
    async with client() as c:
        for value in (HUGE, 2**63, 2**53):
            res = await c.request(method, {"sessionKey": SESSION, name: value})
            assert res["ok"] is True, res
        for value in (-1, -HUGE):
            res = await c.request(method, {"sessionKey": SESSION, name: value})
            assert res["error"]["code"] == "INVALID_PARAMS"
            assert f"{name} must be at least 0" in res["error"]["message"]
        res = await c.request(method, {"sessionKey": SESSION, name: False})
        assert res["error"]["code"] == "INVALID_REQUEST"


@pytest.mark.parametrize(
    "dates",
    [
        {"endDate": "0001-01-02"},
        {"endDate": "9999-12-31"},
        {"startDate": "0001-01-01", "endDate": "0001-01-01"},
        {"startDate": "1969-12-31"},
    ],
)
async def test_usage_cost_refuses_dates_outside_its_range(
    client: Client, dates: dict[str, str]
) -> None:
    async with client() as c:
        res = await c.request("usage.cost", dates)
    assert res["ok"] is False
    assert res["error"]["code"] == "INVALID_PARAMS"
    assert "between 1970-01-01 and 9999-12-30" in res["error"]["message"]


# -- every advertised method, fuzzed -----------------------------------------------------------

_PARAM_NAMES = [
    "limit",
    "before",
    "sinceMs",
    "sessionKey",
    "sessionKeys",
    "all",
    "runId",
    "approvalId",
    "decision",
    "prompt",
    "message",
    "text",
    "queueMode",
    "agentId",
    "startDate",
    "endDate",
    "level",
    "model",
    "label",
    "thinkingLevel",
    "thinking_level",
    "instructions",
    "includeQueued",
    "request",
    "watchId",
]
_edges = st.sampled_from([0, -1, 1, 2**31, 2**53, 2**63, -(2**63), 2**64, HUGE, -HUGE, 10**400])
_words = st.sampled_from(
    [SESSION, "agent:default:other", "*", "0001-01-01", "9999-12-31", "2026-01-01", "error"]
)
_leaf = st.one_of(
    _edges,
    _words,
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    _edges,
    _words,
)
_value = st.recursive(
    _leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
# Each name present about half the time: a request usually carries what its method reads.
_params = st.fixed_dictionaries({}, optional=dict.fromkeys(_PARAM_NAMES, _value))


@pytest.fixture(scope="module")
def threaded_plane(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, list[str], str]]:
    """The booted daemon on its own loop in a thread (hypothesis drives sync tests): its ws URL
    and the methods it advertises. Module-scoped: hypothesis runs every example against it."""
    home = tmp_path_factory.mktemp("fuzz")
    (home / "home").mkdir()
    (home / "work").mkdir()
    ready = threading.Event()
    state: dict[str, Any] = {}

    async def serve() -> None:
        stop = asyncio.Event()
        state["loop"], state["stop"] = asyncio.get_running_loop(), stop
        loaded = load_config(home=home / "home", cwd=home / "work", environ={})
        options = [ControlPlaneOptions(port=0, cwd=str(home / "work"))]
        async with Runtime(profile="daemon", config=loaded, options=options) as runtime:
            plane = runtime.handle("lemon_control_plane")
            assert isinstance(plane, ControlPlane)
            state["url"], state["methods"] = plane.ws_url, list(plane.methods)
            state["token"] = plane.local_token
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(60)
    try:
        yield state["url"], state["methods"], state["token"]
    finally:
        state["loop"].call_soon_threadsafe(state["stop"].set)
        thread.join(60)


@settings(max_examples=60, deadline=None)
@given(params=_params)
def test_fuzzed_params_to_every_advertised_method_never_fail_internally(
    threaded_plane: tuple[str, list[str], str], params: dict[str, Any]
) -> None:
    url, methods, token = threaded_plane
    with ws_connect(url) as ws:
        auth = {"auth": {"token": token}}
        ws.send(json.dumps({"type": "req", "id": "c", "method": "connect", "params": auth}))
        assert json.loads(ws.recv(timeout=30))["type"] == "hello-ok"
        for method in methods:
            ws.send(json.dumps({"type": "req", "id": method, "method": method, "params": params}))
        waiting = set(methods)
        while waiting:
            frame = json.loads(ws.recv(timeout=30))
            if frame.get("type") != "res":
                continue
            waiting.discard(frame["id"])
            if not frame["ok"]:
                assert frame["error"]["code"] != "INTERNAL_ERROR", (frame["id"], params, frame)
