"""Errors are mapped once, by class: a bug below the wire (a plain ``ValueError`` in the
router's submit path) is ``INTERNAL_ERROR``, never ``INVALID_PARAMS``, in both dialects (the
terminal client's ``chat.send`` and the typed clients' ``port.submit``), over the real server
on the booted daemon; the frame names no traceback and carries no message of the error."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from lemon_control_plane import ControlPlane
from lemon_control_plane.testing import ClientFactory, plane_client
from lemon_core.execution import RunRequest

SECRET = "sk-planted-0123456789abcdef"


@pytest.fixture
def broken(daemon: ControlPlane, monkeypatch: pytest.MonkeyPatch) -> ClientFactory:
    port: Any = daemon._port

    async def submit(request: RunRequest) -> Any:
        raise ValueError(f"a router bug, not the client's fault ({SECRET})")

    monkeypatch.setattr(port, "submit", submit)
    return plane_client(daemon)


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("chat.send", {"sessionKey": "agent:default:main", "prompt": "hello"}),
        (
            "port.submit",
            {"request": {"sessionKey": "agent:default:main", "prompt": "hello", "origin": "cli"}},
        ),
    ],
)
async def test_a_plain_value_error_below_the_wire_is_internal_not_invalid_params(
    broken: ClientFactory,
    caplog: pytest.LogCaptureFixture,
    method: str,
    params: dict[str, Any],
) -> None:
    with caplog.at_level(logging.ERROR, logger="lemon_control_plane"):
        async with broken() as c:
            res = await c.request(method, params)
    assert res["ok"] is False
    assert res["error"]["code"] == "INTERNAL_ERROR", res
    assert res["error"]["message"] == "Method execution failed"
    assert SECRET not in str(res)
    assert "Traceback" not in str(res)
    assert any(method in r.getMessage() for r in caplog.records)  # logged on the server


@pytest.mark.parametrize(
    ("method", "params", "code"),
    [
        ("port.cancel", {}, "INVALID_PARAMS"),  # the router's own usage error
        ("port.patch", {"sessionKey": "agent:default:main", "model": "no:where"}, "INVALID_PARAMS"),
        (
            "sessions.patch",
            {"sessionKey": "agent:default:main", "model": "no:where"},
            "INVALID_PARAMS",
        ),
    ],
)
async def test_the_ports_usage_errors_stay_invalid_params(
    client: ClientFactory, method: str, params: dict[str, Any], code: str
) -> None:
    async with client() as c:
        res = await c.request(method, params)
    assert res["ok"] is False
    assert res["error"]["code"] == code, res


def test_the_mro_lookup_picks_the_most_specific_class() -> None:
    from lemon_control_plane._error_map import wire_error
    from lemon_control_plane.errors import WireError
    from lemon_core.errors import UsageError
    from lemon_core.execution import (
        InvalidToolPolicyError,
        PermissionEscalationError,
        RouterUnavailableError,
    )
    from lemon_core.sessions import InvalidSessionKeyError

    class PortUsage(UsageError):  # a port implementation's own usage error
        pass

    cases: list[tuple[BaseException, str]] = [
        (WireError("CONFLICT", "taken"), "CONFLICT"),
        (PermissionEscalationError("more than the parent"), "FORBIDDEN"),
        (InvalidToolPolicyError("unknown key"), "INVALID_PARAMS"),
        (InvalidSessionKeyError("a b", "a space"), "INVALID_PARAMS"),
        (PortUsage("no such model"), "INVALID_PARAMS"),
        (RouterUnavailableError("stopping"), "UNAVAILABLE"),
        (TimeoutError(), "TIMEOUT"),
        (ValueError(SECRET), "INTERNAL_ERROR"),
        (KeyError(SECRET), "INTERNAL_ERROR"),
    ]
    for exc, code in cases:
        error = wire_error(exc, "port.submit")
        assert error.code == code, (exc, error)
    internal = wire_error(ValueError(SECRET), "port.submit").body()
    assert SECRET not in str(internal)
    assert internal["details"] == {"type": "ValueError", "errorId": internal["details"]["errorId"]}  # type: ignore[index]


@pytest.mark.parametrize(
    ("method", "params", "code", "message"),
    [
        ("chat.history", {}, "INVALID_REQUEST", "Missing required fields: sessionKey"),
        (
            "chat.history",
            {"sessionKey": ""},
            "INVALID_REQUEST",
            "Missing required fields: sessionKey",
        ),
        (
            "port.steer",
            {"sessionKey": 5, "text": "x"},
            "INVALID_REQUEST",
            "Type errors: sessionKey: expected string, got int",
        ),
        (
            "port.submit",
            {"request": {"prompt": "x"}},
            "INVALID_REQUEST",
            "Missing required fields: request.sessionKey",
        ),
        (
            "port.submit",
            {"request": {"prompt": "x", "sessionKey": "agent:default:main", "preapproved": [1]}},
            "INVALID_REQUEST",
            "Type errors: request.preapproved[0]: expected string, got int",
        ),
        ("port.watch", {"sessionKey": "*"}, "INVALID_REQUEST", "Missing required fields: watchId"),
        (
            "port.cancel",
            {"includeQueued": "yes"},
            "INVALID_REQUEST",
            "Type errors: includeQueued: expected boolean, got string",
        ),
    ],
)
async def test_a_decode_error_names_the_field(
    client: ClientFactory, method: str, params: dict[str, Any], code: str, message: str
) -> None:
    async with client() as c:
        res = await c.request(method, params)
    assert res["ok"] is False
    assert (res["error"]["code"], res["error"]["message"]) == (code, message)


async def test_port_patch_reads_both_spellings_of_the_thinking_level(client: ClientFactory) -> None:
    async with client() as c:
        for name in ("thinkingLevel", "thinking_level"):
            res = await c.call("port.patch", {"sessionKey": "agent:default:main", name: "high"})
            assert res["thinking_level"] == "high"
            await c.call("port.patch", {"sessionKey": "agent:default:main", name: None})
