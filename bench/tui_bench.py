"""Time to first paint of the terminal UI, and keystroke-to-echo, against a real daemon.

    .venv/bin/python bench/tui_bench.py [--runs 5]

The daemon (the daemon profile, offline provider, a fresh home) runs in this process on
127.0.0.1; each run starts a fresh Python child that imports ``lemon_tui``, opens the app
headless at 80x24 (Textual's ``run_test``) and reports, from the moment it was spawned:
``paint`` (the screen mounted and drawn once) and ``online`` (connected to the daemon: the
screen is interactive). The child then posts 50 key events to the input box and reports
the mean time from a key event to the box's value holding it (``echo``; Pilot's own
``press`` adds its settling waits, so it is not used for this figure). Goals (issue 13):
first paint <= 400 ms, echo <= 16 ms. Prints medians over ``--runs``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

_CHILD = r"""
import asyncio, json, sys, time
spawned = float(sys.argv[2])
from lemon_tui import LemonTUI, websocket_connector
from textual import events
from textual.widgets import Input

async def main():
    app = LemonTUI(websocket_connector(sys.argv[1]), where=sys.argv[1])
    out = {}
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        out["paint"] = time.time() - spawned
        while app.status.connection != "online":
            await pilot.pause(0.001)
        out["online"] = time.time() - spawned
        box = app.query_one("#input", Input)
        took = []
        for i in range(50):
            start = time.perf_counter()
            box.post_message(events.Key("a", "a"))
            while len(box.value) != i + 1:
                await asyncio.sleep(0)
            took.append(time.perf_counter() - start)
        out["echo"] = sum(took) / len(took)
    print(json.dumps(out))

asyncio.run(main())
"""


async def _run(runs: int) -> dict[str, list[float]]:
    from lemon_control_plane import ControlPlane
    from lemon_core.config import load_config
    from lemon_core.runtime import Runtime

    with tempfile.TemporaryDirectory() as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        home.mkdir()
        work.mkdir()
        loaded = load_config(home=home, cwd=work, environ={})
        settings = {"control_plane": {"port": 0, "cwd": str(work)}}
        seen: dict[str, list[float]] = {"paint": [], "online": [], "echo": []}
        async with Runtime(profile="daemon", config=loaded, settings=settings) as runtime:
            plane = runtime.handle("lemon_control_plane")
            assert isinstance(plane, ControlPlane)
            for _ in range(runs):
                child = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-c",
                    _CHILD,
                    plane.ws_url,
                    repr(time.time()),
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                )
                out, err = await child.communicate()
                if child.returncode != 0:
                    raise SystemExit(f"the child failed: {err.decode()[-600:]}")
                for key, value in json.loads(out).items():
                    seen[key].append(value)
        return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    seen = asyncio.run(_run(args.runs))
    for key, values in seen.items():
        print(f"{key:7} median {statistics.median(values) * 1000:7.1f} ms  (runs: {len(values)})")


if __name__ == "__main__":
    main()
