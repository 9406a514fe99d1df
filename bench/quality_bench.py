#!/usr/bin/env python3
"""Benchmark of ``lemon quality`` against import-linter and tach on a synthetic workspace.

Usage: python bench/quality_bench.py [--apps 40] [--modules 250] [--repeat 3] [--no-tools]

Generates ``bench/_work/ws``: a uv workspace of N apps x M modules, layered so that app i
depends on up to three lower apps, each module with realistic imports (stdlib, own app
absolute and relative, allowed workspace deps, a function-local import, an ``if TYPE_CHECKING:``
block, a literal ``importlib.import_module``). The same boundaries are written as
``architecture.toml`` (lemon quality), ``.importlinter`` (one forbidden contract per app, direct
imports only) and ``tach.toml`` (one module per app with ``depends_on``). The competitors are
installed with ``uv pip`` into a throwaway venv under ``bench/_work/tools-venv``.

Each tool is run as a subprocess, cold (its cache deleted) and warm (cache kept), ``--repeat``
times; medians are printed side by side with the ratio to the fastest competitor.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = HERE / "_work"
WS = WORK / "ws"
TOOLS = WORK / "tools-venv"

STDLIB = ["json", "logging", "os", "re", "time", "dataclasses", "functools", "itertools",
          "collections", "pathlib", "typing", "enum", "contextlib", "asyncio"]


def app_name(i: int) -> str:
    return f"app_{i:02d}"


def deps_of(i: int) -> list[int]:
    cands = {i - 1, i // 2, i // 3}
    return sorted(j for j in cands if 0 <= j < i)


def module_names(m: int) -> list[str]:
    # 5 sub-packages, each with (m - 1) // 5 modules; the package __init__ files count as modules.
    per = max(1, (m - 1) // 5 - 1)
    return [f"pkg{p}.mod{k:03d}" for p in range(5) for k in range(per)]


def module_source(i: int, idx: int, mods: list[str], rng_seed: int) -> str:
    me = app_name(i)
    deps = deps_of(i)
    std = [STDLIB[(rng_seed + k) % len(STDLIB)] for k in range(3)]
    lines = [f'"""Synthetic module {idx} of {me}.', "", "It imports what a real module would.", '"""',
             "", "from __future__ import annotations", ""]
    lines += [f"import {s}" for s in sorted(set(std))]
    lines.append("from typing import TYPE_CHECKING")
    lines.append("")
    sib = mods[(idx + 1) % len(mods)]
    lines.append(f"from {me}.{sib} import helper_{(idx + 1) % len(mods)}")
    pkg, _, name = mods[(idx + 7) % len(mods)].partition(".")
    lines.append(f"from ..{pkg} import {name}")
    for d in deps[: 1 + idx % 3]:
        dm = mods[(idx * 3 + d) % len(mods)]
        lines.append(f"from {app_name(d)}.{dm} import helper_{(idx * 3 + d) % len(mods)}")
    lines += ["", "if TYPE_CHECKING:", "    from collections.abc import Sequence", ""]
    if deps:
        lines.insert(-2, f"    from {app_name(deps[0])} import pkg0")
    lines += ["", "log = logging.getLogger(__name__)" if "logging" in std else "log = None", "", ""]
    lines += [
        f"def helper_{idx}(items: Sequence[int]) -> int:",
        '    """Sum the even items, count the odd ones."""',
        "    total = 0",
        "    for item in items:",
        "        if item % 2 == 0:",
        "            total += item",
        "        else:",
        "            total -= 1",
        "    return total",
        "",
        "",
        f"class Service{idx}:",
        '    """A small service with state; the string "import os" is not an import."""',
        "",
        "    def __init__(self, name: str) -> None:",
        "        self.name = name",
        "        self.items: list[int] = []",
        "",
        "    def add(self, value: int) -> None:",
        "        self.items.append(value)",
        "",
        "    def total(self) -> int:",
        f"        return helper_{idx}(self.items)",
        "",
        "    def lazy(self) -> object:",
        "        import importlib",
        "",
        f'        return importlib.import_module("{me}.{mods[(idx + 3) % len(mods)]}")',
        "",
        "",
        "def render(value: object) -> str:",
        "    # json is imported at the top; this comment mentions import json",
        "    return repr(value)",
        "",
    ]
    return "\n".join(lines)


def generate(n_apps: int, n_mods: int) -> None:
    if WS.exists():
        shutil.rmtree(WS)
    mods = module_names(n_mods)
    names = [app_name(i) for i in range(n_apps)]
    (WS / "apps").mkdir(parents=True)
    (WS / "docs").mkdir()
    root = ['[tool.uv.workspace]', 'members = ["apps/*"]', "", "[tool.uv.sources]"]
    root += [f"{n} = {{ workspace = true }}" for n in names]
    (WS / "pyproject.toml").write_text("\n".join(root) + "\n")
    (WS / "README.md").write_text("# Synthetic workspace\n\nSee [the policy](docs/architecture_boundaries.md).\n")
    pol = ["schema = 1", "", "[roles.layer]", 'may_depend_on = ["layer"]', ""]
    tach = ["source_roots = ["] + [f'    "apps/{n}/src",' for n in names] + ["]", ""]
    lint = ["[importlinter]", "root_packages ="] + [f"    {n}" for n in names] + [""]
    for i, n in enumerate(names):
        d = [app_name(j) for j in deps_of(i)]
        base = WS / "apps" / n
        src = base / "src" / n
        for p in range(5):
            (src / f"pkg{p}").mkdir(parents=True)
            (src / f"pkg{p}" / "__init__.py").write_text(f'"""Package {p} of {n}."""\n')
        (src / "__init__.py").write_text(f'"""{n}."""\n')
        for idx, m in enumerate(mods):
            (src / (m.replace(".", "/") + ".py")).write_text(module_source(i, idx, mods, i + idx))
        (base / "tests").mkdir()
        (base / "tests" / f"test_{n}_smoke.py").write_text("def test_ok() -> None:\n    assert True\n")
        deps_toml = ", ".join(f'"{x}"' for x in d)
        (base / "pyproject.toml").write_text(
            f'[project]\nname = "{n}"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n'
            f"dependencies = [{deps_toml}]\n")
        pol += [f"[apps.{n}]", 'role = "layer"', f"allow = [{deps_toml}]", ""]
        tach += ["[[modules]]", f'path = "{n}"', f"depends_on = [{deps_toml}]", ""]
        forbidden = [x for x in names if x != n and x not in d]
        lint += [f"[importlinter:contract:{n}]", f"name = {n} boundaries", "type = forbidden",
                 f"source_modules = {n}", "allow_indirect_imports = True", "forbidden_modules ="]
        lint += [f"    {x}" for x in forbidden] + [""]
    (WS / "architecture.toml").write_text("\n".join(pol))
    (WS / "tach.toml").write_text("\n".join(tach))
    (WS / ".importlinter").write_text("\n".join(lint))
    (WS / "docs" / "architecture_boundaries.md").write_text(
        "# Boundaries\n\n<!-- architecture_policy:start -->\n<!-- architecture_policy:end -->\n")
