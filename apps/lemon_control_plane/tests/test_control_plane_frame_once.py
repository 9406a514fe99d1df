"""An event broadcast to many connections is framed once, yet each frame is exactly what
``encode_event`` writes for that connection: its own ``seq``, the ``stateVersion`` current when
the frame is sent, and a payload whose text happens to look like a seq left intact."""

from __future__ import annotations

import json
from typing import Any

from lemon_control_plane._connection import Connection
from lemon_control_plane._frames import encode, encode_event


class _Socket:
    """A socket whose sends complete at once (what a socket with room in its buffer does)."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def send(self, text: str) -> None:
        self.sent.append(text)

    async def close(self, code: int, reason: str) -> None:
        return None


def _online(sock: _Socket, state: list[bytes]) -> Connection:
    conn = Connection("c", send=sock.send, close=sock.close, state_version=lambda: state[0])
    conn.online = True
    return conn


async def test_each_connection_gets_its_own_seq_and_the_current_state_version() -> None:
    state = [encode({"presence": 1})]
    socks = [_Socket() for _ in range(3)]
    conns = [_online(s, state) for s in socks]
    conns[0].push_event(encode("chat"), encode({"warm": True}))  # conn 0 is one event ahead
    name, tricky = encode("chat"), encode({"text": ',"seq":0,', "n": 1})
    for conn in conns:
        conn.push_event(name, tricky)
    state[0] = encode({"presence": 2})
    second = encode({"n": 2})
    for conn in conns:
        conn.push_event(name, second)
    seen: list[list[dict[str, Any]]] = [[json.loads(t) for t in s.sent] for s in socks]
    assert [[f["seq"] for f in frames] for frames in seen] == [[1, 2, 3], [1, 2], [1, 2]]
    for sock, conn_offset in zip(socks, (1, 0, 0), strict=True):
        assert sock.sent[conn_offset] == encode_event(
            name, conn_offset + 1, tricky, encode({"presence": 1})
        )
        assert sock.sent[conn_offset + 1] == encode_event(
            name, conn_offset + 2, second, encode({"presence": 2})
        )
    assert all(frames[-1]["stateVersion"] == {"presence": 2} for frames in seen)
    assert all(frames[-2]["payload"]["text"] == ',"seq":0,' for frames in seen)


async def test_a_connection_without_a_state_version_gets_frames_without_it() -> None:
    sock = _Socket()
    conn = Connection("c", send=sock.send, close=sock.close)
    conn.online = True
    payload = encode({"n": 1})
    conn.push_event(encode("chat"), payload)
    conn.push_event(encode("chat"), payload)
    assert sock.sent == [
        encode_event(encode("chat"), 1, payload),
        encode_event(encode("chat"), 2, payload),
    ]
