"""Where an app's import packages live, found the way its build backend would find them.

Order: an explicit ``[apps.<app>] packages`` / ``source_roots`` in the policy; then the build
backend's own configuration (uv_build ``module-name``/``module-root``, hatchling
``[tool.hatch.build.targets.wheel] packages``, setuptools ``packages``/``package-dir``/
``packages.find``, pdm ``package-dir``/``includes``, flit ``[tool.flit.module] name``); then
discovery: ``src/<name>`` or ``<name>`` (flat layout), a namespace path built from the name's
parts (``livekit-plugins-openai`` -> ``livekit/plugins/openai``), and finally every package
directory under ``src/`` (or, in a flat layout, beside ``pyproject.toml``).

A directory without ``__init__.py`` is a namespace portion: the app owns the first directories
below it that are regular packages (or hold modules), never the shared namespace itself, so two
apps can each ship a part of ``livekit.plugins``.

Nothing is imported or executed; only ``pyproject.toml`` (already parsed) and directory listings
are read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Directories beside a flat-layout pyproject that are never the app's import package.
_NOT_PACKAGES = frozenset(
    {
        "tests",
        "test",
        "testing",
        "docs",
        "doc",
        "examples",
        "example",
        "scripts",
        "benchmarks",
        "bench",
        "build",
        "dist",
        "tools",
        "site",
        "__pycache__",
        "node_modules",
    }
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Layout:
    """The import packages of one app.

    ``packages`` maps a dotted import name to its directory (or ``.py`` file for a single
    module), relative to the app directory with ``/`` separators. ``how`` says where the answer
    came from (``policy``, a backend name, or ``discovery``); ``roots`` are the source roots.
    """

    packages: Mapping[str, str]
    roots: tuple[str, ...]
    how: str
    missing: tuple[str, ...] = ()


def _is_template(name: str) -> bool:
    return "{{" in name or "{%" in name


def _has_modules(path: Path) -> bool:
    try:
        with os.scandir(path) as entries:
            return any(e.name.endswith(".py") and e.is_file() for e in entries if e.name[0] != ".")
    except OSError:
        return False


def _portions(app_dir: Path, rel: str, dotted: str, depth: int = 0) -> dict[str, str]:
    """``{dotted: rel}`` for a package; a namespace directory yields its regular children."""
    path = app_dir / rel
    if path.is_file():
        return {dotted: rel}
    if not path.is_dir():
        return {}
    if (path / "__init__.py").is_file() or depth > 8 or _has_modules(path):
        return {dotted: rel}
    out: dict[str, str] = {}
    try:
        children = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError:
        return {}
    for entry in children:
        name = entry.name
        if (
            name.startswith((".", "_"))
            or _is_template(name)
            or not name.isidentifier()
            or not entry.is_dir()
        ):
            continue
        out.update(_portions(app_dir, f"{rel}/{name}", f"{dotted}.{name}", depth + 1))
    return out


def _join(root: str, sub: str) -> str:
    root = root.strip("/")
    return sub if root in ("", ".") else f"{root}/{sub}"


def _package(app_dir: Path, root: str, dotted: str) -> dict[str, str]:
    sub = dotted.replace(".", "/")
    rel = _join(root, sub)
    if (app_dir / rel).is_dir():
        return _portions(app_dir, rel, dotted)
    if (app_dir / f"{rel}.py").is_file():
        return {dotted: f"{rel}.py"}
    return {}


def _compositions(parts: Sequence[str]) -> list[str]:
    """Every way to group name parts into dotted segments: a-b-c -> a.b.c, a.b_c, a_b.c, a_b_c."""
    if len(parts) <= 1:
        return ["_".join(parts)]
    out = []
    for rest in _compositions(parts[1:]):
        out.append(f"{parts[0]}.{rest}")
        first, _, tail = rest.partition(".")
        out.append(f"{parts[0]}_{first}" + (f".{tail}" if tail else ""))
    return out


def _dirs(app_dir: Path, root: str) -> list[str]:
    base = app_dir / root if root not in ("", ".") else app_dir
    try:
        entries = sorted(os.scandir(base), key=lambda e: e.name)
    except OSError:
        return []
    names = []
    for e in entries:
        n = e.name
        if n.startswith((".", "_")) or n.endswith(".egg-info") or _is_template(n):
            continue
        if e.is_dir() and n.isidentifier():
            if (Path(e.path) / "pyproject.toml").is_file():
                continue  # a nested project (another member) is never part of this package
            if root in ("", ".") and (
                n in _NOT_PACKAGES or not (Path(e.path) / "__init__.py").is_file()
            ):
                continue
            names.append(n)
    return names


def _from_policy(app_dir: Path, packages: Sequence[str], roots: Sequence[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    search = list(roots) or ["src", "."]
    if packages:
        for dotted in packages:
            for root in search:
                hit = _package(app_dir, root, dotted)
                if hit:
                    found.update(hit)
                    break
        return found
    for root in search:
        for name in _dirs(app_dir, root):
            found.update(_portions(app_dir, _join(root, name), name))
    return found


def _str_list(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def _get(raw: Mapping[str, Any], *keys: str) -> object:
    cur: object = raw
    for key in keys:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(key)
    return cur


def _from_backend(
    app_dir: Path, raw: Mapping[str, Any], norm: str
) -> tuple[str, dict[str, str], tuple[str, ...]] | None:
    backend = _get(raw, "build-system", "build-backend")
    backend = backend if isinstance(backend, str) else ""
    if backend.startswith("uv_build") or _get(raw, "tool", "uv", "build-backend") is not None:
        cfg = _get(raw, "tool", "uv", "build-backend")
        cfg = cfg if isinstance(cfg, dict) else {}
        root = cfg.get("module-root", "src")
        root = root if isinstance(root, str) else "src"
        names = _str_list(cfg.get("module-name")) or [norm]
        found: dict[str, str] = {}
        for dotted in names:
            found.update(_package(app_dir, root, dotted))
        return "uv_build", found, (root or ".",)
    if backend.startswith("hatchling"):
        wheel = _get(raw, "tool", "hatch", "build", "targets", "wheel")
        paths = _str_list(wheel.get("packages")) if isinstance(wheel, dict) else []
        if not paths:
            return None
        found = {}
        roots = []
        for p in paths:
            p = p.strip("/")
            parent, _, name = p.rpartition("/")
            roots.append(parent or ".")
            found.update(_portions(app_dir, p, name) if (app_dir / p).is_dir() else {})
        return "hatchling", found, tuple(dict.fromkeys(roots))
    if backend.startswith("setuptools"):
        st = _get(raw, "tool", "setuptools")
        st = st if isinstance(st, dict) else {}
        pkg_dir = st.get("package-dir")
        root = "."
        if isinstance(pkg_dir, dict) and isinstance(pkg_dir.get(""), str):
            root = pkg_dir[""]
        pkgs = st.get("packages")
        find = _get(st, "packages", "find")
        found = {}
        if isinstance(pkgs, list):
            top = sorted(
                {
                    p
                    for p in _str_list(pkgs)
                    if not any(p.startswith(q + ".") for q in _str_list(pkgs))
                }
            )
            for dotted in top:
                found.update(_package(app_dir, root, dotted))
        elif isinstance(find, dict):
            wheres = _str_list(find.get("where")) or ["."]
            include = _str_list(find.get("include"))
            for where in wheres:
                for name in (
                    _dirs(app_dir, where) if where not in ("", ".") else _dirs(app_dir, ".")
                ):
                    if include and not any(_glob_match(name, pat) for pat in include):
                        continue
                    found.update(_portions(app_dir, _join(where, name), name))
            root = wheres[0]
        else:
            return None
        for mod in _str_list(st.get("py-modules")):
            rel = _join(root, f"{mod}.py")
            if (app_dir / rel).is_file():
                found[mod] = rel
        return "setuptools", found, (root,)
    if backend.startswith("pdm"):
        build = _get(raw, "tool", "pdm", "build")
        build = build if isinstance(build, dict) else {}
        root = build.get("package-dir")
        root = root if isinstance(root, str) else ("src" if (app_dir / "src").is_dir() else ".")
        includes = _str_list(build.get("includes"))
        if not includes:
            return None
        found = {}
        for inc in includes:
            inc = inc.strip("/")
            rel_root = root.strip("/")
            sub = (
                inc[len(rel_root) + 1 :]
                if rel_root not in ("", ".") and inc.startswith(rel_root + "/")
                else inc
            )
            found.update(_package(app_dir, root, sub.replace("/", ".").removesuffix(".py")))
        return "pdm", found, (root,)
    if backend.startswith("flit"):
        flit_name = _get(raw, "tool", "flit", "module", "name")
        dotted = flit_name if isinstance(flit_name, str) else norm
        found = {}
        for root in ("src", "."):
            found = _package(app_dir, root, dotted)
            if found:
                return "flit", found, (root,)
        return "flit", {}, ("src",)
    return None


def _glob_match(name: str, pattern: str) -> bool:
    from fnmatch import fnmatchcase

    return fnmatchcase(name, pattern) or fnmatchcase(name, pattern.split(".", 1)[0])


def discover(
    app_dir: Path,
    raw: Mapping[str, Any],
    project_name: str,
    *,
    packages: Sequence[str] = (),
    roots: Sequence[str] = (),
) -> Layout:
    """The import packages of the app in ``app_dir`` (see the module docstring for the order)."""
    norm = project_name.replace("-", "_").replace(".", "_").lower()
    if packages or roots:
        found = _from_policy(app_dir, packages, roots)
        missing = tuple(
            p for p in packages if not any(f == p or f.startswith(p + ".") for f in found)
        )
        return Layout(
            packages=found, roots=tuple(roots) or ("src", "."), how="policy", missing=missing
        )
    backend = _from_backend(app_dir, raw, norm)
    if backend is not None and backend[1]:
        return Layout(packages=backend[1], roots=backend[2], how=backend[0])
    parts = [p for p in project_name.replace("_", "-").replace(".", "-").lower().split("-") if p]
    for root in ("src", "."):
        for dotted in dict.fromkeys([norm, *_compositions(parts)]):
            hit = _package(app_dir, root, dotted)
            if hit:
                return Layout(packages=hit, roots=(root,), how="discovery")
    for root in ("src", "."):
        found = {}
        for name in _dirs(app_dir, root):
            found.update(_portions(app_dir, _join(root, name), name))
        if found:
            return Layout(packages=found, roots=(root,), how="discovery")
    how = backend[0] if backend is not None else "discovery"
    return Layout(packages={}, roots=("src",), how=how)
