"""The duplicate test-module guard: test file basenames are unique across the workspace.

Test files are ``test_*.py`` and ``*_test.py`` anywhere under the root (the usual walk skips and
the policy's ``[scan] exclude`` apply). pytest with ``--import-mode=importlib`` copes with
duplicates, but people and tracebacks do not: one name, one file.
"""

from __future__ import annotations

from collections import defaultdict

from lemon_quality.findings import Finding


def check_duplicates(test_files: list[str]) -> list[Finding]:
    """A finding for each basename that more than one test file uses."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for rel in test_files:
        by_name[rel.rsplit("/", 1)[-1]].append(rel)
    findings = []
    for name, paths in sorted(by_name.items()):
        if len(paths) < 2:
            continue
        paths.sort()
        app = paths[1].split("/")[1] if paths[1].startswith("apps/") else None
        findings.append(
            Finding(
                code="duplicate_test_module",
                app=app,
                path=paths[1],
                line=None,
                message=f"test module basename {name} is used by " + ", ".join(paths),
                hint="rename with a domain prefix (e.g. test_<area>_<behaviour>.py)",
            )
        )
    return findings


def is_test_file(name: str) -> bool:
    """``test_*.py`` or ``*_test.py``."""
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))
