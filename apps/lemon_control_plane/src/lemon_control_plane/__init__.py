"""lemon_control_plane: the daemon's control plane, the session port on a WebSocket.

A server Lemon's own terminal client can use unmodified: ``GET /healthz``, ``GET /ws`` with
the ``connect`` -> ``hello-ok`` handshake, the methods of :attr:`ControlPlane.methods` and the
events of :data:`EVENTS`, all over one :class:`~lemon_core.sessions.SessionPort` (never the bus,
the router, the store or the executor).
"""

from __future__ import annotations

from lemon_control_plane._admission import AdmissionStatistics
from lemon_control_plane._boot import lemon_control_plane_app
from lemon_control_plane._connection import ConnectionStatistics
from lemon_control_plane._logins import SignIn
from lemon_control_plane._section import ControlPlaneOptions, ControlPlaneSection
from lemon_control_plane.bridge import BridgeStatistics, EventBridge
from lemon_control_plane.client import WebSocketSessionPort, WebSocketSessionStream
from lemon_control_plane.config import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    PORT_ENV,
    TOKEN_ENV,
    ControlPlaneConfig,
    hash_token,
    is_loopback_host,
)
from lemon_control_plane.errors import (
    ERROR_CODES,
    ControlPlaneConfigError,
    ControlPlaneError,
    WireError,
    WireErrorCode,
    WireUsageError,
)
from lemon_control_plane.local_token import (
    LOCAL_TOKEN_ID,
    client_token,
    local_token_path,
    read_local_token,
)
from lemon_control_plane.server import (
    AUTH_COOKIE,
    EVENTS,
    PROTOCOL_VERSION,
    SERVER_VERSION,
    ControlPlane,
)

__all__ = [
    "AUTH_COOKIE",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "ERROR_CODES",
    "EVENTS",
    "LOCAL_TOKEN_ID",
    "PORT_ENV",
    "PROTOCOL_VERSION",
    "SERVER_VERSION",
    "TOKEN_ENV",
    "AdmissionStatistics",
    "BridgeStatistics",
    "ConnectionStatistics",
    "ControlPlane",
    "ControlPlaneConfig",
    "ControlPlaneConfigError",
    "ControlPlaneError",
    "ControlPlaneOptions",
    "ControlPlaneSection",
    "EventBridge",
    "SignIn",
    "WebSocketSessionPort",
    "WebSocketSessionStream",
    "WireError",
    "WireErrorCode",
    "WireUsageError",
    "client_token",
    "hash_token",
    "is_loopback_host",
    "lemon_control_plane_app",
    "local_token_path",
    "read_local_token",
]
