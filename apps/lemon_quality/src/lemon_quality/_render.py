"""Rendering a report: text lines for people, versioned JSON for programs.

JSON schema (``version`` 1; fields are only ever added, a breaking change bumps the version)::

    {"schema": "lemon_quality.report", "version": 1, "root": str, "ok": bool,
     "counts": {"fail": int, "warn": int},
     "findings": [{"code": str, "severity": "fail" | "warn", "app": str | null,
                   "path": str | null, "line": int | null, "message": str, "hint": str}],
     "statistics": {str: int}}

When the gate cannot run (exit 2) the JSON is
``{"schema": "lemon_quality.report", "version": 1, "ok": false, "error": str}``.
"""

from __future__ import annotations

import json

from lemon_quality.findings import Finding, Report

SCHEMA = "lemon_quality.report"
VERSION = 1


def finding_line(f: Finding) -> str:
    """``[fail] <code> <app> <path>:<line> <message> — <hint>``."""
    where = f.path or "-"
    if f.path and f.line:
        where = f"{f.path}:{f.line}"
    return f"[{f.severity}] {f.code} {f.app or '-'} {where} {f.message} — {f.hint}"


def render_text(report: Report) -> str:
    """Warnings, then failures, then one summary line."""
    lines = [finding_line(f) for f in report.warnings]
    lines += [finding_line(f) for f in report.failures]
    s = report.statistics
    verdict = "passed" if report.ok else "FAILED"
    baselined = f", {s['baselined']} baselined" if s.get("baselined") else ""
    lines.append(
        f"lemon quality {verdict}: {len(report.failures)} failing, {len(report.warnings)} "
        f"warnings{baselined} ({s.get('apps', 0)} apps, {s.get('source_files', 0)} source "
        f"files, {s.get('parsed', 0)} parsed, {s.get('elapsed_ms', 0)} ms)"
    )
    return "\n".join(lines)


def render_json(report: Report) -> str:
    """The versioned JSON document for ``--format json``."""
    return json.dumps(
        {
            "schema": SCHEMA,
            "version": VERSION,
            "root": report.root,
            "ok": report.ok,
            "counts": {"fail": len(report.failures), "warn": len(report.warnings)},
            "findings": [
                {
                    "code": f.code,
                    "severity": f.severity,
                    "app": f.app,
                    "path": f.path,
                    "line": f.line,
                    "message": f.message,
                    "hint": f.hint,
                }
                for f in report.findings
            ],
            "statistics": dict(report.statistics),
        },
        indent=2,
        sort_keys=False,
    )


def render_error_json(message: str) -> str:
    """The JSON document for a run that could not check (exit 2)."""
    return json.dumps({"schema": SCHEMA, "version": VERSION, "ok": False, "error": message})
