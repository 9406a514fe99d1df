"""The full-screen terminal UI: a Textual client of a Lemon daemon's control plane.

It speaks only the session port over the control plane's WebSocket
(:class:`lemon_control_plane.client.WebSocketSessionPort`), so it works against any
Lemon-compatible daemon, local or remote.
"""

from __future__ import annotations

from lemon_tui._app import DEFAULT_SESSION, ClientPort, Connector, LemonTUI
from lemon_tui._connect import websocket_connector
from lemon_tui._theme import pick_shade

__all__ = [
    "DEFAULT_SESSION",
    "ClientPort",
    "Connector",
    "LemonTUI",
    "pick_shade",
    "websocket_connector",
]
