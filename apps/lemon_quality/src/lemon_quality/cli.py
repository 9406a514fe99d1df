"""Command line: ``python -m lemon_quality [check|docs|rules|init] ...``; ``lemon quality`` = check.

Exit codes: 0 clean (warnings allowed), 1 failing findings (or a stale table with
``docs --check``), 2 the gate could not run (bad policy, not a workspace, bad usage).
"""

from __future__ import annotations

import argparse
import gc
import itertools
import sys
from pathlib import Path

from lemon_quality import boundaries_doc
from lemon_quality._init import write_init
from lemon_quality._render import render_error_json, render_json, render_text
from lemon_quality.errors import QualityError, UsageError
from lemon_quality.gate import find_root, load, run_checks
from lemon_quality.rules import RULES

_COMMANDS = ("check", "docs", "rules", "init")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]  # raise, don't exit
        raise UsageError(f"{message} (see --help)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="lemon_quality", description="The architecture and quality gate of a uv workspace."
    )
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    check = sub.add_parser("check", help="run every rule (the default command)")
    check.add_argument(
        "--root",
        type=Path,
        help="workspace root (default: nearest with architecture.toml above the current directory)",
    )
    check.add_argument("--format", choices=("text", "json"), default="text")
    check.add_argument(
        "--no-cache", action="store_true", help="ignore and do not write .lemon_quality_cache/"
    )
    check.add_argument(
        "--baseline",
        choices=("write", "check"),
        help="write: record every current failure in quality_baseline.json; check: fail only "
        "on findings not in it (default: applied when the file exists)",
    )
    init = sub.add_parser(
        "init", help="write architecture.toml with the exact current edges (roles to review)"
    )
    init.add_argument("--root", type=Path)
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    docs = sub.add_parser("docs", help="regenerate the policy table in the boundaries doc")
    docs.add_argument("--root", type=Path)
    docs.add_argument("--check", action="store_true", help="fail (exit 1) if it is stale")
    sub.add_parser("rules", help="list the rule codes")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command in ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:2] == ["check", "init"]:  # `lemon quality init`: the CLI prepends `check`
        args_list.pop(0)
    if not args_list or args_list[0] not in (*_COMMANDS, "-h", "--help"):
        args_list.insert(0, "check")
    want_json = "--format=json" in args_list or any(
        a == "--format" and b == "json" for a, b in itertools.pairwise(args_list)
    )
    try:
        args = _parser().parse_args(args_list)
    except UsageError as exc:
        print(f"lemon_quality: {exc}", file=sys.stderr)
        if want_json:
            print(render_error_json(f"usage: {exc}"))
        return 2
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    try:
        if args.command == "rules":
            for rule in RULES.values():
                print(f"{rule.code:24} {rule.severity:5} {rule.summary}")
            return 0
        if args.command == "init":  # a tree without a policy: the current directory by default
            root = (args.root or Path.cwd()).resolve()
            path = write_init(root, force=args.force)
            print(f"wrote {path.name}: review every role marked `# review` before relying on it")
            return 0
        root = args.root.resolve() if args.root else find_root(Path.cwd())
        if args.command == "docs":
            return _docs(root, check=args.check)
        # A short-lived run that allocates many small records: the cyclic collector would
        # only re-scan them.
        gc.disable()
        try:
            report = run_checks(root, use_cache=not args.no_cache, baseline=args.baseline or "auto")
        finally:
            gc.enable()
    except QualityError as exc:
        if want_json:
            print(render_error_json(str(exc)))
        else:
            print(f"lemon_quality: error: {exc}", file=sys.stderr)
        return 2
    print(render_json(report) if args.format == "json" else render_text(report))
    if args.baseline == "write":
        # Every failure is now recorded: the tree is adopted, and only new findings fail.
        recorded = len([f for f in report.failures if f.code != "stale_baseline"])
        print(
            f"lemon_quality: recorded {recorded} findings in quality_baseline.json", file=sys.stderr
        )
        return 0
    return 0 if report.ok else 1


def _docs(root: Path, *, check: bool) -> int:
    ws, policy = load(root)
    if check:
        findings = boundaries_doc.check(ws, policy)
        if findings:
            for f in findings:
                print(f"[fail] {f.code} - {f.path} {f.message} — {f.hint}")
            return 1
        print(f"[ok] {policy.boundaries_doc} is up to date")
        return 0
    path, changed = boundaries_doc.write(ws, policy)
    rel = path.relative_to(root).as_posix()
    print(f"updated {rel}" if changed else f"[ok] {rel} is up to date")
    return 0
