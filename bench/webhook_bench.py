"""The webhook ingress's speed on loopback, next to a bare Starlette endpoint, in the same run.

    .venv/bin/python bench/webhook_bench.py [--requests 2000] [--concurrency 16]

Each server runs in its own child process under uvicorn (the same settings for both), so the
client never shares its event loop:

* ``ingress``: the real :class:`lemon_webhooks.WebhookIngress` (signature verification, key
  hashing, the SQLite idempotency store with ``synchronous=FULL``, the exact response stored
  with its fence) submitting to the real Router and Gateway with an executor that answers at
  once (each accepted webhook is a real run in its own session);
* ``bare``: a Starlette endpoint that does one SQLite insert per request (same file settings:
  WAL, ``synchronous=FULL``, one writer thread) and answers 202.

Measured: accepted webhooks per second with fresh keys, replays per second (one key, the same
body), each with ``--concurrency`` clients; and the replay p50 latency with one client. The
fresh-key rate and its baseline are measured interleaved (``ROUNDS`` alternating slices of the
same requests, bare first), so a change in the machine's load falls on both.
Goals (issue 15): fresh keys >= 0.5x the bare endpoint; replay p50 <= 2 ms. Issue 32 raises
them to >= 0.6x in every run and a replay p50 <= 1 ms (the met/MISSED lines). Latency is also
measured with a hand-written keep-alive HTTP/1.1 client next to a do-nothing endpoint (the
floor): an httpx request alone costs about 1.3 ms of client time on a 2-core machine, more than
the replay goal, so the replay goal is judged on the hand-written client. Session keys
are under the webhook's own namespace (the only keys a webhook may address since issue 25).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

_SECRET_BYTES = b"b" * 32


def _child(kind: str, directory: str) -> None:
    """Serve ``kind`` on 127.0.0.1:<ephemeral>; print the port; serve until stdin closes."""
    import sqlite3
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import uvicorn

    async def main() -> None:
        app: Any
        cleanup: list[Any] = []
        if kind == "floor":
            # The least an HTTP answer costs on this machine: no body parsing, no store.
            async def floor(scope: Any, receive: Any, send: Any) -> None:
                while (await receive()).get("more_body"):
                    pass
                await send(
                    {
                        "type": "http.response.start",
                        "status": 202,
                        "headers": [(b"content-type", b"application/json")],
                    }
                )
                await send({"type": "http.response.body", "body": b'{"status":"accepted"}'})

            app = floor
        elif kind == "bare":
            from starlette.applications import Starlette
            from starlette.requests import Request
            from starlette.responses import Response
            from starlette.routing import Route

            pool = ThreadPoolExecutor(max_workers=1)
            conn = sqlite3.connect(
                Path(directory) / "bare.sqlite3", isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("CREATE TABLE IF NOT EXISTS hits (id TEXT PRIMARY KEY, body BLOB)")

            def insert(body: bytes) -> None:
                conn.execute("INSERT INTO hits VALUES (?, ?)", (uuid.uuid4().hex, body))

            async def endpoint(request: Request) -> Response:
                body = await request.body()
                await asyncio.get_running_loop().run_in_executor(pool, insert, body)
                return Response(b'{"status":"accepted"}', 202, media_type="application/json")

            app = Starlette(routes=[Route("/webhooks/bench", endpoint, methods=["POST"])])
        else:
            from lemon_core.bus import Bus
            from lemon_core.execution import ExecutionResult, RuntimeContext
            from lemon_core.sessions import SESSION_PORT
            from lemon_gateway import Gateway, GatewayConfig
            from lemon_infra import MemoryStore, SQLiteIdempotencyStore
            from lemon_router import Router, RouterConfig, RouterSessionPort
            from lemon_webhooks import (
                SessionPortSubmitter,
                Webhook,
                WebhookIngress,
                WebhookSecret,
            )

            class Instant:
                async def prepare(self, job: Any) -> Any:
                    return self

                async def execute(self, sink: Any) -> ExecutionResult:
                    return ExecutionResult(ok=True, answer="ok")

            bus = Bus()
            context = RuntimeContext(name="bench")
            gateway = Gateway(
                bus=bus,
                executor=Instant(),  # type: ignore[arg-type]  # a minimal executor
                store=MemoryStore(),
                config=GatewayConfig(max_concurrent_runs=64, record_run_history=False),
                runtime=context,
            )
            await gateway.start()
            router = Router(bus=bus, context=context, config=RouterConfig())
            await router.__aenter__()
            context.capabilities.register(SESSION_PORT, RouterSessionPort(router))
            store = await SQLiteIdempotencyStore.open(Path(directory) / "idempotency.sqlite3")
            app = WebhookIngress(
                webhooks={"bench": Webhook(id="bench", secret=WebhookSecret(_SECRET_BYTES))},
                store=store,
                submitter=SessionPortSubmitter(context.capabilities),
            )
            cleanup = [store.close, lambda: router.__aexit__(None, None, None), gateway.stop]
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", access_log=False, lifespan="off"
        )
        started = asyncio.Event()

        class Server(uvicorn.Server):
            async def startup(self, sockets: Any = None) -> None:
                await super().startup(sockets)
                started.set()

        server = Server(config)
        serving = asyncio.get_running_loop().create_task(server.serve())
        await started.wait()
        port = server.servers[0].sockets[0].getsockname()[1]
        print(port, flush=True)
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        threading.Thread(
            target=lambda: (sys.stdin.read(), loop.call_soon_threadsafe(done.set)), daemon=True
        ).start()
        await done.wait()
        server.should_exit = True
        await serving
        for close in cleanup:
            await close()

    asyncio.run(main())


class _Server:
    def __init__(self, kind: str, directory: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--child", kind, directory],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline())}/webhooks/bench"

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(60)


def _requests(count: int, *, replay: bool) -> list[tuple[bytes, dict[str, str]]]:
    from lemon_webhooks import WebhookSecret, sign_webhook

    secret = WebhookSecret(_SECRET_BYTES)
    out = []
    for i in range(count):
        body = json.dumps(
            {
                "prompt": "ping",
                # Keys under the webhook's own namespace (the only ones it may address).
                "session_key": f"agent:default:webhook:bench:channel:{'main' if replay else i}",
            }
        ).encode()
        now = int(time.time())
        msg_id = f"msg_{uuid.uuid4().hex}"  # unique per message, as Standard Webhooks requires
        out.append(
            (
                body,
                {
                    "content-type": "application/json",
                    "webhook-id": msg_id,
                    "webhook-timestamp": str(now),
                    "webhook-signature": sign_webhook(secret, msg_id, now, body),
                    "idempotency-key": "replayed-key" if replay else f"key-{uuid.uuid4().hex}",
                },
            )
        )
    return out


async def _throughput(
    url: str, requests: list[tuple[bytes, dict[str, str]]], clients: int
) -> float:
    queue = list(reversed(requests))
    statuses: list[int] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=60) as http:

        async def worker() -> None:
            while queue:
                body, headers = queue.pop()
                statuses.append((await http.post(url, content=body, headers=headers)).status_code)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        elapsed = time.perf_counter() - start
    bad = [s for s in statuses if s != 202]
    if bad:
        raise SystemExit(f"{url}: {len(bad)} answers were not 202 (e.g. {bad[0]})")
    return len(statuses) / elapsed


ROUNDS = 4


async def _interleaved(
    targets: list[tuple[str, bool]], count: int, clients: int, rounds: int = ROUNDS
) -> list[float]:
    """Requests per second of each ``(url, replay)`` target, ``count`` requests each, sent in
    ``rounds`` alternating slices; a target's rate is its requests over its own time."""
    sizes = [count // rounds + (1 if i < count % rounds else 0) for i in range(rounds)]
    spent = [0.0] * len(targets)
    for size in sizes:
        for i, (url, replay) in enumerate(targets):
            rps = await _throughput(url, _requests(size, replay=replay), clients)
            spent[i] += size / rps
    return [count / seconds for seconds in spent]


async def _latency_ms(url: str, requests: list[tuple[bytes, dict[str, str]]]) -> float:
    samples = []
    async with httpx.AsyncClient(timeout=60) as http:
        for body, headers in requests:
            start = time.perf_counter_ns()
            response = await http.post(url, content=body, headers=headers)
            samples.append((time.perf_counter_ns() - start) / 1e6)
            assert response.status_code == 202
    return statistics.median(samples)


async def _raw_latency_ms(url: str, requests: list[tuple[bytes, dict[str, str]]]) -> float:
    """p50 over one kept-alive HTTP/1.1 connection written by hand: what the server costs,
    without the ~1 ms an httpx request costs its client on this machine."""
    rest = url.split("//", 1)[1]
    hostport, path = rest.split("/", 1)
    host, port = hostport.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as httpx does
    samples = []
    try:
        for body, headers in requests:
            head = [f"POST /{path} HTTP/1.1", f"host: {hostport}", f"content-length: {len(body)}"]
            head += [f"{name}: {value}" for name, value in headers.items()]
            data = ("\r\n".join(head) + "\r\n\r\n").encode() + body
            start = time.perf_counter_ns()
            writer.write(data)
            answer = await reader.readuntil(b"\r\n\r\n")
            length, chunked = 0, False
            for line in answer.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"transfer-encoding" and b"chunked" in value.lower():
                    chunked = True
            if chunked:
                while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                    await reader.readexactly(size + 2)
                await reader.readuntil(b"\r\n")
            else:
                await reader.readexactly(length)
            samples.append((time.perf_counter_ns() - start) / 1e6)
            if not answer.startswith(b"HTTP/1.1 202"):
                raise SystemExit(f"{url}: answered {answer.splitlines()[0]!r}, not 202")
    finally:
        writer.close()
    return statistics.median(samples)


async def _bench(count: int, clients: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        ingress = _Server("ingress", directory)
        bare = _Server("bare", directory)
        floor = _Server("floor", directory)
        try:
            warm = 50
            await _throughput(bare.url, _requests(warm, replay=False), clients)
            await _throughput(ingress.url, _requests(warm, replay=False), clients)
            # Interleaved in rounds (bare, ingress, bare, ...), each side's rate over all of its
            # rounds: both sides see the same phases of a shared machine's load.
            bare_rps, fresh_rps = await _interleaved(
                [(bare.url, False), (ingress.url, False)], count, clients
            )
            replays = _requests(count, replay=True)
            await _throughput(ingress.url, replays[:1], 1)  # the original
            replay_rps = await _throughput(ingress.url, replays, clients)
            replay_p50 = await _latency_ms(ingress.url, replays[:500])
            bare_p50 = await _latency_ms(bare.url, _requests(500, replay=False))
            floor_p50 = await _latency_ms(floor.url, _requests(500, replay=False))
            raw_replay_p50 = await _raw_latency_ms(ingress.url, replays[:500])
            raw_bare_p50 = await _raw_latency_ms(bare.url, _requests(500, replay=False))
            raw_floor_p50 = await _raw_latency_ms(floor.url, _requests(500, replay=False))
        finally:
            ingress.close()
            bare.close()
            floor.close()
    print(f"requests per measurement: {count}, concurrent clients: {clients}")
    print(f"bare Starlette + 1 SQLite insert:   {bare_rps:8.0f} req/s   p50 {bare_p50:.2f} ms")
    print(
        f"ingress, fresh keys (accepted):    {fresh_rps:8.0f} req/s   "
        f"{fresh_rps / bare_rps:.2f}x bare (goal >= 0.5x)"
    )
    print(
        f"ingress, replays (same key+body):  {replay_rps:8.0f} req/s   "
        f"{replay_rps / bare_rps:.2f}x bare; replay p50 {replay_p50:.2f} ms (goal <= 2 ms)"
    )
    print("one client, p50 ms          httpx client   hand-written keep-alive client")
    print(f"  do-nothing endpoint       {floor_p50:10.3f}   {raw_floor_p50:10.3f}")
    print(f"  bare + 1 SQLite insert    {bare_p50:10.3f}   {raw_bare_p50:10.3f}")
    print(f"  ingress replay            {replay_p50:10.3f}   {raw_replay_p50:10.3f}")
    # The goals of issue 32 (met only in 3 of 3 consecutive runs: run the bench three times).
    # The replay p50 is judged on the hand-written client: the httpx client alone costs more
    # than the goal here (the do-nothing endpoint's httpx p50 shows it).
    fresh_met = fresh_rps / bare_rps >= 0.6
    replay_met = raw_replay_p50 <= 1.0
    print(f"goal fresh keys >= 0.6x bare: {'met' if fresh_met else 'MISSED'}")
    print(f"goal replay p50 <= 1 ms: {'met' if replay_met else 'MISSED'}")


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        _child(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    asyncio.run(_bench(args.requests, args.concurrency))


if __name__ == "__main__":
    main()
