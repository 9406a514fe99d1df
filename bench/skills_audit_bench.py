#!/usr/bin/env python3
"""Benchmark of the skills audit (``lemon_skills.audit_bundle``) on a synthetic bundle.

Usage: python bench/skills_audit_bench.py [--files 200] [--kib 16] [--repeat 5]

Writes a bundle of ``--files`` text files of ``--kib`` KiB each (markdown and shell-like lines,
a few of which trigger findings) under a temporary directory and times, ``--repeat`` times each:
the baseline (reading and hashing every file: ``bundle_hash``, which any install does anyway)
and the full audit (which also hashes). Prints the medians, the audit throughput in MiB/s and
the ratio audit / baseline: the cost of the scan itself.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from lemon_skills import audit_bundle, bundle_hash

_LINES = (
    "## Step {i}: run the tests with `python -m pytest -q` and read the output carefully.",
    "kubectl rollout status deployment/web --timeout=120s  # wait for pods {i}",
    "See https://docs.example.com/guide/{i} for the background and the trade-offs.",
    'export PATH="$HOME/.local/bin:$PATH"; make build-{i} && make test-{i}',
)


def _bundle(root: Path, files: int, kib: int) -> int:
    (root / "SKILL.md").write_text("---\nname: bench\ndescription: A benchmark skill.\n---\nGo.\n")
    total = 0
    for n in range(files):
        lines: list[str] = []
        size = 0
        i = 0
        while size < kib * 1024:
            line = _LINES[i % len(_LINES)].format(i=i)
            lines.append(line)
            size += len(line) + 1
            i += 1
        if n % 50 == 0:
            lines.append("rm -rf build/")  # one warn finding per 50 files
        text = "\n".join(lines) + "\n"
        path = root / ("references" if n % 2 else "scripts") / f"f{n}.{'md' if n % 2 else 'sh'}"
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        total += len(text)
    return total


def _median(fn: object, repeat: int) -> float:
    assert callable(fn)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--kib", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        total = _bundle(root, args.files, args.kib)
        report = audit_bundle(root)  # warm the file cache
        base = _median(lambda: bundle_hash(root), args.repeat)
        audit = _median(lambda: audit_bundle(root), args.repeat)
    mib = total / (1024 * 1024)
    print(f"bundle: {args.files} files, {mib:.1f} MiB; verdict {report.verdict}, "
          f"{len(report.findings)} finding(s)")  # fmt: skip
    print(f"baseline (read + hash): median {base * 1000:.1f} ms")
    print(f"audit (hash + scan):    median {audit * 1000:.1f} ms  ({mib / audit:.1f} MiB/s)")
    print(f"ratio audit / baseline: {audit / base:.1f}x")


if __name__ == "__main__":
    main()
