"""lemon_web's ``lemon.apps`` hook: the chat page on the daemon's server.

Profile ``daemon``; requires ``lemon_control_plane`` (its handle answers the page's token login).
Start mounts the page at ``/`` (the fallback: every path nobody else serves) through the
runtime's :data:`~lemon_core.runtime.HTTP_MOUNTS`; stop unmounts it. The handle is the
:class:`~lemon_web.WebApp`.
"""

from __future__ import annotations

from typing import cast

from lemon_control_plane import ControlPlane
from lemon_core.runtime import HTTP_MOUNTS, AppSpec, Runtime
from lemon_web.app import WebApp
from lemon_web.errors import WebError

__all__ = ["MOUNT_PREFIX", "lemon_web_app"]

MOUNT_PREFIX = "/"


async def _start(runtime: Runtime) -> WebApp:
    plane = runtime.handle("lemon_control_plane")
    if not isinstance(plane, ControlPlane):
        raise WebError(f"lemon_control_plane's handle is {type(plane).__name__}, not ControlPlane")
    web = WebApp(plane)
    runtime.context.capabilities.require(HTTP_MOUNTS).mount(
        MOUNT_PREFIX, web, owner="lemon_web", description="the chat page"
    )
    return web


async def _stop(runtime: Runtime, handle: object) -> None:
    cast(WebApp, handle)  # nothing of its own to release
    runtime.context.capabilities.require(HTTP_MOUNTS).unmount(MOUNT_PREFIX)


lemon_web_app = AppSpec(
    name="lemon_web",
    start=_start,
    stop=_stop,
    requires=("lemon_control_plane",),
    profiles=frozenset({"daemon"}),
    description="the web chat page on / and /chat/<session key> (daemon profile)",
)
