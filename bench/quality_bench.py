#!/usr/bin/env python3
"""Benchmark of ``lemon quality`` against import-linter and tach on a synthetic workspace.

Usage: python bench/quality_bench.py [--apps 40] [--modules 250] [--repeat 3] [--tach-repeat 1]
       [--validate] [--no-tools]
       python bench/quality_bench.py --tree PATH [--repeat 3]     # a real uv workspace

Real-tree mode (``--tree``) times ``lemon quality`` and ``python -m lemon_quality`` on the
workspace at PATH against import-linter with one generated ``forbidden`` contract per app (the
apps it may not import: every app that is not a declared dependency), read from the same
package discovery the gate uses; the contract file is written under ``bench/_work``, never into
the tree. Exit codes are reported, not required to be 0 (a real tree may have findings).

Generates ``bench/_work/ws``: a uv workspace of N apps x M modules, layered so that app i
depends on up to three lower apps, each module with realistic imports (stdlib, own app
absolute and relative, allowed workspace deps, a function-local import, an ``if TYPE_CHECKING:``
block, a literal ``importlib.import_module``). The same boundaries are written as
``architecture.toml`` (lemon quality), ``.importlinter`` (one forbidden contract per app, direct
imports only) and ``tach.toml`` (the source roots; ``tach check-external`` checks every import
that leaves a package against that package's pyproject dependencies, which here are exactly the
allowed edges. tach's module graph, ``tach check``, does not apply between workspace packages
that each have a pyproject.toml: such imports count as external, so ``tach check`` would pass a
forbidden import; see tach-org/tach issue 942). The competitors are
installed with ``uv pip`` into a throwaway venv under ``bench/_work/tools-venv``.

Each tool is run as a subprocess, cold (its cache deleted) and warm (cache kept), ``--repeat``
times; medians are printed side by side with the ratio to the fastest competitor.
"""

from __future__ import annotations

import argparse
import os
import resource
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

STDLIB = [
    "json",
    "logging",
    "os",
    "re",
    "time",
    "dataclasses",
    "functools",
    "itertools",
    "collections",
    "pathlib",
    "typing",
    "enum",
    "contextlib",
    "asyncio",
]


def app_name(i: int) -> str:
    return f"app_{i:02d}"


def deps_of(i: int) -> list[int]:
    cands = {i - 1, i // 2, i // 3}
    return sorted(j for j in cands if 0 <= j < i)


def module_names(m: int) -> list[str]:
    # 5 sub-packages sharing m - 6 modules; with the 6 package __init__ files that makes m.
    total = max(5, m - 6)
    sizes = [total // 5 + (1 if p < total % 5 else 0) for p in range(5)]
    return [f"pkg{p}.mod{k:03d}" for p in range(5) for k in range(sizes[p])]


def module_source(i: int, idx: int, mods: list[str], rng_seed: int) -> str:
    me = app_name(i)
    deps = deps_of(i)
    std = [STDLIB[(rng_seed + k) % len(STDLIB)] for k in range(3)]
    lines = [
        f'"""Synthetic module {idx} of {me}.',
        "",
        "It imports what a real module would.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
    ]
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
        "    def codec(self) -> object:",
        "        from json import JSONDecoder",
        "",
        "        return JSONDecoder()",
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
    root = ["[tool.uv.workspace]", 'members = ["apps/*"]', "", "[tool.uv.sources]"]
    root += [f"{n} = {{ workspace = true }}" for n in names]
    (WS / "pyproject.toml").write_text("\n".join(root) + "\n")
    (WS / "README.md").write_text(
        "# Synthetic workspace\n\nSee [the policy](docs/architecture_boundaries.md).\n"
    )
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
        (base / "tests" / f"test_{n}_smoke.py").write_text(
            "def test_ok() -> None:\n    assert True\n"
        )
        deps_toml = ", ".join(f'"{x}"' for x in d)
        (base / "pyproject.toml").write_text(
            f'[project]\nname = "{n}"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n'
            f"dependencies = [{deps_toml}]\n"
        )
        pol += [f"[apps.{n}]", 'role = "layer"', f"allow = [{deps_toml}]", ""]
        forbidden = [x for x in names if x != n and x not in d]
        lint += [
            f"[importlinter:contract:{n}]",
            f"name = {n} boundaries",
            "type = forbidden",
            f"source_modules = {n}",
            "allow_indirect_imports = True",
            "forbidden_modules =",
        ]
        lint += [f"    {x}" for x in forbidden] + [""]
    (WS / "architecture.toml").write_text("\n".join(pol))
    (WS / "tach.toml").write_text("\n".join(tach))
    (WS / ".importlinter").write_text("\n".join(lint))
    (WS / "docs" / "architecture_boundaries.md").write_text(
        "# Boundaries\n\n<!-- architecture_policy:start -->\n<!-- architecture_policy:end -->\n"
    )


def lemon_cmd() -> list[str]:
    exe = ROOT / ".venv" / "bin" / "lemon"
    return [str(exe), "quality", "--root", str(WS)]


def pym_cmd() -> list[str]:
    return [sys.executable, "-m", "lemon_quality", "--root", str(WS)]


def install_tools() -> dict[str, str]:
    """Install import-linter and tach into a throwaway venv; return tool -> version (or error)."""
    found: dict[str, str] = {}
    if not (TOOLS / "bin" / "python").exists():
        subprocess.run(["uv", "venv", "-q", "--python", "3.11", str(TOOLS)], check=False)
    env = {**os.environ, "VIRTUAL_ENV": str(TOOLS)}
    for dist, exe in (("import-linter", "lint-imports"), ("tach", "tach")):
        if not (TOOLS / "bin" / exe).exists():
            proc = subprocess.run(
                ["uv", "pip", "install", "-q", dist],
                env=env,
                check=False,
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                found[dist] = "not installed: " + proc.stderr.strip().splitlines()[-1]
                continue
        ver = subprocess.run(
            [
                str(TOOLS / "bin" / "python"),
                "-c",
                f"import importlib.metadata as m; print(m.version('{dist}'))",
            ],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        found[dist] = ver
    return found


def src_path() -> str:
    return os.pathsep.join(str(p) for p in sorted((WS / "apps").glob("*/src")))


def tool_cmds(versions: dict[str, str]) -> dict[str, tuple[list[str], Path | None]]:
    """name -> (command, cache dir deleted for a cold run)."""
    cmds: dict[str, tuple[list[str], Path | None]] = {
        "lemon quality": (lemon_cmd(), WS / ".lemon_quality_cache"),
        "python -m lemon_quality": (pym_cmd(), WS / ".lemon_quality_cache"),
    }
    if not versions.get("import-linter", "not").startswith("not"):
        cmds[f"import-linter {versions['import-linter']}"] = (
            [str(TOOLS / "bin" / "lint-imports")],
            WS / ".import_linter_cache",
        )
    if not versions.get("tach", "not").startswith("not"):
        cmds[f"tach {versions['tach']}"] = (
            [str(TOOLS / "bin" / "tach"), "check-external"],
            WS / ".tach",
        )
    return cmds


CPU_TIMES: dict[str, list[float]] = {}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(
    cmd: list[str], *, cwd: Path | None = None, pythonpath: str | None = None
) -> tuple[float, int, str]:
    """Wall seconds, exit code and output; the CPU seconds (user + system, the process and
    its children) are recorded in ``CPU_TIMES`` under the command line."""
    env = dict(os.environ)
    # Let every tool keep its bytecode, as on a developer machine (some environments set this).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if "lint-imports" in cmd[0]:
        # import-linter finds the packages through sys.path
        env["PYTHONPATH"] = pythonpath if pythonpath is not None else src_path()
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd or WS, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    CPU_TIMES.setdefault(" ".join(cmd), []).append(_children_cpu() - cpu)
    return wall, proc.returncode, proc.stdout + proc.stderr


def validate(cmds: dict[str, tuple[list[str], Path | None]]) -> None:
    """Each tool passes the clean workspace and fails one with a forbidden import."""
    victim = WS / "apps" / app_name(1) / "src" / app_name(1) / "pkg0" / "mod000.py"
    original = victim.read_text()
    for name, (cmd, _) in cmds.items():
        _, code, out = run(cmd)
        if code != 0:
            raise SystemExit(f"{name} does not pass the clean workspace:\n{out[-2000:]}")
    victim.write_text(original + f"\nfrom {app_name(39)} import pkg0 as _late\n")
    try:
        for name, (cmd, _) in cmds.items():
            _, code, out = run(cmd)
            if code == 0:
                raise SystemExit(f"{name} missed a forbidden import:\n{out[-2000:]}")
    finally:
        victim.write_text(original)


def tree_contract(tree: Path) -> tuple[Path, str, int]:
    """An import-linter config for a real tree (one forbidden contract per app), the
    PYTHONPATH its packages need, and the number of source files the gate sees."""
    from lemon_quality.gate import run_checks
    from lemon_quality.workspace import load_workspace

    ws = load_workspace(tree)
    apps = [a for a in ws.apps if a.pyproject_error is None and a.packages]
    tops = {a.name: sorted({d.partition(".")[0] for d in a.packages}) for a in apps}
    roots = sorted(
        {
            str(tree / a.directory / rel.rpartition("/")[0])
            if "/" in rel
            else str(tree / a.directory)
            for a in apps
            for d, rel in a.packages.items()
            if "." not in d
        }
    )
    names = sorted({t for ts in tops.values() for t in ts})
    lines = ["[importlinter]", "root_packages ="] + [f"    {n}" for n in names] + [""]
    for a in apps:
        allowed = {d.name for d in a.dependencies}
        own = set(tops[a.name])
        forbidden = sorted(
            {t for b in apps if b.name not in allowed and b.name != a.name for t in tops[b.name]}
            - own
        )
        if not forbidden:
            continue
        lines += [
            f"[importlinter:contract:{a.name}]",
            f"name = {a.name} boundaries",
            "type = forbidden",
            "source_modules =",
            *[f"    {t}" for t in sorted(own)],
            "allow_indirect_imports = True",
            "forbidden_modules =",
            *[f"    {t}" for t in forbidden],
            "",
        ]
    WORK.mkdir(exist_ok=True)
    config = WORK / "tree.importlinter"
    config.write_text("\n".join(lines))
    files = run_checks(tree, use_cache=False).statistics["source_files"]
    return config, os.pathsep.join(roots), files


def tree_mode(tree: Path, repeat: int) -> None:
    """Time the gate and import-linter on a real workspace, cold and warm, interleaved."""
    tree = tree.resolve()
    config, pythonpath, files = tree_contract(tree)
    versions = install_tools()
    cmds: dict[str, tuple[list[str], Path]] = {
        "lemon quality": (
            [str(ROOT / ".venv" / "bin" / "lemon"), "quality", "--root", str(tree)],
            tree / ".lemon_quality_cache",
        ),
        "python -m lemon_quality": (
            [sys.executable, "-m", "lemon_quality", "--root", str(tree)],
            tree / ".lemon_quality_cache",
        ),
    }
    if not versions.get("import-linter", "not").startswith("not"):
        cmds[f"lint-imports {versions['import-linter']}"] = (
            [str(TOOLS / "bin" / "lint-imports"), "--config", str(config)],
            tree / ".import_linter_cache",
        )
    print(f"tree: {tree.name}, {files} source files; load average {os.getloadavg()[0]:.1f}")
    for cmd, _ in cmds.values():
        run([*cmd[:1], "--help"] if "lemon_quality" not in cmd else [*cmd[:3], "rules"], cwd=tree)
    cold: dict[str, list[float]] = {n: [] for n in cmds}
    warm: dict[str, list[float]] = {n: [] for n in cmds}
    codes: dict[str, set[int]] = {n: set() for n in cmds}
    for _ in range(repeat):
        for name, (cmd, cache) in cmds.items():
            if cache.exists():
                shutil.rmtree(cache)
            for bucket in (cold, warm):
                seconds, code, _out = run(cmd, cwd=tree, pythonpath=pythonpath)
                bucket[name].append(seconds)
                codes[name].add(code)
    print(f"median of {repeat} runs, seconds")
    print(f"{'tool':28} {'cold':>7} {'warm':>7}  exit codes")
    for name in cmds:
        print(
            f"{name:28} {statistics.median(cold[name]):7.2f} "
            f"{statistics.median(warm[name]):7.2f}  {sorted(codes[name])}"
        )
    lint = next((n for n in cmds if n.startswith("lint-imports")), None)
    if lint is not None:
        base = statistics.median(warm[lint])
        for name in ("lemon quality", "python -m lemon_quality"):
            w = statistics.median(warm[name]) / base
            print(f"{name:28} warm ratio {w:5.2f} (goal <= 1.00: {'met' if w <= 1 else 'MISSED'})")
    if (tree / ".lemon_quality_cache").exists() and tree != ROOT:
        shutil.rmtree(tree / ".lemon_quality_cache")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, help="time a real uv workspace at this path")
    parser.add_argument("--apps", type=int, default=40)
    parser.add_argument("--modules", type=int, default=250)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--tach-repeat", type=int, default=1, help="tach is slow here; its own repeat count"
    )
    parser.add_argument("--no-tools", action="store_true", help="time lemon quality only")
    parser.add_argument(
        "--validate",
        action="store_true",
        help="first check that every tool fails a tree with one forbidden import",
    )
    args = parser.parse_args()
    if args.tree is not None:
        tree_mode(args.tree, args.repeat)
        return
    t0 = time.perf_counter()
    generate(args.apps, args.modules)
    n_files = sum(1 for _ in (WS / "apps").glob("*/src/**/*.py"))
    subprocess.run(
        [sys.executable, "-m", "lemon_quality", "docs", "--root", str(WS)],
        check=True,
        capture_output=True,
    )
    print(f"workspace: {args.apps} apps, {n_files} source files ({time.perf_counter() - t0:.1f} s)")
    versions = {} if args.no_tools else install_tools()
    for dist, ver in versions.items():
        print(f"{dist}: {ver}")
    cmds = tool_cmds(versions)
    load = os.getloadavg()[0]
    if args.validate:
        validate(cmds)
        print("validated: every tool passes the clean tree and fails a forbidden import")
    for cmd, _ in cmds.values():  # untimed: let each tool's own modules be byte-compiled
        run([*cmd[:1], "--help"] if "lemon_quality" not in cmd else [*cmd[:3], "rules"])
    cold: dict[str, list[float]] = {name: [] for name in cmds}
    warm: dict[str, list[float]] = {name: [] for name in cmds}
    cold_cpu: dict[str, list[float]] = {name: [] for name in cmds}
    warm_cpu: dict[str, list[float]] = {name: [] for name in cmds}
    for i in range(max(args.repeat, args.tach_repeat)):
        for name, (cmd, cache) in cmds.items():
            if i >= (args.tach_repeat if name.startswith("tach") else args.repeat):
                continue
            if cache is not None and cache.exists():
                shutil.rmtree(cache)
            for label, bucket in (("cold", cold), ("warm", warm)):
                seconds, code, out = run(cmd)
                if code != 0:
                    raise SystemExit(f"{name} failed on the clean workspace:\n{out[-2000:]}")
                bucket[name].append(seconds)
                (cold_cpu if label == "cold" else warm_cpu)[name].append(
                    CPU_TIMES[" ".join(cmd)][-1]
                )
                print(f"  {name:28} {label} {seconds:6.2f} s", file=sys.stderr, flush=True)
    med_cold = {n: statistics.median(v) for n, v in cold.items()}
    med_warm = {n: statistics.median(v) for n, v in warm.items()}
    cpu_cold = {n: statistics.median(v) for n, v in cold_cpu.items()}
    cpu_warm = {n: statistics.median(v) for n, v in warm_cpu.items()}
    others = [n for n in cmds if "lemon" not in n]
    print()
    print(
        f"median of {args.repeat} runs (tach: {args.tach_repeat}), seconds, "
        f"{os.cpu_count()} cores, load average before the runs {load:.1f}"
    )
    print(f"{'tool':28} {'cold':>7} {'warm':>7} {'cold cpu':>9} {'warm cpu':>9}")
    for name in cmds:
        print(
            f"{name:28} {med_cold[name]:7.2f} {med_warm[name]:7.2f} "
            f"{cpu_cold[name]:9.2f} {cpu_warm[name]:9.2f}"
        )
    if others:
        best = min(others, key=lambda n: med_cold[n])
        print()
        print(
            f"fastest competitor: {best} (cold {med_cold[best]:.2f} s, warm {med_warm[best]:.2f} s)"
        )
        for name in ("lemon quality", "python -m lemon_quality"):
            c = med_cold[name] / med_cold[best]
            w = med_warm[name] / med_warm[best]
            print(
                f"{name:28} cold ratio {c:5.2f} (goal <= 0.80: {'met' if c <= 0.8 else 'MISSED'})"
                f"   warm ratio {w:5.2f} (goal <= 0.15: {'met' if w <= 0.15 else 'MISSED'})"
            )


if __name__ == "__main__":
    main()
