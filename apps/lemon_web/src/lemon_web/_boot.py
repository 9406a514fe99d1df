"""lemon_web's ``lemon.apps`` hook: the chat page on the daemon's server.

Profile ``daemon``; requires ``lemon_control_plane`` (its handle answers the page's token login).
Start mounts the page at ``/`` (the fallback: every path nobody else serves) through the
runtime's :data:`~lemon_core.mounts.HTTP_MOUNTS`; leaving the lifespan unmounts it. The
handle is the :class:`~lemon_web.WebApp`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Final

from lemon_control_plane import lemon_control_plane_app
from lemon_core.mounts import HTTP_MOUNTS
from lemon_runtime import AppSpec, Runtime

if TYPE_CHECKING:
    from lemon_web.app import WebApp

__all__ = ["MOUNT_PREFIX", "lemon_web_app"]

MOUNT_PREFIX = "/"


@contextlib.asynccontextmanager
async def _lifespan(runtime: Runtime) -> AsyncIterator[WebApp]:
    from lemon_web.app import WebApp

    web = WebApp(runtime.handle(lemon_control_plane_app))
    mounts = runtime.context.capabilities.require(HTTP_MOUNTS)
    mounts.mount(MOUNT_PREFIX, web, owner="lemon_web", description="the chat page")
    try:
        yield web
    finally:
        mounts.unmount(MOUNT_PREFIX)


lemon_web_app: Final = AppSpec(
    name="lemon_web",
    lifespan=_lifespan,
    requires=("lemon_control_plane",),
    profiles=frozenset({"daemon"}),
    description="the web chat page on / and /chat/<session key> (daemon profile)",
)
