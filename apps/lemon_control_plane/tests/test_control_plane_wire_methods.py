"""Wire methods of other apps (lemon_core.wire_methods): a method an app registers is served on
the plane's WebSocket with the same scope check and error mapping as the plane's own, is
advertised in hello-ok, replaces an unsupported method's NOT_IMPLEMENTED, never shadows one of
the plane's own methods, and is gone when unregistered."""

from __future__ import annotations

from typing import Any

import pytest

from lemon_control_plane import ControlPlane
from lemon_control_plane.testing import ClientFactory as Client
from lemon_core.errors import UsageError
from lemon_core.runtime_errors import RuntimeUsageError
from lemon_core.wire_methods import WIRE_METHODS, WireCall, WireMethods


async def _echo(call: WireCall) -> dict[str, Any]:
    if "bad" in call.params:
        raise UsageError("bad must not be given: drop it")
    if "boom" in call.params:
        raise ValueError("secret-ish internal detail")
    return {"method": call.method, "params": dict(call.params), "scopes": sorted(call.scopes)}


async def test_a_registered_method_is_served_advertised_and_scoped(
    daemon: ControlPlane, client: Client
) -> None:
    daemon.wire_methods.register("things.echo", _echo, scope="write", owner="test")
    async with client(handshake=False) as c:
        hello = await c.connect()
        assert "things.echo" in hello["features"]["methods"]
        assert "things.echo" in daemon.methods
        payload = await c.call("things.echo", {"a": 1})
        assert payload["method"] == "things.echo"
        assert payload["params"] == {"a": 1}
        assert "write" in payload["scopes"]
        refused = await c.request("things.echo", {"bad": True})
        assert refused["error"] == {
            "code": "INVALID_PARAMS",
            "message": "bad must not be given: drop it",
        }
        broken = await c.request("things.echo", {"boom": True})
        assert broken["error"]["code"] == "INTERNAL_ERROR"
        assert "secret-ish" not in str(broken)
    async with client(handshake=False) as c:
        await c.connect(scopes=["read"])
        res = await c.request("things.echo", {})
        assert res["error"] == {
            "code": "FORBIDDEN",
            "message": "Insufficient permissions for things.echo",
        }
    assert daemon.wire_methods.unregister("things.echo")
    async with client() as c:
        gone = await c.request("things.echo", {})
        assert gone["error"]["code"] == "METHOD_NOT_FOUND"


async def test_an_app_may_answer_an_unsupported_method_but_never_shadow_the_planes(
    daemon: ControlPlane, client: Client
) -> None:
    async def config_set(call: WireCall) -> dict[str, Any]:
        return {"set": None, "sessionKey": call.params.get("sessionKey")}

    async def health(call: WireCall) -> str:
        return "shadowed"

    # config.set is one the plane answers NOT_IMPLEMENTED (goal.* are lemon_memory's now)
    daemon.wire_methods.register("config.set", config_set, scope="read", owner="test")
    daemon.wire_methods.register("health", health, scope=None, owner="test")
    async with client() as c:
        assert await c.call("config.set", {"sessionKey": "s"}) == {
            "set": None,
            "sessionKey": "s",
        }
        assert await c.call("health") != "shadowed"


async def test_the_runtime_registers_one_registry_the_plane_serves(boot: Any) -> None:
    async with boot() as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        assert runtime.context.capabilities.require(WIRE_METHODS) is plane.wire_methods
        assert runtime.wire_methods is plane.wire_methods


@pytest.mark.parametrize("name", ["", "Things.echo", "-echo", "things.", ".echo", "a b.c"])
def test_a_malformed_name_is_refused(name: str) -> None:
    with pytest.raises(RuntimeUsageError):
        WireMethods().register(name, _echo, scope=None, owner="test")


def test_a_name_registers_once_and_scopes_are_the_planes() -> None:
    methods = WireMethods()
    methods.register("things.echo", _echo, scope="read", owner="one")
    with pytest.raises(RuntimeUsageError, match="already registered by one"):
        methods.register("things.echo", _echo, scope="read", owner="two")
    with pytest.raises(RuntimeUsageError, match="scope"):
        methods.register("things.other", _echo, scope="root", owner="one")
    assert methods.names() == ("things.echo",)
    assert not methods.unregister("things.other")
