"""``lemon acp``: ``session/prompt`` -> first ``agent_message_chunk``, next to the terminal UI's
path (a WebSocket session-port client: ``submit`` -> first ``TextDelta``) on the same daemon,
measured in the same run.

    .venv/bin/python bench/acp_bench.py [--prompts 40] [--warmup 5]

One daemon (the ``daemon`` profile on the offline scripted model, a fresh home, the control
plane on 127.0.0.1:<ephemeral>) runs in this process. Two clients of it take turns, one prompt
each at a time (``/echo`` of a short sentence, each awaited to its end before the next):

- ``tui``: what the terminal UI does: a ``WebSocketSessionPort`` with the session watched,
  ``submit(RunRequest)``; the time until the first ``TextDelta`` of the run arrives;
- ``acp``: a real ``lemon acp --url <the daemon's ws>`` subprocess on pipes (as an editor runs
  it); the time from writing the ``session/prompt`` frame to reading the first
  ``agent_message_chunk`` notification on its stdout. The path adds the editor's pipe, the
  agent's JSON-RPC and its own WebSocket connection to the daemon.

Medians over ``--prompts`` after ``--warmup``. Goal (issue 30): acp <= 1.2 x tui + 2 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LEMON = str(Path(sys.executable).parent / "lemon")
PROMPT = "/echo the quick brown fox jumps over the lazy dog"


class _Editor:
    """The editor's end of ``lemon acp``'s pipes: raw JSON-RPC frames."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        self._ids = 0

    async def send(self, method: str, params: dict[str, Any]) -> int:
        assert self._process.stdin is not None
        self._ids += 1
        frame = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}
        self._process.stdin.write(json.dumps(frame).encode() + b"\n")
        await self._process.stdin.drain()
        return self._ids

    async def frame(self) -> dict[str, Any]:
        assert self._process.stdout is not None
        line = await self._process.stdout.readline()
        if not line:
            raise SystemExit("lemon acp ended early (see its stderr above)")
        frame: dict[str, Any] = json.loads(line)
        return frame

    async def answer(self, rid: int) -> dict[str, Any]:
        while True:
            frame = await self.frame()
            if frame.get("id") == rid and "method" not in frame:
                if "error" in frame:
                    raise SystemExit(f"lemon acp refused: {frame['error']}")
                result: dict[str, Any] = frame["result"]
                return result

    async def prompt(self, session: str) -> float:
        """Seconds from the ``session/prompt`` frame to the first ``agent_message_chunk``."""
        started = time.perf_counter()
        rid = await self.send(
            "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": PROMPT}]}
        )
        first: float | None = None
        while True:
            frame = await self.frame()
            update = (frame.get("params") or {}).get("update") or {}
            if first is None and update.get("sessionUpdate") == "agent_message_chunk":
                first = time.perf_counter() - started
            if frame.get("id") == rid and "method" not in frame:
                if first is None or frame.get("result", {}).get("stopReason") != "end_turn":
                    raise SystemExit(f"the prompt did not stream an answer: {frame}")
                return first


async def _tui_prompt(port: Any, stream: Any, key: str, cwd: str) -> float:
    from lemon_core.execution import RunRequest
    from lemon_core.sessions import RunEnded, TextDelta

    started = time.perf_counter()
    receipt = await port.submit(
        RunRequest(origin="tui", session_key=key, prompt=PROMPT, queue_mode="followup", cwd=cwd)
    )
    first: float | None = None
    while True:
        event = await stream.get()
        if first is None and isinstance(event, TextDelta) and event.run_id == receipt.run_id:
            first = time.perf_counter() - started
        if isinstance(event, RunEnded) and event.run_id == receipt.run_id:
            if first is None or not event.ok:
                raise SystemExit(f"the run did not stream an answer: {event}")
            return first


async def _run(prompts: int, warmup: int) -> dict[str, list[float]]:
    from lemon_control_plane import ControlPlane, ControlPlaneOptions
    from lemon_control_plane.client import WebSocketSessionPort
    from lemon_core.config import load_config
    from lemon_runtime import Runtime

    seen: dict[str, list[float]] = {"tui": [], "acp": []}
    with tempfile.TemporaryDirectory() as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        home.mkdir()
        work.mkdir()
        loaded = load_config(home=home, cwd=work, environ={})
        options = [ControlPlaneOptions(port=0, cwd=str(work))]
        async with Runtime(profile="daemon", config=loaded, options=options) as runtime:
            plane = runtime.handle("lemon_control_plane")
            assert isinstance(plane, ControlPlane)
            assert plane.local_token is not None
            env = {k: v for k, v in os.environ.items() if not k.startswith("LEMON_")}
            env.update(
                LEMON_HOME=str(home), LEMON_CONTROL_PLANE_TOKEN=plane.local_token, LEMON_DAEMON="1"
            )
            process = await asyncio.create_subprocess_exec(
                LEMON,
                "acp",
                "--url",
                plane.ws_url,
                env=env,
                cwd=work,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            editor = _Editor(process)
            await editor.answer(await editor.send("initialize", {"protocolVersion": 1}))
            new = await editor.answer(
                await editor.send("session/new", {"cwd": str(work), "mcpServers": []})
            )
            acp_session = new["sessionId"]
            async with WebSocketSessionPort(plane.ws_url, token=plane.local_token) as port:
                key = "tui:bench"
                stream = port.watch(key)
                for i in range(warmup + prompts):
                    tui = await _tui_prompt(port, stream, key, str(work))
                    acp = await editor.prompt(acp_session)
                    if i >= warmup:
                        seen["tui"].append(tui)
                        seen["acp"].append(acp)
                stream.close()
            assert process.stdin is not None
            process.stdin.close()
            await process.wait()
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    seen = asyncio.run(_run(args.prompts, args.warmup))
    tui = statistics.median(seen["tui"])
    acp = statistics.median(seen["acp"])
    limit = 1.2 * tui + 0.002
    print(f"prompt -> first text, medians over {args.prompts} prompts (same daemon, same run)")
    print(f"{'path':<58}{'median':>10}{'p90':>10}")
    for name, label in (
        ("tui", "tui: WebSocket port submit -> first TextDelta"),
        ("acp", "acp: session/prompt -> first agent_message_chunk"),
    ):
        values = sorted(seen[name])
        p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
        print(f"{label:<58}{statistics.median(values) * 1e3:>8.2f}ms{p90 * 1e3:>8.2f}ms")
    verdict = "met" if acp <= limit else "MISSED"
    print(
        f"goal acp <= 1.2 x tui + 2 ms ({limit * 1e3:.2f} ms): {verdict} "
        f"(acp {acp * 1e3:.2f} ms = {acp / tui:.2f} x tui, +{(acp - tui) * 1e3:.2f} ms)"
    )


if __name__ == "__main__":
    main()
