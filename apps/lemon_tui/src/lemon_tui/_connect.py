"""How the app reaches a daemon: the control plane's WebSocket session port (imported when
the first connection is opened, after the first paint)."""

from __future__ import annotations

from typing import Any

from lemon_tui._app import ClientPort, Connector

__all__ = ["websocket_connector"]


def websocket_connector(
    ws_url: str, *, token: str | None = None, stream_max_entries: int = 4096
) -> Connector:
    """A :data:`~lemon_tui.Connector` that opens a new ``WebSocketSessionPort`` each call
    (a dropped connection is replaced by a new one). The port it returns can also call the
    control plane's advertised methods (:class:`lemon_tui._daemon.DaemonCalls`)."""

    async def connect() -> ClientPort:
        from websockets.exceptions import WebSocketException

        from lemon_control_plane.errors import ControlPlaneError

        port = _port_class()(ws_url, token=token, stream_max_entries=stream_max_entries)
        try:
            opened: ClientPort = await port.__aenter__()
        except WebSocketException as exc:  # a bad URL, a refused upgrade: say so, no traceback
            raise ControlPlaneError(f"cannot connect to {ws_url}: {exc}") from None
        return opened

    return connect


_CLASS: list[type[Any]] = []


def _port_class() -> type[Any]:
    """The session port client with a by-name call of the other advertised methods. Built on
    first use: importing the client pulls in its stack, which the first paint does not need.

    The client offers no public by-name request yet; this uses its request path
    (``_call``: the same framing, timeout and error mapping as its ``port.*`` methods)."""
    if not _CLASS:
        from lemon_control_plane.client import WebSocketSessionPort

        class TuiSessionPort(WebSocketSessionPort):
            @property
            def advertised(self) -> frozenset[str]:
                features = self.hello.get("features") or {}
                return frozenset(m for m in features.get("methods") or () if isinstance(m, str))

            @property
            def server_version(self) -> str:
                return str((self.hello.get("server") or {}).get("version") or "unknown")

            async def call(self, method: str, params: dict[str, Any]) -> Any:
                return await self._call(method, params)

        _CLASS.append(TuiSessionPort)
    return _CLASS[0]
