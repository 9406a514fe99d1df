"""Bad input on the wire: every malformed, binary, oversized or unknown frame gets a typed
error ``res`` with the reference's code; the connection (and the daemon) keep working."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import connect as ws_connect

from lemon_control_plane import ERROR_CODES, ControlPlane
from lemon_control_plane._frames import FrameError, parse_request
from lemon_control_plane.testing import ClientFactory as Client
from lemon_runtime import Runtime


def _error(frame: dict[str, Any]) -> tuple[str, str]:
    assert frame["type"] == "res"
    assert frame["ok"] is False
    return frame["id"], frame["error"]["code"]


async def test_requests_before_the_handshake_are_refused(client: Client) -> None:
    async with client(handshake=False) as c:
        res = await c.request("health")
        assert _error(res) == (res["id"], "HANDSHAKE_REQUIRED")
        hello = await c.connect()
        assert hello["type"] == "hello-ok"
        again = await c.connect()
        assert _error(again) == ("c1", "ALREADY_CONNECTED")
        assert (await c.request("health"))["ok"] is True


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("{not json", ("unknown", "INVALID_REQUEST")),
        ("[1, 2]", ("unknown", "INVALID_REQUEST")),
        ('{"type":"event","event":"x"}', ("unknown", "INVALID_REQUEST")),
        ('{"type":"req","method":"health"}', ("unknown", "INVALID_REQUEST")),
        ('{"type":"req","id":"a"}', ("a", "INVALID_REQUEST")),
        ('{"type":"req","id":"b","method":"health","params":[1]}', ("b", "INVALID_REQUEST")),
        ('{"type":"req","id":"c","method":"no.such.method"}', ("c", "METHOD_NOT_FOUND")),
        ('{"type":"req","id":"d","method":"chat.send","params":{}}', ("d", "INVALID_REQUEST")),
        (
            '{"type":"req","id":"e","method":"chat.history","params":{"sessionKey":"s","limit":"9"}}',
            ("e", "INVALID_REQUEST"),
        ),
        (
            '{"type":"req","id":"f","method":"exec.approval.resolve",'
            '"params":{"approvalId":"x","decision":"maybe"}}',
            ("f", "INVALID_REQUEST"),
        ),
        (
            '{"type":"req","id":"g","method":"exec.approval.resolve",'
            '"params":{"approvalId":"nope","decision":"deny"}}',
            ("g", "CONFLICT"),
        ),
        (
            '{"type":"req","id":"h","method":"chat.send",'
            '"params":{"sessionKey":"agent:bad key","prompt":"x"}}',
            ("h", "INVALID_PARAMS"),
        ),
    ],
)
async def test_a_bad_frame_gets_a_typed_error_and_the_connection_lives(
    client: Client, raw: str, expected: tuple[str, str]
) -> None:
    async with client() as c:
        await c.send_raw(raw)
        frame = await c.until(lambda f: f.get("type") == "res")
        assert _error(frame) == expected
        assert "Traceback" not in json.dumps(frame)
        assert (await c.request("health"))["ok"] is True


async def test_binary_and_oversized_frames_are_refused(
    client: Client, daemon: ControlPlane
) -> None:
    async with client() as c:
        await c.send_raw(b'{"type":"req","id":"x","method":"health"}')
        assert _error(await c.until(lambda f: f.get("type") == "res")) == (
            "unknown",
            "INVALID_REQUEST",
        )
        big = json.dumps(
            {"type": "req", "id": "big", "method": "health", "pad": "x" * daemon.config.max_payload}
        )
        await c.send_raw(big)
        frames = [f for f in c.frames if f.get("type") == "res"]
        frame = await c.until(lambda f: f.get("type") == "res" and f not in frames)
        assert _error(frame) == ("unknown", "INVALID_REQUEST")
        assert "larger than" in frame["error"]["message"]
        assert (await c.request("health"))["ok"] is True


async def test_healthz_and_unknown_paths(daemon: ControlPlane) -> None:
    async with httpx.AsyncClient(base_url=daemon.url) as http:
        ok = await http.get("/healthz")
        missing = await http.get("/nope")
    assert (ok.status_code, ok.json()) == (200, {"ok": True})
    assert (missing.status_code, missing.json()) == (404, {"error": "Not found"})


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_frames = st.one_of(
    st.text(max_size=64),
    st.binary(max_size=64).map(lambda b: b.decode("latin-1")),
    _json.map(json.dumps),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["req", "res", "event", ""]), "id": _json, "method": _json},
        optional={"params": _json},
    ).map(json.dumps),
)


@settings(max_examples=300, deadline=None)
@given(raw=_frames)
def test_the_frame_parser_refuses_with_a_wire_error_only(raw: str) -> None:
    refused: FrameError | None = None
    try:
        request = parse_request(raw)
    except FrameError as exc:
        refused = exc
    if refused is not None:
        assert refused.code in ERROR_CODES
        assert isinstance(refused.request_id, str)
    else:
        assert isinstance(request.id, str)
        assert isinstance(request.method, str)
        assert isinstance(request.params, dict)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    frames=st.lists(
        st.one_of(
            _frames,
            st.fixed_dictionaries(
                {
                    "type": st.just("req"),
                    "id": st.text(min_size=1, max_size=8),
                    "method": st.sampled_from(
                        [
                            "health",
                            "chat.history",
                            "sessions.snapshot",
                            "chat.abort",
                            "exec.approval.resolve",
                            "session.detail",
                            "sessions.list",
                            "x",
                        ]
                    ),
                },
                optional={
                    "params": st.dictionaries(
                        st.sampled_from(["sessionKey", "limit", "runId", "approvalId", "decision"]),
                        _json,
                        max_size=3,
                    )
                },
            ).map(json.dumps),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_fuzzed_frames_never_break_a_live_connection(
    frames: list[str], threaded_daemon: tuple[str, str | None]
) -> None:
    url, token = threaded_daemon
    with ws_connect(url) as ws:
        auth = {"auth": {"token": token}}
        ws.send(json.dumps({"type": "req", "id": "c", "method": "connect", "params": auth}))
        assert json.loads(ws.recv(timeout=30))["type"] == "hello-ok"
        for raw in frames:
            ws.send(raw)
        ws.send(json.dumps({"type": "req", "id": "final!", "method": "health"}))
        while True:
            frame = json.loads(ws.recv(timeout=30))
            if frame.get("type") != "res":
                continue
            if frame["id"] == "final!":
                assert frame["ok"] is True
                break
            if not frame["ok"]:
                assert frame["error"]["code"] in ERROR_CODES
                assert "Traceback" not in frame["error"]["message"]


@pytest.fixture
def threaded_daemon(boot: Callable[..., Runtime]) -> Iterator[tuple[str, str | None]]:
    """The daemon on its own loop in a thread (hypothesis drives sync tests): its ws URL and
    its local token."""
    ready = threading.Event()
    state: dict[str, Any] = {}

    async def serve() -> None:
        stop = asyncio.Event()
        state["loop"], state["stop"] = asyncio.get_running_loop(), stop
        async with boot() as runtime:
            plane = runtime.handle("lemon_control_plane")
            assert isinstance(plane, ControlPlane)
            state["url"], state["token"] = plane.ws_url, plane.local_token
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(60)
    try:
        yield state["url"], state["token"]
    finally:
        state["loop"].call_soon_threadsafe(state["stop"].set)
        thread.join(60)
