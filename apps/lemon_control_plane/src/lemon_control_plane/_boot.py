"""lemon_control_plane's ``lemon.apps`` hook: the control plane on a booted runtime.

Profile ``daemon`` (requires ``lemon_router``, so the whole run pipeline boots with it). The
app owns the ``[control_plane]`` section (:class:`ControlPlaneSection`: ``local_auth``,
``tls_cert``, ``tls_key``, the admission bounds). Its lifespan builds a
:class:`ControlPlaneConfig` from that section, the per-process :class:`ControlPlaneOptions`
given to the runtime (host, port, cwd, ...; ``Runtime(options=[ControlPlaneOptions(port=0)])``,
which win) and the home (the token store and the local token, ``control_plane/tokens.json``,
``control_plane/local_token``). It serves the runtime's session port (``SESSION_PORT``); the
handle is the running :class:`ControlPlane` (its ``url`` says where). Leaving it cancels the
runs in flight through the port, tells every client, and stops the server.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Final

from lemon_control_plane._section import SECTIONS, ControlPlaneOptions, ControlPlaneSection
from lemon_control_plane.config import ControlPlaneConfig
from lemon_control_plane.local_token import local_token_path
from lemon_control_plane.tokens import tokens_path
from lemon_core.capabilities import APPROVALS, MODEL_CATALOG
from lemon_core.config import DefaultsConfig
from lemon_core.home import Home
from lemon_core.mounts import HTTP_MOUNTS
from lemon_core.run_aborts import RUN_ABORTS
from lemon_core.sessions import SESSION_PORT
from lemon_core.wire_methods import WIRE_METHODS
from lemon_runtime import AppSpec, DaemonWorkspace, Runtime

if TYPE_CHECKING:
    from lemon_control_plane.server import ControlPlane

__all__ = ["lemon_control_plane_app", "plane_config"]


def plane_config(runtime: Runtime) -> ControlPlaneConfig:
    """The control plane's record: its options over ``[control_plane]`` over the home's."""
    options = runtime.option(ControlPlaneOptions) or ControlPlaneOptions()
    values = options.values()
    workspace = runtime.option(DaemonWorkspace)
    if workspace is not None:  # the daemon's workspace, unless the plane names its own
        values.setdefault("cwd", workspace.path)
    section = runtime.section(ControlPlaneSection)
    values.setdefault("local_auth", section.local_auth)
    for name, value in section.admission().items():
        values.setdefault(name, value)
    tls = section.tls_paths(runtime.home)
    if tls is not None:
        values.setdefault("tls_cert", str(tls[0]))
        values.setdefault("tls_key", str(tls[1]))
    values.setdefault("token_file", str(tokens_path(runtime.home)))
    values.setdefault("local_token_file", str(local_token_path(runtime.home)))
    defaults: DefaultsConfig = runtime.config.defaults
    values.setdefault("default_model", defaults.model)
    # Where `lemon daemon start` writes the daemon's output.
    values.setdefault("log_file", str(Home(root=runtime.home).logs))
    return ControlPlaneConfig.from_settings(values)


@contextlib.asynccontextmanager
async def _lifespan(runtime: Runtime) -> AsyncIterator[ControlPlane]:
    from lemon_control_plane.server import ControlPlane

    config = plane_config(runtime)
    port = runtime.context.capabilities.require(SESSION_PORT)
    async with ControlPlane(
        port,
        config,
        models=runtime.context.capabilities.get(MODEL_CATALOG),
        mounts=runtime.context.capabilities.get(HTTP_MOUNTS),
        wire_methods=runtime.context.capabilities.get(WIRE_METHODS),
        config_view=lambda: runtime.config.to_builtins(),
        bus=runtime.bus,
        approvals=runtime.context.capabilities.get(APPROVALS),
        # looked up per abort: the app registering it (lemon_automation) may start later
        run_aborts=lambda: runtime.context.capabilities.get(RUN_ABORTS),
    ) as plane:
        yield plane


lemon_control_plane_app: Final = AppSpec(
    name="lemon_control_plane",
    lifespan=_lifespan,
    requires=("lemon_router",),
    profiles=frozenset({"daemon"}),
    description="the control plane: the session port on /ws (daemon profile)",
    sections=SECTIONS,
)
