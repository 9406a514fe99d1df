"""Command-line entry of the gate: ``python -m lemon_quality`` and ``lemon quality``."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the gate with ``argv`` (defaults to ``sys.argv[1:]``); return the exit code."""
    args = sys.argv[1:] if argv is None else argv
    print(f"lemon_quality: checks not implemented yet ({args})")
    return 0
