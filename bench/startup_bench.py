"""Start-up cost of the ``lemon`` command, next to ``python -c pass`` in the same run.

    .venv/bin/python bench/startup_bench.py [--runs 7]

Prints the median wall time of each command over ``--runs`` runs (interleaved, so a noisy
machine slows all of them alike) and its difference from the bare interpreter. Goals (issue
"session port"): ``lemon --help`` <= 0.25 s and a one-shot offline ``lemon chat "hi"`` <= 0.6 s.
Each chat run gets a fresh, empty ``LEMON_HOME``.
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
    args = parser.parse_args()
    lemon = str(BIN / "lemon")
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "lemon --help": [lemon, "--help"],
        'lemon chat "hi" (offline)': [lemon, "chat", "hi"],
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            for name, argv in cases.items():
                env = {**os.environ, "LEMON_HOME": os.path.join(tmp, f"home{run}-{len(name)}")}
                env.pop("LEMON_MODEL", None)
                times[name].append(_time(argv, env))
    base = statistics.median(times["python -c pass"])
    print(f"{'command':<28} {'median s':>9} {'- python':>9}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<28} {median:9.3f} {median - base:9.3f}")


if __name__ == "__main__":
    main()
