"""lemon_openai's ``lemon.apps`` hook: the OpenAI-compatible ``/v1`` on the daemon's server.

Profile ``daemon``; requires ``lemon_control_plane`` (its handle checks the bearer tokens and
the ``Origin``). ``[openai_api] enabled`` off (the default): nothing is mounted; ``/v1`` is the
page's or the control plane's 404. On: start mounts :class:`~lemon_openai.OpenAIApi` at
``/v1`` through ``HTTP_MOUNTS``; leaving the lifespan unmounts it. A daemon whose control plane
takes connections without a token (a loopback bind with ``local_auth`` off) serves ``/v1``
without one too; a non-loopback bind always needs a token (the control plane refuses to start
without one). The API submits through ``SESSION_PORT``, looked up per request.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from lemon_control_plane import lemon_control_plane_app
from lemon_core.capabilities import MODEL_CATALOG, ModelInfo
from lemon_core.mounts import HTTP_MOUNTS
from lemon_core.sessions import SESSION_PORT, SessionPort
from lemon_openai._section import SECTIONS, OpenAIApiConfig
from lemon_runtime import AppSpec, Runtime

if TYPE_CHECKING:
    from lemon_openai._api import OpenAIApi

__all__ = ["OpenAIApp", "lemon_openai_app"]

log = logging.getLogger("lemon_openai")


@dataclass(slots=True)
class OpenAIApp:
    """The app's handle: the mounted API, or ``None`` when ``[openai_api] enabled`` is off."""

    api: OpenAIApi | None = None


@contextlib.asynccontextmanager
async def _lifespan(runtime: Runtime) -> AsyncIterator[OpenAIApp]:
    config = runtime.section(OpenAIApiConfig)
    if not config.enabled:
        yield OpenAIApp()
        return
    # Imported only when the API is served: a runtime without the daemon profile never loads it.
    from lemon_control_plane import ControlPlane, is_loopback_host
    from lemon_openai._api import API_PREFIX, OpenAIApi

    plane = runtime.handle(lemon_control_plane_app)
    assert isinstance(plane, ControlPlane)
    if not plane.requires_token and not is_loopback_host(plane.config.host):
        log.error("[openai_api] not served: a non-loopback bind without a token")
        yield OpenAIApp()
        return
    capabilities = runtime.context.capabilities

    def port() -> SessionPort | None:
        return capabilities.get(SESSION_PORT)

    def models() -> list[ModelInfo]:
        catalog = capabilities.get(MODEL_CATALOG)
        return [] if catalog is None else catalog.models()

    api = OpenAIApi(config=config, gate=plane, port=port, models=models)
    mounts = capabilities.require(HTTP_MOUNTS)
    mounts.mount(API_PREFIX, api, owner="lemon_openai", description="OpenAI-compatible API")
    try:
        yield OpenAIApp(api)
    finally:
        mounts.unmount(API_PREFIX)


lemon_openai_app: Final = AppSpec(
    name="lemon_openai",
    lifespan=_lifespan,
    requires=("lemon_control_plane",),
    profiles=frozenset({"daemon"}),
    description="the OpenAI-compatible /v1 API (when [openai_api] enabled)",
    sections=SECTIONS,
)
