"""The control plane's speed and memory, measured on loopback with real sockets.

    .venv/bin/python bench/control_plane_bench.py [--deltas 300] [--clients 1,10,100]

1. Fan-out: one text delta to N connected WebSocket clients. A real Router and Gateway run a
   paced executor that calls ``sink.delta`` once and waits until every client has it; each
   client records the time from the ``sink.delta`` call to its receipt of the ``chat`` frame.
   Next to it, in the same run, a bare Starlette WebSocket broadcast loop (``for ws in sockets:
   await ws.send_text(frame)``) paced the same way. p50 / p99 over all receipts.
2. ``chat.send`` -> ``res``: request to reply on one connection (the run itself is instant).
3. Memory: the RSS of an idle ``lemon serve`` subprocess, then with 1,000 idle connections.

Goals (issue "daemon"): fan-out <= 1.5x the bare loop, p99 <= 5 ms at 100 clients; chat.send
p50 <= 2 ms; idle <= 80 MB; 1,000 idle connections <= 150 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets.asyncio.client import ClientConnection, connect

from lemon_control_plane import ControlPlane, ControlPlaneConfig
from lemon_control_plane.config import TOKEN_ENV, hash_token
from lemon_core.bus import Bus
from lemon_core.execution import (
    ExecutionJob,
    ExecutionResult,
    ExecutionSink,
    RuntimeContext,
)
from lemon_gateway import Gateway
from lemon_router import Router, RouterConfig, RouterSessionPort

SESSION = "agent:bench:main"


class _Paced:
    """Sends ``deltas`` deltas, each once all ``clients`` got the previous one."""

    def __init__(self, deltas: int, clients: int) -> None:
        self.deltas, self.clients = deltas, clients
        self.sent: dict[int, int] = {}
        self.all = asyncio.Event()
        self.seen = 0

    async def execute(self, sink: ExecutionSink) -> ExecutionResult:
        for seq in range(1, self.deltas + 1):
            self.all.clear()
            self.seen = 0
            self.sent[seq] = time.perf_counter_ns()
            sink.delta("x")
            await self.all.wait()
        return ExecutionResult(ok=True, answer="x" * self.deltas)

    def received(self) -> None:
        self.seen += 1
        if self.seen == self.clients:
            self.all.set()


class _Executor:
    def __init__(self) -> None:
        self.paced: _Paced | None = None

    async def prepare(self, job: ExecutionJob) -> Any:
        if self.paced is None or job.prompt != "paced":
            return _Instant()
        return self.paced


class _Instant:
    async def execute(self, sink: ExecutionSink) -> ExecutionResult:
        return ExecutionResult(ok=True, answer="ok")


def _pct(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1e6


#: Every bind requires a token (loopback too): the bench's in-process plane and its
#: ``lemon serve`` are given this one, and each client presents it in ``connect``.
TOKEN = "bench-token"


async def _hello(ws: ClientConnection) -> None:
    params = {"auth": {"token": TOKEN}}
    await ws.send(json.dumps({"type": "req", "id": "c", "method": "connect", "params": params}))
    assert json.loads(await ws.recv())["type"] == "hello-ok"


async def _control_plane(deltas: int, clients: int) -> tuple[list[int], list[float]]:
    executor = _Executor()
    context = RuntimeContext()
    latencies: list[int] = []
    send_ms: list[float] = []
    async with (
        Bus() as bus,
        Gateway(bus=bus, executor=executor, runtime=context),
        Router(bus=bus, context=context, config=RouterConfig(idle_timeout_ms=None)) as router,
        # Every bench client connects from 127.0.0.1: lift the per-address cap (64) for it.
        ControlPlane(
            RouterSessionPort(router),
            ControlPlaneConfig(
                port=0,
                max_connections_per_client=max(64, clients),
                token_hashes=frozenset({hash_token(TOKEN)}),
            ),
        ) as plane,
    ):
        sockets = [await connect(plane.ws_url, max_size=None) for _ in range(clients)]
        for ws in sockets:
            await _hello(ws)
        first = sockets[0]
        # chat.send -> res, with instant runs (each awaited to its end before the next).
        for n in range(200):
            rid = f"s{n}"
            started = time.perf_counter_ns()
            await first.send(
                json.dumps(
                    {
                        "type": "req",
                        "id": rid,
                        "method": "chat.send",
                        "params": {"sessionKey": f"agent:bench:s{n % 20}", "prompt": "hi"},
                    }
                )
            )
            while True:
                frame = json.loads(await first.recv())
                if frame.get("type") == "res" and frame["id"] == rid:
                    send_ms.append((time.perf_counter_ns() - started) / 1e6)
                    break
        executor.paced = paced = _Paced(deltas, clients)
        done = asyncio.Event()

        async def reader(ws: ClientConnection) -> None:
            while True:
                frame = json.loads(await ws.recv())
                if frame.get("event") == "chat":
                    seq = frame["payload"]["seq"]
                    latencies.append(time.perf_counter_ns() - paced.sent[seq])
                    paced.received()
                elif (
                    frame.get("event") == "agent"
                    and frame["payload"]["type"] == "completed"
                    and frame["payload"]["sessionKey"] == SESSION
                ):
                    return

        readers = [asyncio.create_task(reader(ws)) for ws in sockets]
        await first.send(
            json.dumps(
                {
                    "type": "req",
                    "id": "paced",
                    "method": "chat.send",
                    "params": {"sessionKey": SESSION, "prompt": "paced"},
                }
            )
        )
        await asyncio.gather(*readers)
        done.set()
        for ws in sockets:
            await ws.close()
    return latencies, send_ms


async def _bare(deltas: int, clients: int) -> list[int]:
    sockets: list[WebSocket] = []
    joined = asyncio.Event()

    async def endpoint(ws: WebSocket) -> None:
        await ws.accept()
        sockets.append(ws)
        if len(sockets) == clients:
            joined.set()
        try:
            while True:
                await ws.receive_text()
        except WebSocketDisconnect:
            return

    app = Starlette(routes=[WebSocketRoute("/ws", endpoint)])
    config = uvicorn.Config(app, port=0, log_config=None, lifespan="off", ws="websockets-sansio")
    server = uvicorn.Server(config)
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    url = f"ws://127.0.0.1:{sock.getsockname()[1]}/ws"
    task = asyncio.create_task(server.serve(sockets=[sock]))
    clients_ws = [await connect(url, max_size=None) for _ in range(clients)]
    await joined.wait()
    latencies: list[int] = []
    got = asyncio.Event()
    count = 0
    sent_at = 0

    async def reader(ws: ClientConnection) -> None:
        nonlocal count
        for _ in range(deltas):
            await ws.recv()
            latencies.append(time.perf_counter_ns() - sent_at)
            count += 1
            if count == clients:
                got.set()

    readers = [asyncio.create_task(reader(ws)) for ws in clients_ws]
    for seq in range(1, deltas + 1):
        got.clear()
        count = 0
        sent_at = time.perf_counter_ns()
        frame = json.dumps(
            {
                "type": "event",
                "event": "chat",
                "seq": seq,
                "payload": {
                    "type": "delta",
                    "runId": "r",
                    "sessionKey": SESSION,
                    "seq": seq,
                    "text": "x",
                },
            }
        )
        for ws in sockets:
            await ws.send_text(frame)
        await got.wait()
    await asyncio.gather(*readers)
    for ws in clients_ws:
        await ws.close()
    server.should_exit = True
    await task
    return latencies


def _rss_mb(pid: int) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmRSS:\s+(\d+) kB", text)
    return int(found[1]) / 1024 if found else float("nan")


async def _memory(connections: int) -> tuple[float, float]:
    lemon = Path(sys.executable).with_name("lemon")
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "LEMON_HOME": str(Path(tmp) / "home"), "HOME": tmp, TOKEN_ENV: TOKEN}
        proc = await asyncio.to_thread(
            subprocess.Popen,
            [str(lemon), "serve", "--port", "0", "--cwd", tmp],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert proc.stdout is not None
            line = await asyncio.to_thread(proc.stdout.readline)
            found = re.search(r"listening on http://([\d.]+:\d+)", line)
            assert found, line
            url = f"ws://{found[1]}/ws"
            idle = _rss_mb(proc.pid)
            sockets = []
            for n in range(connections):
                # Spread over loopback addresses: the daemon holds at most 64 per address.
                ws = await connect(url, local_addr=(f"127.0.0.{2 + n // 50}", 0))
                await _hello(ws)
                sockets.append(ws)
            loaded = _rss_mb(proc.pid)
            for ws in sockets:
                await ws.close()
        finally:
            proc.terminate()
            proc.wait(60)
            if proc.stdout is not None:
                proc.stdout.close()
    return idle, loaded


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deltas", type=int, default=300)
    parser.add_argument("--clients", default="1,10,100")
    parser.add_argument("--connections", type=int, default=1000)
    args = parser.parse_args()
    print(f"fan-out of one delta, sink -> client receipt, ms ({args.deltas} deltas)")
    heads = ("plane p50", "plane p99", "bare p50", "bare p99", "ratio p50", "ratio p99")
    print(f"{'clients':>7} " + " ".join(f"{h:>10}" for h in heads))
    send_ms: list[float] = []
    for n in (int(x) for x in args.clients.split(",")):
        plane, sends = await _control_plane(args.deltas, n)
        send_ms = send_ms or sends
        bare = await _bare(args.deltas, n)
        p50, p99, b50, b99 = _pct(plane, 0.5), _pct(plane, 0.99), _pct(bare, 0.5), _pct(bare, 0.99)
        cells = (f"{p50:.3f}", f"{p99:.3f}", f"{b50:.3f}", f"{b99:.3f}")
        ratios = (f"{p50 / b50:.2f}x", f"{p99 / b99:.2f}x")
        print(f"{n:>7} " + " ".join(f"{c:>10}" for c in (*cells, *ratios)))
    ordered = sorted(send_ms)
    print(
        f"chat.send -> res: p50 {ordered[len(ordered) // 2]:.3f} ms, "
        f"p99 {ordered[int(0.99 * len(ordered))]:.3f} ms ({len(ordered)} sends)"
    )
    idle, loaded = await _memory(args.connections)
    print(f"lemon serve RSS: idle {idle:.1f} MB")
    print(f"lemon serve RSS with {args.connections} idle connections: {loaded:.1f} MB")


if __name__ == "__main__":
    asyncio.run(main())
