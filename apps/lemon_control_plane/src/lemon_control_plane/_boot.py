"""lemon_control_plane's ``lemon.apps`` hook: the control plane on a booted runtime.

Profile ``daemon`` (requires ``lemon_router``, so the whole run pipeline boots with it). Start
reads the settings under ``runtime.context.settings["control_plane"]`` (host, port, cwd,
tokens, ...; see :meth:`ControlPlaneConfig.from_settings`) over the home's ``[control_plane]``
section (``local_auth``, ``tls_cert``, ``tls_key``); the token store and the local token are the
home's (``control_plane/tokens.json``, ``control_plane/local_token``). It serves the runtime's
session port
(``SESSION_PORT``); the handle is the running :class:`ControlPlane` (its ``url`` says where).
Stop cancels the runs in flight through the port, tells every client, and stops the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import msgspec

from lemon_control_plane.config import ControlPlaneConfig
from lemon_control_plane.local_token import local_token_path
from lemon_control_plane.server import ControlPlane
from lemon_control_plane.tokens import tokens_path
from lemon_core.home import Home
from lemon_core.runtime import HTTP_MOUNTS, MODEL_CATALOG, AppSpec, Runtime
from lemon_core.sessions import SESSION_PORT

__all__ = ["lemon_control_plane_app"]


async def _start(runtime: Runtime) -> ControlPlane:
    settings = runtime.context.settings.get("control_plane") or {}
    if not isinstance(settings, Mapping):
        raise TypeError("settings['control_plane'] must be a mapping")
    values = dict(settings)
    section = runtime.config.control_plane
    values.setdefault("local_auth", section.local_auth)
    for name, value in section.admission().items():
        values.setdefault(name, value)
    tls = section.tls_paths(runtime.home)
    if tls is not None:
        values.setdefault("tls_cert", str(tls[0]))
        values.setdefault("tls_key", str(tls[1]))
    values.setdefault("token_file", str(tokens_path(runtime.home)))
    values.setdefault("local_token_file", str(local_token_path(runtime.home)))
    values.setdefault("default_model", runtime.config.defaults.model)
    # Where `lemon daemon start` writes the daemon's output.
    values.setdefault("log_file", str(Home(root=runtime.home).logs))
    config = ControlPlaneConfig.from_settings(values)
    port = runtime.context.capabilities.require(SESSION_PORT)
    plane = ControlPlane(
        port,
        config,
        models=runtime.context.capabilities.get(MODEL_CATALOG),
        mounts=runtime.context.capabilities.get(HTTP_MOUNTS),
        config_view=lambda: msgspec.to_builtins(runtime.config),
    )
    await plane.__aenter__()
    return plane


async def _stop(runtime: Runtime, handle: object) -> None:
    await cast(ControlPlane, handle).__aexit__(None, None, None)


lemon_control_plane_app = AppSpec(
    name="lemon_control_plane",
    start=_start,
    stop=_stop,
    requires=("lemon_router",),
    profiles=frozenset({"daemon"}),
    description="the control plane: the session port on /ws (daemon profile)",
)
