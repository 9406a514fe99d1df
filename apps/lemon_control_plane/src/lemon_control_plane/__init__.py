"""lemon_control_plane: the daemon's control plane, the session port on a WebSocket.

A server Lemon's own terminal client can use unmodified: ``GET /healthz``, ``GET /ws`` with
the ``connect`` -> ``hello-ok`` handshake, the methods of :attr:`ControlPlane.methods` and the
events of :data:`EVENTS`, all over one :class:`~lemon_core.sessions.SessionPort` (never the bus,
the router, the store or the executor).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lemon_core.facade import lazy_exports

if TYPE_CHECKING:
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

#: Where each facade name lives (the lazy loader reads it; the TYPE_CHECKING imports
#: repeat it for type checkers, ``__all__`` for the architecture gate).
_EXPORTS: Final[dict[str, tuple[str, str]]] = {
    "AdmissionStatistics": ("lemon_control_plane._admission", "AdmissionStatistics"),
    "lemon_control_plane_app": ("lemon_control_plane._boot", "lemon_control_plane_app"),
    "ConnectionStatistics": ("lemon_control_plane._connection", "ConnectionStatistics"),
    "SignIn": ("lemon_control_plane._logins", "SignIn"),
    "ControlPlaneOptions": ("lemon_control_plane._section", "ControlPlaneOptions"),
    "ControlPlaneSection": ("lemon_control_plane._section", "ControlPlaneSection"),
    "BridgeStatistics": ("lemon_control_plane.bridge", "BridgeStatistics"),
    "EventBridge": ("lemon_control_plane.bridge", "EventBridge"),
    "WebSocketSessionPort": ("lemon_control_plane.client", "WebSocketSessionPort"),
    "WebSocketSessionStream": ("lemon_control_plane.client", "WebSocketSessionStream"),
    "DEFAULT_HOST": ("lemon_control_plane.config", "DEFAULT_HOST"),
    "DEFAULT_PORT": ("lemon_control_plane.config", "DEFAULT_PORT"),
    "PORT_ENV": ("lemon_control_plane.config", "PORT_ENV"),
    "TOKEN_ENV": ("lemon_control_plane.config", "TOKEN_ENV"),
    "ControlPlaneConfig": ("lemon_control_plane.config", "ControlPlaneConfig"),
    "hash_token": ("lemon_control_plane.config", "hash_token"),
    "is_loopback_host": ("lemon_control_plane.config", "is_loopback_host"),
    "ERROR_CODES": ("lemon_control_plane.errors", "ERROR_CODES"),
    "ControlPlaneConfigError": ("lemon_control_plane.errors", "ControlPlaneConfigError"),
    "ControlPlaneError": ("lemon_control_plane.errors", "ControlPlaneError"),
    "WireError": ("lemon_control_plane.errors", "WireError"),
    "WireErrorCode": ("lemon_control_plane.errors", "WireErrorCode"),
    "WireUsageError": ("lemon_control_plane.errors", "WireUsageError"),
    "LOCAL_TOKEN_ID": ("lemon_control_plane.local_token", "LOCAL_TOKEN_ID"),
    "client_token": ("lemon_control_plane.local_token", "client_token"),
    "local_token_path": ("lemon_control_plane.local_token", "local_token_path"),
    "read_local_token": ("lemon_control_plane.local_token", "read_local_token"),
    "AUTH_COOKIE": ("lemon_control_plane.server", "AUTH_COOKIE"),
    "EVENTS": ("lemon_control_plane.server", "EVENTS"),
    "PROTOCOL_VERSION": ("lemon_control_plane.server", "PROTOCOL_VERSION"),
    "SERVER_VERSION": ("lemon_control_plane.server", "SERVER_VERSION"),
    "ControlPlane": ("lemon_control_plane.server", "ControlPlane"),
}

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

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
