"""HTTP mounts: another app's ASGI application is served by the daemon's one server for the
paths it mounted (the web page, webhook ingress), the plane's own paths stay its own, and a path
nobody serves is a JSON 404."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from lemon_control_plane import ControlPlane
from lemon_core.mounts import HTTP_MOUNTS, HttpMounts
from lemon_core.runtime_errors import RuntimeUsageError


def _app(body: bytes) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        text = body + b" " + scope["path"].encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": text})

    return app


async def test_a_mounted_app_serves_its_prefix_and_nothing_else(daemon: ControlPlane) -> None:
    daemon.mounts.unmount("/")  # the web page's fallback, when lemon_web is installed
    daemon.mounts.mount("/hooks", _app(b"hooks"), owner="test")
    daemon.mounts.mount("/hooks/special", _app(b"special"), owner="test")
    async with httpx.AsyncClient(base_url=daemon.url) as http:
        assert (await http.get("/hooks")).text == "hooks /hooks"
        assert (await http.get("/hooks/a/b")).text == "hooks /hooks/a/b"
        assert (await http.get("/hooks/special/x")).text == "special /hooks/special/x"
        missing = await http.get("/hooksx")
        assert missing.status_code == 404
        assert missing.json() == {"error": "Not found"}
        assert (await http.get("/healthz")).json() == {"ok": True}
        daemon.mounts.mount("/", _app(b"fallback"), owner="test")
        assert (await http.get("/hooksx")).text == "fallback /hooksx"
        assert (await http.get("/healthz")).json() == {"ok": True}  # never the fallback's
        assert daemon.mounts.unmount("/")
        assert (await http.get("/hooksx")).status_code == 404


async def test_the_runtime_registers_one_registry_the_plane_serves(boot: Any) -> None:
    async with boot() as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        assert runtime.context.capabilities.require(HTTP_MOUNTS) is plane.mounts
        assert runtime.mounts is plane.mounts


@pytest.mark.parametrize("prefix", ["", "hooks", "/ws", "/ws/x", "/healthz", "/a/", "/a//b"])
def test_a_bad_or_reserved_prefix_is_refused(prefix: str) -> None:
    with pytest.raises(RuntimeUsageError):
        HttpMounts().mount(prefix, _app(b""), owner="test")


def test_a_prefix_mounts_once() -> None:
    mounts = HttpMounts()
    mounts.mount("/web", _app(b""), owner="lemon_web")
    with pytest.raises(RuntimeUsageError, match="already mounted by lemon_web"):
        mounts.mount("/web", _app(b""), owner="other")
    assert not mounts.unmount("/nothing")
