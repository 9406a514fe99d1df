"""Start-up cost of the ``lemon`` command, next to ``python -c pass`` in the same run.

    .venv/bin/python bench/startup_bench.py [--runs 7]

Prints the median wall time of each command over ``--runs`` runs (interleaved, so a noisy
machine slows all of them alike) and its difference from the bare interpreter (the baseline,
``python -c pass``, measured in the same run), then one goal line each (issue 32, "speed debts
of wave 2"): ``lemon --help`` <= 0.20 s, a one-shot offline ``lemon chat "hi"`` as a client of
a running daemon <= 0.40 s and hosting the runtime in-process <= 0.60 s.
Each chat run gets a fresh, empty ``LEMON_HOME``. Measured as a person runs it: with
``PYTHONDONTWRITEBYTECODE`` unset and one warm-up run of each command first (so the bytecode
cache is written, as it is after the first ``lemon`` on any machine); ``--cold-bytecode`` keeps
the variable and measures compiling every module too.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
GOALS = {
    "lemon --help": 0.20,
    'lemon chat "hi" (daemon running)': 0.40,
    'lemon chat "hi" (offline)': 0.60,
}


def _time(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, stdin=subprocess.DEVNULL, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed ({done.returncode}): {done.stderr.decode()[-400:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--cold-bytecode", action="store_true")
    args = parser.parse_args()
    lemon = str(BIN / "lemon")
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "lemon --help": [lemon, "--help"],
        'lemon chat "hi" (offline)': [lemon, "chat", "hi"],
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    base_env = dict(os.environ)
    base_env.pop("LEMON_MODEL", None)
    base_env["LEMON_DAEMON"] = "0"  # the one-shot hosts its runtime (no daemon is asked)
    if not args.cold_bytecode:
        base_env.pop("PYTHONDONTWRITEBYTECODE", None)
    daemon_case = 'lemon chat "hi" (daemon running)'
    times[daemon_case] = []
    with tempfile.TemporaryDirectory() as tmp:
        daemon_env = {**base_env, "LEMON_HOME": os.path.join(tmp, "daemon-home")}
        daemon_env.pop("LEMON_DAEMON")
        _time([lemon, "daemon", "start", "--port", "0"], daemon_env)
        try:
            for name, argv in cases.items():  # warm-up: the bytecode cache, the disk cache
                _time(argv, {**base_env, "LEMON_HOME": os.path.join(tmp, f"warm-{len(name)}")})
            _time([lemon, "chat", "hi"], daemon_env)
            for run in range(args.runs):
                for name, argv in cases.items():
                    home = os.path.join(tmp, f"home{run}-{len(name)}")
                    times[name].append(_time(argv, {**base_env, "LEMON_HOME": home}))
                times[daemon_case].append(_time([lemon, "chat", "hi"], daemon_env))
        finally:
            subprocess.run([lemon, "daemon", "stop"], env=daemon_env, capture_output=True)
    base = statistics.median(times["python -c pass"])
    print(f"{'command':<34} {'median s':>9} {'- python':>9}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<34} {median:9.3f} {median - base:9.3f}")
    for name, goal in GOALS.items():
        median = statistics.median(times[name])
        verdict = "met" if median <= goal else "MISSED"
        print(f"goal: {name} <= {goal:.2f} s: {median:.3f} s {verdict} (python {base:.3f} s)")


if __name__ == "__main__":
    main()
