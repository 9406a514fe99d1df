"""The OpenAI-compatible ``/v1``: streaming first byte and first delta of
``/v1/chat/completions`` next to the control plane's ``chat.send`` -> first ``chat`` delta on
the same daemon, and 50 concurrent non-streaming requests, measured in the same run.

    .venv/bin/python bench/openai_api_bench.py [--prompts 40] [--warmup 5] [--concurrent 50]

One daemon (the ``daemon`` profile on the offline scripted model, a fresh home, ``[openai_api]
enabled``, the control plane on 127.0.0.1:<ephemeral>) runs in this process; the clients are
real sockets on loopback. They take turns, one prompt at a time (``/echo`` of a sentence, each
awaited to its end):

- ``chat.send``: a raw WebSocket client (the control plane's wire); from sending the
  ``chat.send`` frame to the first ``chat`` delta event of that session;
- ``/v1 first byte``: ``httpx`` streaming ``POST /v1/chat/completions``; from the request to
  the first body byte (the SSE's role chunk, sent once the run is admitted);
- ``/v1 first delta``: the same request, to the first chunk carrying content (the run's first
  text). The goal is judged on this one: it is the same moment ``chat.send``'s figure stops at.

Then ``--concurrent`` non-streaming requests at once (each a new session); every one must be
a 200 with its own answer, while the gateway runs at most ``max_concurrent_runs`` (sampled on
every session event); next to it, the same number of ``chat.send`` at once, each awaited to its
run's end. Goals (issue 30): /v1 first delta <= 1.2 x chat.send + 1 ms; the concurrent
requests complete with no error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

PROMPT = "/echo the quick brown fox jumps over the lazy dog"


async def _ws(url: str, token: str) -> ClientConnection:
    # A bench socket stops reading after its run (every session's events keep coming): do not
    # wait long for the close handshake behind the unread frames.
    ws = await connect(url, max_size=None, close_timeout=0.2)
    params = {"role": "operator", "client": {"id": "bench"}, "auth": {"token": token}}
    await ws.send(json.dumps({"type": "req", "id": "c", "method": "connect", "params": params}))
    hello = json.loads(await ws.recv())
    if hello.get("type") != "hello-ok":
        raise SystemExit(f"the control plane refused the bench: {hello}")
    return ws


async def _chat_send(ws: ClientConnection, key: str, rid: str) -> float:
    """Seconds from ``chat.send`` to the first ``chat`` delta of ``key``; waits for its end."""
    started = time.perf_counter()
    params = {"sessionKey": key, "prompt": PROMPT, "queueMode": "followup"}
    await ws.send(json.dumps({"type": "req", "id": rid, "method": "chat.send", "params": params}))
    first: float | None = None
    while True:
        frame = json.loads(await ws.recv())
        if frame.get("type") == "res" and frame.get("id") == rid and not frame.get("ok"):
            raise SystemExit(f"chat.send refused: {frame}")
        payload = frame.get("payload") or {}
        if payload.get("sessionKey") != key:
            continue
        if first is None and frame.get("event") == "chat" and payload.get("type") == "delta":
            first = time.perf_counter() - started
        if frame.get("event") == "agent" and payload.get("type") == "completed":
            if first is None:
                raise SystemExit(f"the run of {key} streamed no text")
            return first


async def _v1_stream(http: httpx.AsyncClient, user: str) -> tuple[float, float]:
    """Seconds to the first body byte and to the first content delta of one streamed answer."""
    body = {
        "model": "lemon",
        "user": user,
        "stream": True,
        "messages": [{"role": "user", "content": PROMPT}],
    }
    started = time.perf_counter()
    first_byte: float | None = None
    first_delta: float | None = None
    buffer = b""
    async with http.stream("POST", "/v1/chat/completions", json=body) as response:
        if response.status_code != 200:
            raise SystemExit(f"/v1 answered {response.status_code}: {await response.aread()!r}")
        async for chunk in response.aiter_raw():
            if first_byte is None:
                first_byte = time.perf_counter() - started
            buffer += chunk
            while first_delta is None and b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                data = event.removeprefix(b"data: ")
                if data == b"[DONE]":
                    break
                choices = json.loads(data).get("choices") or [{}]
                if choices[0].get("delta", {}).get("content"):
                    first_delta = time.perf_counter() - started
    if first_byte is None or first_delta is None:
        raise SystemExit("/v1 streamed no text")
    return first_byte, first_delta


async def _concurrent_v1(
    http: httpx.AsyncClient, n: int, gateway: Any, port: Any
) -> tuple[float, int]:
    """Wall seconds for ``n`` non-streaming requests at once; raises on any error."""

    async def one(i: int) -> None:
        text = f"/echo answer number {i}"
        response = await http.post(
            "/v1/chat/completions",
            json={"model": "lemon", "messages": [{"role": "user", "content": text}]},
        )
        if response.status_code != 200:
            raise SystemExit(f"request {i}: {response.status_code} {response.text}")
        answer = response.json()["choices"][0]["message"]["content"]
        if answer != f"answer number {i}":
            raise SystemExit(f"request {i} got another answer: {answer!r}")

    peak = 0
    events = port.watch_all()

    async def sample() -> None:  # on every session event: the gateway's slots in use
        nonlocal peak
        while True:
            await events.get()
            peak = max(peak, gateway.statistics().slots.in_flight)

    sampler = asyncio.ensure_future(sample())
    started = time.perf_counter()
    try:
        await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        took = time.perf_counter() - started
        events.close()
        sampler.cancel()
        await asyncio.wait({sampler})
    return took, peak


async def _concurrent_ws(url: str, token: str, n: int) -> float:
    sockets = [await _ws(url, token) for _ in range(n)]
    started = time.perf_counter()
    await asyncio.gather(*(_chat_send(ws, f"bench:c{i}", f"c{i}") for i, ws in enumerate(sockets)))
    took = time.perf_counter() - started
    await asyncio.gather(*(ws.close() for ws in sockets))
    return took


async def _run(prompts: int, warmup: int, concurrent: int) -> dict[str, Any]:
    from lemon_control_plane import ControlPlane, ControlPlaneOptions
    from lemon_core.config import load_config
    from lemon_core.execution import ENGINE_RUNTIME
    from lemon_core.sessions import SESSION_PORT
    from lemon_runtime import Runtime

    seen: dict[str, Any] = {"chat.send": [], "first byte": [], "first delta": []}
    with tempfile.TemporaryDirectory() as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        home.mkdir()
        work.mkdir()
        (home / "config.toml").write_text("[openai_api]\nenabled = true\n", encoding="utf-8")
        loaded = load_config(home=home, cwd=work, environ={})
        # Every bench client connects from 127.0.0.1: lift the per-address cap for it.
        settings = {"max_connections_per_client": max(64, 2 * concurrent)}
        options = [ControlPlaneOptions(port=0, cwd=str(work), settings=settings)]
        async with Runtime(profile="daemon", config=loaded, options=options) as runtime:
            plane = runtime.handle("lemon_control_plane")
            assert isinstance(plane, ControlPlane)
            token = plane.local_token
            assert token is not None
            gateway = runtime.context.capabilities.require(ENGINE_RUNTIME)
            port = runtime.context.capabilities.require(SESSION_PORT)
            ws = await _ws(plane.ws_url, token)
            limits = httpx.Limits(max_connections=2 * concurrent)
            async with httpx.AsyncClient(
                base_url=plane.url,
                headers={"authorization": f"Bearer {token}"},
                timeout=120,
                limits=limits,
            ) as http:
                for i in range(warmup + prompts):
                    sent = await _chat_send(ws, "bench:ws", f"s{i}")
                    byte, delta = await _v1_stream(http, "bench-stream")
                    if i >= warmup:
                        seen["chat.send"].append(sent)
                        seen["first byte"].append(byte)
                        seen["first delta"].append(delta)
                seen["concurrent"], seen["peak"] = await _concurrent_v1(
                    http, concurrent, gateway, port
                )
                seen["slots"] = gateway.statistics().slots.max
            await ws.close()
            seen["concurrent ws"] = await _concurrent_ws(plane.ws_url, token, concurrent)
    return seen


def _row(label: str, values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"{label:<52}{statistics.median(values) * 1e3:>8.2f}ms{p90 * 1e3:>8.2f}ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--concurrent", type=int, default=50)
    args = parser.parse_args()
    seen = asyncio.run(_run(args.prompts, args.warmup, args.concurrent))
    base = statistics.median(seen["chat.send"])
    delta = statistics.median(seen["first delta"])
    limit = 1.2 * base + 0.001
    print(f"prompt -> first text, medians over {args.prompts} prompts (same daemon, same run)")
    print(f"{'path':<52}{'median':>10}{'p90':>10}")
    print(_row("control plane chat.send -> first chat delta", seen["chat.send"]))
    print(_row("/v1/chat/completions stream -> first byte", seen["first byte"]))
    print(_row("/v1/chat/completions stream -> first delta", seen["first delta"]))
    verdict = "met" if delta <= limit else "MISSED"
    print(
        f"goal /v1 first delta <= 1.2 x chat.send + 1 ms ({limit * 1e3:.2f} ms): {verdict} "
        f"({delta * 1e3:.2f} ms = {delta / base:.2f} x, +{(delta - base) * 1e3:.2f} ms)"
    )
    n = args.concurrent
    print(
        f"{n} concurrent non-streaming /v1 requests: {seen['concurrent'] * 1e3:.0f} ms wall, "
        f"all 200 with their own answer; gateway slots in use at most {seen['peak']} "
        f"of {seen['slots']} (next to {n} concurrent chat.send to their end: "
        f"{seen['concurrent ws'] * 1e3:.0f} ms)"
    )
    print(f"goal {n} concurrent requests complete with no error: met")


if __name__ == "__main__":
    main()
