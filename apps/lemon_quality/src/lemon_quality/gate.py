"""Running every check over one workspace: the gate's single entry point for callers."""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

from lemon_quality import boundaries_doc
from lemon_quality._arch import ArchitectureCheck, SourceFile
from lemon_quality._cache import FactsCache
from lemon_quality._links import check_links
from lemon_quality._tests_guard import check_duplicates, is_test_file
from lemon_quality._walk import walk_files
from lemon_quality.findings import Finding, Report
from lemon_quality.policy import Policy, load_policy
from lemon_quality.workspace import Workspace, load_workspace


def find_root(start: Path) -> Path:
    """The nearest directory at or above ``start`` holding ``architecture.toml``."""
    here = start.resolve()
    for candidate in (here, *here.parents):
        if (candidate / "architecture.toml").is_file():
            return candidate
    return here


def run_checks(root: Path, *, use_cache: bool = True) -> Report:
    """Run all rules on the workspace at ``root``; raises QualityError if it cannot."""
    started = time.perf_counter()
    ws = load_workspace(root)
    policy = load_policy(root)
    findings: list[Finding] = []
    app_dirs = {a.directory: a for a in ws.apps if a.pyproject_error is None}
    link_files = {r for r in policy.link_roots if not r.endswith("/")}
    link_dirs = tuple(r.rstrip("/") + "/" for r in policy.link_roots)
    py_files: list[tuple[str, int, int]] = []
    owner_of: dict[str, str] = {}
    pth: dict[str, list[str]] = defaultdict(list)
    tests: list[str] = []
    docs: list[str] = []
    for rel, entry in walk_files(str(root), "", frozenset(policy.scan_exclude)):
        name = entry.name
        if name.endswith(".md") and (rel in link_files or rel.startswith(link_dirs)):
            docs.append(rel)
            continue
        if not name.endswith((".py", ".pth")):
            continue
        if is_test_file(name):
            tests.append(rel)
        idx = rel.find("/src/")
        app = app_dirs.get(rel[:idx]) if idx > 0 else None
        if app is None:
            continue
        if name.endswith(".pth"):
            pth[app.name].append(rel)
            continue
        st = entry.stat(follow_symlinks=False)
        py_files.append((rel, st.st_size, st.st_mtime_ns))
        owner_of[rel] = app.name
    cache = FactsCache(str(root), enabled=use_cache)
    facts = cache.facts_for(py_files)
    cache.save()
    sources: dict[str, list[SourceFile]] = defaultdict(list)
    for rel, _, _ in sorted(py_files):
        app_name = owner_of[rel]
        fact = facts[rel]
        if fact[2][0]:
            findings.append(
                Finding(
                    code="syntax_error",
                    app=app_name,
                    path=rel,
                    line=fact[2][1],
                    message=f"cannot parse: {fact[2][0]}",
                    hint="fix the syntax error",
                )
            )
        sources[app_name].append(SourceFile(app=app_name, path=rel, facts=fact))
    findings.extend(ArchitectureCheck(ws, policy, sources, pth).run())
    findings.extend(boundaries_doc.check(ws, policy))
    findings.extend(check_links(root, sorted(docs)))
    findings.extend(check_duplicates(tests))
    stats = cache.statistics()
    stats.update(
        apps=len(ws.apps),
        source_files=len(py_files),
        test_files=len(tests),
        docs_checked=len(docs),
        elapsed_ms=int((time.perf_counter() - started) * 1000),
    )
    return Report(
        root=os.fspath(root),
        findings=tuple(sorted(findings, key=Finding.sort_key)),
        statistics=stats,
    )


def load(root: Path) -> tuple[Workspace, Policy]:
    """The workspace and its policy (raises QualityError when either cannot be read)."""
    return load_workspace(root), load_policy(root)
