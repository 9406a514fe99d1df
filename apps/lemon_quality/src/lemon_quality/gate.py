"""Running every check over one workspace: the gate's single entry point for callers."""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from lemon_quality import boundaries_doc
from lemon_quality._arch import ArchitectureCheck, SourceFile
from lemon_quality._baseline import BASELINE_FILE, apply_baseline, write_baseline
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


_TEMPLATE_MARKERS = (b"{{", b"{%", b"{#")


def _owner_index(ws: Workspace) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """Root-relative package path -> (app, dotted import name); source root -> app."""
    packages: dict[str, tuple[str, str]] = {}
    roots: dict[str, str] = {}
    for app in ws.apps:
        if app.pyproject_error is not None:
            continue
        for dotted, rel in app.package_dirs().items():
            packages[rel] = (app.name, dotted)
        for root in app.source_roots:
            r = app.path(root.strip("/")) if root not in ("", ".") else app.directory
            roots.setdefault(r, app.name)
    return packages, roots


def _lookup(rel: str, index: Mapping[str, tuple[str, str]]) -> tuple[str, str] | None:
    """(app, dotted module) of the file at ``rel``, or None when no app package holds it."""
    hit = index.get(rel)
    if hit is not None:  # a single-module package (``name.py``)
        return hit
    head, _, tail = rel.rpartition("/")
    parts = [tail[:-3]] if tail != "__init__.py" else []
    while head:
        hit = index.get(head)
        if hit is not None:
            return hit[0], ".".join([hit[1], *reversed(parts)])
        head, _, seg = head.rpartition("/")
        parts.append(seg)
    return None


def _in_roots(rel: str, roots: Mapping[str, str]) -> str | None:
    head = rel.rpartition("/")[0]
    while head:
        if head in roots:
            return roots[head]
        head = head.rpartition("/")[0]
    return None


def run_checks(
    root: Path, *, use_cache: bool = True, baseline: Literal["auto", "check", "write"] = "auto"
) -> Report:
    """Run all rules on the workspace at ``root``; raises QualityError if it cannot.

    ``baseline``: ``auto`` applies ``quality_baseline.json`` when the root has one; ``check``
    requires it; ``write`` records every current failing finding in it (and applies nothing).
    """
    started = time.perf_counter()
    policy, ws = _load_both(root)
    findings: list[Finding] = []
    link_files = {r for r in policy.link_roots if not r.endswith("/")}
    link_dirs = tuple(r.rstrip("/") + "/" for r in policy.link_roots)
    pkg_index, root_index = _owner_index(ws)
    py_files: list[tuple[str, int, int]] = []
    owner_of: dict[str, tuple[str, str]] = {}
    pth: dict[str, list[str]] = defaultdict(list)
    tests: list[str] = []
    docs: list[str] = []
    limit = policy.max_file_bytes
    for rel, entry in walk_files(str(root), "", frozenset(policy.scan_exclude)):
        name = entry.name
        if name.endswith(".md") and (rel in link_files or rel.startswith(link_dirs)):
            docs.append(rel)
            continue
        if not name.endswith((".py", ".pth")):
            continue
        if is_test_file(name):
            tests.append(rel)
        if name.endswith(".pth"):
            pth_app = _in_roots(rel, root_index)
            if pth_app is not None:
                pth[pth_app].append(rel)
            continue
        owned = _lookup(rel, pkg_index)
        if owned is None:
            continue
        st = entry.stat(follow_symlinks=False)
        if st.st_size > limit:
            findings.append(
                Finding(
                    code="oversized_file",
                    app=owned[0],
                    path=rel,
                    line=None,
                    message=f"{st.st_size:,} bytes is above the scan limit of {limit:,} bytes: "
                    "its imports are not checked",
                    hint="split or exclude the file ([scan] exclude), or raise "
                    "[scan] max_file_bytes in architecture.toml",
                )
            )
            continue
        py_files.append((rel, st.st_size, st.st_mtime_ns))
        owner_of[rel] = owned
    cache = FactsCache(str(root), enabled=use_cache)
    facts = cache.facts_for(py_files)
    cache.save()
    sources: dict[str, list[SourceFile]] = defaultdict(list)
    templates = 0
    for rel, _, _ in sorted(py_files):
        app_name, module = owner_of[rel]
        fact = facts[rel]
        if fact[2][0]:
            if _is_template(root / rel, fact[2][1]):
                templates += 1
                continue
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
        sources[app_name].append(SourceFile(app=app_name, path=rel, facts=fact, module=module))
    arch = ArchitectureCheck(ws, policy, sources, pth)
    findings.extend(arch.run())
    findings.extend(boundaries_doc.check(ws, policy))
    findings.extend(check_links(root, sorted(docs)))
    findings.extend(check_duplicates(tests))
    findings = sorted(findings, key=Finding.sort_key)
    baselined = 0
    if baseline == "write":
        write_baseline(root, findings)
    elif baseline == "check" or (root / BASELINE_FILE).is_file():
        findings, baselined = apply_baseline(root, findings)
    stats = cache.statistics()
    stats.update(
        apps=len(ws.apps),
        source_files=len(py_files),
        test_files=len(tests),
        docs_checked=len(docs),
        templates_skipped=templates,
        export_lists=arch.export_lists,
        baselined=baselined,
        elapsed_ms=int((time.perf_counter() - started) * 1000),
    )
    return Report(
        root=os.fspath(root),
        findings=tuple(findings),
        statistics=stats,
    )


def _is_template(path: Path, line: int) -> bool:
    """A ``.py`` file that does not parse because of template syntax (Jinja, cookiecutter):
    it sits under a ``{{ ... }}`` directory, or the line the parser stopped at holds ``{{``,
    ``{%`` or ``{#``. A real syntax error elsewhere in a file is still reported."""
    if "{{" in path.as_posix():
        return True
    try:
        with open(path, "rb") as fh:
            for number, text in enumerate(fh, 1):
                if number == line:
                    return any(m in text for m in _TEMPLATE_MARKERS)
    except OSError:
        return False
    return False


def _load_both(root: Path) -> tuple[Policy, Workspace]:
    if not (root / "pyproject.toml").is_file():
        load_workspace(root)  # raises the WorkspaceError that names the missing file
    policy = load_policy(root)
    return policy, load_workspace(root, policy)


def load(root: Path) -> tuple[Workspace, Policy]:
    """The workspace and its policy (raises QualityError when either cannot be read)."""
    policy, ws = _load_both(root)
    return ws, policy
