"""How the app reaches a daemon: the control plane's WebSocket session port (imported when
the first connection is opened, after the first paint)."""

from __future__ import annotations

import ssl as _ssl

from lemon_tui._app import ClientPort, Connector

__all__ = ["websocket_connector"]


def websocket_connector(
    ws_url: str,
    *,
    token: str | None = None,
    stream_max_entries: int = 4096,
    ssl: _ssl.SSLContext | None = None,
) -> Connector:
    """A :data:`~lemon_tui.Connector` that opens a new ``WebSocketSessionPort`` each call
    (a dropped connection is replaced by a new one), presenting ``token`` and trusting a
    ``wss://`` server by ``ssl``. The port it returns can also call the control plane's
    advertised methods by name (``call``: see ``lemon_tui._daemon``)."""

    async def connect() -> ClientPort:
        from websockets.exceptions import WebSocketException

        from lemon_control_plane.client import WebSocketSessionPort
        from lemon_control_plane.errors import ControlPlaneError

        port = WebSocketSessionPort(
            ws_url, token=token, stream_max_entries=stream_max_entries, ssl=ssl
        )
        try:
            opened: ClientPort = await port.__aenter__()
        except WebSocketException as exc:  # a bad URL, a refused upgrade: say so, no traceback
            raise ControlPlaneError(f"cannot connect to {ws_url}: {exc}") from None
        return opened

    return connect
