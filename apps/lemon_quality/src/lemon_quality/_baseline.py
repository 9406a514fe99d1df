"""The baseline: known findings of a tree being adopted, each with a reason.

``lemon quality --baseline write`` records every failing finding in ``quality_baseline.json`` at
the root; ``--baseline check`` then fails only on findings that are not in it. Entries match on
(code, app, path, message), never on the line, so unrelated edits above a finding keep it
matched. An entry that matches no current finding is itself a failing ``stale_baseline``
finding: the baseline only shrinks.

Format (``version`` 1)::

    {"schema": "lemon_quality.baseline", "version": 1,
     "entries": [{"code": str, "app": str | null, "path": str | null, "message": str,
                  "reason": str}]}
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from lemon_quality.errors import PolicyError
from lemon_quality.findings import Finding
from lemon_quality.rules import RULES

BASELINE_FILE = "quality_baseline.json"
_SCHEMA = "lemon_quality.baseline"
_DEFAULT_REASON = "recorded by --baseline write at adoption; review and fix or give a reason"

Key = tuple[str, str | None, str | None, str]


def _key(f: Finding) -> Key:
    return (f.code, f.app, f.path, f.message)


def write_baseline(root: Path, findings: list[Finding]) -> Path:
    """Write every failing finding (keeping the reasons of entries that still match)."""
    path = root / BASELINE_FILE
    old: dict[Key, str] = {}
    if path.is_file():
        try:
            old = dict(_read(path))
        except PolicyError:
            old = {}
    entries = []
    for f in findings:
        if f.severity != "fail" or f.code == "stale_baseline":
            continue
        entries.append(
            {
                "code": f.code,
                "app": f.app,
                "path": f.path,
                "message": f.message,
                "reason": old.get(_key(f), _DEFAULT_REASON),
            }
        )
    doc = {"schema": _SCHEMA, "version": 1, "entries": entries}
    tmp = path.with_name(f"{BASELINE_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def _read(path: Path) -> list[tuple[Key, str]]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise PolicyError(f"{BASELINE_FILE}: cannot read it: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("schema") != _SCHEMA or doc.get("version") != 1:
        raise PolicyError(
            f'{BASELINE_FILE}: not a baseline (want "schema": "{_SCHEMA}", "version": 1)'
        )
    entries = doc.get("entries")
    if not isinstance(entries, list):
        raise PolicyError(f"{BASELINE_FILE}: `entries` must be an array")
    out = []
    for i, e in enumerate(entries):
        ok = (
            isinstance(e, dict)
            and isinstance(e.get("code"), str)
            and isinstance(e.get("message"), str)
            and all(e.get(k) is None or isinstance(e.get(k), str) for k in ("app", "path"))
            and isinstance(e.get("reason"), str)
            and e["reason"].strip()
        )
        if not ok:
            raise PolicyError(
                f"{BASELINE_FILE}: entries[{i}] needs string code, message and a non-empty "
                "reason (app and path: string or null)"
            )
        if e["code"] not in RULES:
            raise PolicyError(f"{BASELINE_FILE}: entries[{i}].code {e['code']!r} is no rule")
        out.append(((e["code"], e.get("app"), e.get("path"), e["message"]), e["reason"]))
    return out


def apply_baseline(root: Path, findings: list[Finding]) -> tuple[list[Finding], int]:
    """Drop baselined findings; add ``stale_baseline`` for entries matching nothing."""
    path = root / BASELINE_FILE
    if not path.is_file():
        raise PolicyError(
            f"{BASELINE_FILE} not found at the root: create it with `--baseline write`"
        )
    known = dict(_read(path))
    used: set[Key] = set()
    kept = []
    removed = 0
    for f in findings:
        k = _key(f)
        if k in known:
            used.add(k)
            removed += 1
            continue
        kept.append(f)
    for k in known:
        if k in used:
            continue
        code, app, where, message = k
        kept.append(
            Finding(
                code="stale_baseline",
                app=app,
                path=BASELINE_FILE,
                line=None,
                message=f"baseline entry {code} at {where or '-'} ({message}) matches no "
                "current finding",
                hint=f"remove the entry from {BASELINE_FILE} (the baseline only shrinks)",
            )
        )
    return sorted(kept, key=Finding.sort_key), removed
