"""A WebSocket client of the control plane for tests (and tools): requests by id, every frame
recorded, waits by predicate (never by sleeping).

Every daemon requires a token (on loopback the home's local token), so a client is made with
the one it presents: ``wire_client(plane.ws_url, token=plane.local_token)``, or
``plane_client(plane)`` for the owner of an in-process plane. ``connect()`` sends it as
``params.auth.token`` unless the call names its own ``auth``; ``token=None`` per client opens
one that presents nothing (to test refusals)."""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from websockets.asyncio.client import ClientConnection, connect

if TYPE_CHECKING:
    from lemon_control_plane.server import ControlPlane
    from lemon_core.sessions import SessionEvent, SessionStream

__all__ = [
    "WAIT_S",
    "ClientFactory",
    "WireClient",
    "plane_client",
    "self_signed_certificate",
    "trusting",
    "until_run_end",
    "wire_client",
]

WAIT_S = 30.0
_FACTORY_TOKEN: Final = object()  # "the token the factory was made with"


async def until_run_end(stream: SessionStream, run_id: str) -> list[SessionEvent]:
    """Every event of ``stream`` up to and with ``run_id``'s ``RunEnded``."""
    from lemon_core.sessions import RunEnded

    seen: list[SessionEvent] = []
    while True:
        event = await stream.get()
        seen.append(event)
        if isinstance(event, RunEnded) and event.run_id == run_id:
            return seen


class WireClient:
    """A WebSocket client of the control plane: requests by id, every frame recorded."""

    def __init__(self, ws: ClientConnection, token: str | None = None) -> None:
        self.ws = ws
        self.token = token
        """What :meth:`connect` presents as ``params.auth.token`` (``None``: nothing)."""
        self.frames: list[dict[str, Any]] = []
        self._read = 0
        self._n = 0

    async def send_raw(self, data: str | bytes) -> None:
        await self.ws.send(data)

    async def next_frame(self) -> dict[str, Any]:
        if self._read < len(self.frames):
            frame = self.frames[self._read]
        else:
            raw = await asyncio.wait_for(self.ws.recv(), WAIT_S)
            assert isinstance(raw, str), "the server sends text frames only"
            frame = json.loads(raw)
            self.frames.append(frame)
        self._read += 1
        return frame

    async def until(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first frame (seen or to come) that matches."""
        for frame in self.frames:
            if predicate(frame):
                return frame
        while True:
            frame = await self.next_frame()
            if predicate(frame):
                return frame

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a req; return its res (the frames before it stay recorded)."""
        self._n += 1
        rid = f"r{self._n}"
        frame: dict[str, Any] = {"type": "req", "id": rid, "method": method}
        if params is not None:
            frame["params"] = params
        await self.ws.send(json.dumps(frame))
        return await self.until(lambda f: f.get("type") == "res" and f.get("id") == rid)

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        res = await self.request(method, params)
        assert res["ok"], res
        return res["payload"]

    async def connect(self, **params: Any) -> dict[str, Any]:
        if self.token is not None and "auth" not in params:
            params["auth"] = {"token": self.token}
        await self.ws.send(
            json.dumps(
                {
                    "type": "req",
                    "id": "c1",
                    "method": "connect",
                    "params": {"role": "operator", "client": {"id": "lemon-tui@local-1"}, **params},
                }
            )
        )
        return await self.next_frame()

    async def drain(self) -> None:
        """Read frames until the server closes the socket (raises ``ConnectionClosed``)."""
        while True:
            await self.next_frame()

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        return [
            f
            for f in self.frames
            if f.get("type") == "event" and (name is None or f["event"] == name)
        ]

    async def event(self, name: str, **fields: Any) -> dict[str, Any]:
        return await self.until(
            lambda f: (
                f.get("type") == "event"
                and f.get("event") == name
                and all(f.get("payload", {}).get(k) == v for k, v in fields.items())
            )
        )

    async def completed(self, run_id: str) -> dict[str, Any]:
        return await self.event("agent", type="completed", runId=run_id)


ClientFactory = Callable[..., AbstractAsyncContextManager[WireClient]]


def wire_client(ws_url: str, *, token: str | None = None) -> ClientFactory:
    """``async with wire_client(url, token=...)(handshake=True, token=..., **connect_kwargs)
    as c``: ``token`` is what the handshake presents (the per-client one wins)."""
    factory_token = token

    @asynccontextmanager
    async def open_client(
        *, handshake: bool = True, token: object = _FACTORY_TOKEN, **kwargs: Any
    ) -> AsyncIterator[WireClient]:
        # Unbounded receive queue: a test that leaves frames unread must not stop the client
        # reading the socket (it would then miss the server's close frame and wait out the
        # close timeout).
        kwargs.setdefault("max_queue", None)
        presented = factory_token if token is _FACTORY_TOKEN else token
        if presented is not None and not isinstance(presented, str):
            raise TypeError("token is a string or None")
        async with connect(ws_url, **kwargs) as ws:
            client = WireClient(ws, presented)
            if handshake:
                hello = await client.connect()
                if hello.get("type") != "hello-ok":
                    raise AssertionError(f"the handshake failed: {hello}")
            yield client

    return open_client


def plane_client(plane: ControlPlane) -> ClientFactory:
    """A client factory of an in-process plane that presents its owner's (local) token."""
    return wire_client(plane.ws_url, token=plane.local_token)


def self_signed_certificate(folder: Path) -> tuple[Path, Path] | None:
    """A throw-away certificate for ``localhost`` and ``127.0.0.1`` and its key (PEM files in
    ``folder``), made with the ``openssl`` command; ``None`` when there is no ``openssl``."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def trusting(cert: Path) -> ssl.SSLContext:
    """A client context that trusts exactly ``cert`` (hostnames checked)."""
    context = ssl.create_default_context(cafile=str(cert))
    return context
