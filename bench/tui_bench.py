"""The terminal UI: time to first paint, keystroke to echo, and scrolling a long transcript,
against a real daemon, next to the bare interpreter measured in the same run.

    .venv/bin/python bench/tui_bench.py [--runs 5] [--messages 400] [--compare]

The daemon (the daemon profile, offline provider, a fresh home) runs in this process on
127.0.0.1; each run starts a fresh Python child that imports ``lemon_tui``, opens the app
headless at 80x24 (Textual's ``run_test``) and reports, from the moment it was spawned:

- ``import``: ``lemon_tui`` imported (Textual included);
- ``paint``: the screen mounted and its first frame composed (``LemonTUI.first_paint_at``,
  taken before the connection is opened);
- ``online``: connected to the daemon (hello-ok): the screen is interactive;
- ``echo``: the mean time from a key event posted to the editor to its text holding it
  (50 keys; Pilot's ``press`` adds settling waits, so it is not used for this figure);
- ``fill``: ``--messages`` transcript blocks mounted (half questions, half Markdown answers
  of 48 lines each: 400 messages are about 10,000 lines), in one batch, laid out;
- ``settle_memory``: ``LemonTUI.settle_memory()`` once after the fill (what the end of each
  run does: collect, then ``gc.freeze()``);
- ``scroll``: one page up or down of that transcript until the app is idle again, the frame
  composed (40 steps: median and worst); ``settle`` is the same wait with nothing to redraw
  (Pilot's idle wait over the mounted widgets), the floor of that figure. ``--compare`` also
  scrolls a child that skips ``settle_memory()`` (the garbage collector then walks the whole
  transcript now and then: the worst steps).
- ``scroll_cpu``: the same pages, the process's CPU time from the scroll call to idle (median
  and worst): the work a page costs (the window mounted, laid out, the frame rendered and
  composed). Added because ``scroll`` cannot go below Pilot's idle detection: it sleeps in
  20 ms slices until one passes without work (``settle``, the floor, is about 21 ms), so a
  page that works for 5 ms still reads 40 ms there. The CPU figure is also what the load of
  the other jobs on this machine changes least.

- ``frame``: the same pages, the time from the scroll call to the first frame handed to the
  driver (``App._display``, wrapped) that shows what the transcript shows once idle (the
  widgets in view and their places on the screen; a later frame that moves the offset and
  the spacers together changes only the scroll bar): the wait a person sees, without
  Pilot's idle slices. The editor's cursor blink is off meanwhile (a blink is a frame that is
  not the page's); ``frames_per_page``: the most frames one page wrote until idle.

``python -c pass`` is spawned and timed the same way in each run: the interpreter's own
start-up. Measured as a person runs it: ``PYTHONDONTWRITEBYTECODE`` unset and one warm-up run
first (the bytecode cache written, as after the first start on any machine). Goals (issue 13):
first paint <= 400 ms, echo <= 16 ms, a long transcript scrolls without stalls; issue 32 (over
``--messages 2000``): every page of scroll <= 16 ms and first paint <= 300 ms, each met only if
met in 3 consecutive runs (the goal lines at the end say which).

The transcript is virtual (only the blocks near the view are mounted): the blocks are handed
over with ``add_all`` (``mount_all`` on a transcript without it), and every wait after the fill
and after each page also lasts until the transcript's window has ``settled`` (mounted and
measured): what the virtual transcript does for a page is inside the figure. The child passes
the daemon's token (every daemon asks for one; without it the child never got online).
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

_CHILD = r"""
import asyncio, json, statistics, sys, time
spawned = float(sys.argv[-1])
messages = int(sys.argv[2])
freeze = sys.argv[3] == "1"
out = {}
import lemon_tui
out["import"] = time.time() - spawned
from lemon_tui import LemonTUI, websocket_connector

async def main():
    from textual import events
    url, token = sys.argv[1].split(" ", 1)  # every daemon asks for its token
    app = LemonTUI(websocket_connector(url, token=token), where=url)
    async with app.run_test(size=(80, 24)) as pilot:
        while app.first_paint_at is None:
            await asyncio.sleep(0)
        out["paint"] = time.time() - spawned - (time.monotonic() - app.first_paint_at)
        while app.status.connection != "online":
            await pilot.pause(0.001)
        out["online"] = time.time() - spawned
        box = app.editor
        took = []
        for i in range(50):
            start = time.perf_counter()
            box.post_message(events.Key("a", "a"))
            while len(box.text) != i + 1:
                await asyncio.sleep(0)
            took.append(time.perf_counter() - start)
        out["echo"] = sum(took) / len(took)
        if messages:
            from lemon_tui._widgets import AnswerBlock, UserBlock
            answer = "\n".join(
                f"{i}. a line of the answer with `code` and **bold** words" for i in range(1, 49)
            )
            blocks = []
            for i in range(messages // 2):
                blocks.append(UserBlock(f"question {i}: what does line {i} do?"))
                block = AnswerBlock()
                block.replace_text(answer)
                blocks.append(block)
            view = app.transcript

            async def idle():
                # Idle, and (a virtual transcript) its window mounted and measured.
                await pilot.pause()
                while not getattr(view, "settled", True):
                    await pilot.pause()

            start = time.perf_counter()
            if hasattr(view, "add_all"):  # the virtual transcript: the same blocks handed over
                view.add_all(blocks)
            else:
                await view.mount_all(blocks)
            await idle()
            out["fill"] = time.perf_counter() - start
            view.scroll_end(animate=False)
            await idle()
            if freeze:
                start = time.perf_counter()
                app.settle_memory()  # what the end of each run does in the app
                out["settle_memory"] = time.perf_counter() - start
            out["lines"] = view.virtual_size.height
            # Each frame handed to the terminal (the driver), with what the transcript shows in
            # it: the widgets in view and their places on the screen. A page's ``frame`` is
            # the time to the first frame that shows what the transcript shows once idle (a
            # later frame that moves the offset and the spacers together, as a height learnt
            # above the view does, changes nothing shown but the scroll bar).
            frames = []
            display = app._display

            def shown():
                screen = view.region
                return tuple((id(w), w.region) for w in view.children if w.region.overlaps(screen))

            def displayed(screen, update):
                frames.append((time.perf_counter(), shown()))
                return display(screen, update)

            app._display = displayed
            app.editor.cursor_blink = False  # a blink is a frame that is not the page's
            settle = []
            for i in range(20):  # the same wait with nothing to redraw: the floor
                start = time.perf_counter()
                await pilot.pause()
                settle.append(time.perf_counter() - start)
            out["settle"] = statistics.median(settle)
            steps, cpu, frame, count = [], [], [], []
            for i in range(40):
                frames.clear()
                start, work = time.perf_counter(), time.process_time()
                if i < 20:
                    view.scroll_page_up(animate=False)
                else:
                    view.scroll_page_down(animate=False)
                await idle()
                steps.append(time.perf_counter() - start)
                cpu.append(time.process_time() - work)
                final = shown()
                first = next((at for at, seen in frames if seen == final), None)
                if first is None:
                    raise SystemExit("a page was never shown in a frame")
                frame.append(first - start)
                count.append(len(frames))
            out["frame"] = statistics.median(frame)
            out["frame_worst"] = max(frame)
            out["frame_steps"] = [round(x * 1000, 1) for x in frame]
            out["frames_per_page"] = max(count)
            out["scroll"] = statistics.median(steps)
            out["scroll_worst"] = max(steps)
            out["scroll_steps"] = [round(x * 1000) for x in steps]
            out["scroll_cpu"] = statistics.median(cpu)
            out["scroll_cpu_worst"] = max(cpu)
            out["scroll_cpu_steps"] = [round(x * 1000) for x in cpu]
    print(json.dumps(out))

asyncio.run(main())
"""


async def _child(argv: list[str], env: dict[str, str]) -> tuple[float, bytes]:
    spawned = time.time()
    child = await asyncio.create_subprocess_exec(
        *argv,
        repr(spawned),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await child.communicate()
    if child.returncode != 0:
        raise SystemExit(f"the child failed: {err.decode()[-800:]}")
    return time.time() - spawned, out


async def _run(
    runs: int, messages: int, env: dict[str, str], *, compare: bool
) -> dict[str, list[float]]:
    from lemon_control_plane import ControlPlane, ControlPlaneOptions
    from lemon_core.config import load_config
    from lemon_runtime import Runtime

    seen: dict[str, list[float]] = {"python -c pass": []}
    with tempfile.TemporaryDirectory() as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        home.mkdir()
        work.mkdir()
        loaded = load_config(home=home, cwd=work, environ={})
        options = [ControlPlaneOptions(port=0, cwd=str(work))]
        async with Runtime(profile="daemon", config=loaded, options=options) as runtime:
            plane = runtime.handle("lemon_control_plane")
            assert isinstance(plane, ControlPlane)
            ui = [sys.executable, "-c", _CHILD, f"{plane.ws_url} {plane.local_token}"]
            await _child([*ui, "0", "1"], env)  # a warm-up (the bytecode cache is written)
            for _ in range(runs):
                took, _ = await _child([sys.executable, "-c", "pass"], env)
                seen["python -c pass"].append(took)
                _, out = await _child([*ui, str(messages), "1"], env)
                for key, value in json.loads(out).items():
                    seen.setdefault(key, []).append(value)
                if messages and compare:  # the same transcript without settle_memory()
                    _, out = await _child([*ui, str(messages), "0"], env)
                    for key, value in json.loads(out).items():
                        if key.startswith("scroll"):
                            seen.setdefault(f"{key} (no gc.freeze)", []).append(value)
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument(
        "--compare", action="store_true", help="also scroll without LemonTUI.settle_memory()"
    )
    args = parser.parse_args()
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    seen = asyncio.run(_run(args.runs, args.messages, env, compare=args.compare))
    for key, values in seen.items():
        if key.startswith(("scroll_steps", "scroll_cpu_steps", "frame_steps")):
            print(f"{key:14} ms, last run: {values[-1]}")
            continue
        if key == "lines":
            print(f"{'lines':14} {int(statistics.median(values)):,} in the transcript")
            continue
        if key == "frames_per_page":
            print(f"{key:14} at most {max(values)} (frames written from a page to idle)")
            continue
        unit = 1000 * statistics.median(values)
        print(f"{key:14} median {unit:8.1f} ms  (runs: {len(values)})")
    for key, what, limit in _GOALS:
        if key in seen:
            print(_goal(what, seen[key], limit))


# Issue 32: each goal is met only if it is met in 3 consecutive runs of one invocation.
_GOALS = (
    ("paint", "first paint", 0.300),
    ("scroll_worst", "every page of scroll until idle (the worst)", 0.016),
    ("scroll_cpu_worst", "every page of scroll, its work (the worst)", 0.016),
    ("frame_worst", "every page of scroll on screen (the worst frame)", 0.016),
)


def _goal(what: str, values: list[float], limit: float) -> str:
    """``goal ...: met (runs 1-3 of 5)`` or ``MISSED``, with the runs that met it."""
    ok = [v <= limit for v in values]
    met = [i + 1 for i, good in enumerate(ok) if good]
    figures = ", ".join(f"{1000 * v:.0f}" for v in values)
    head = f"goal {what} <= {1000 * limit:.0f} ms: "
    for i in range(len(ok) - 2):
        if all(ok[i : i + 3]):
            return f"{head}met (runs {i + 1}-{i + 3} of {len(ok)}; per run ms: {figures})"
    return (
        f"{head}MISSED (met in runs {met or 'none'} of {len(ok)}, 3 consecutive needed; "
        f"per run ms: {figures})"
    )


if __name__ == "__main__":
    main()
