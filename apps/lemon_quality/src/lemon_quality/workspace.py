"""Reading a uv workspace: its members, their declared dependencies and uv sources.

Nothing is executed or imported: ``pyproject.toml`` files are parsed as TOML. An app is a member
directory (from ``[tool.uv.workspace] members``, default ``apps/*``) holding a ``pyproject.toml``;
its name is the canonical ``[project] name``.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lemon_quality._layout import discover
from lemon_quality.errors import WorkspaceError
from lemon_quality.policy import Policy, canonical

DepKind = Literal["project", "optional", "group"]

_REQ_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


@dataclass(frozen=True, kw_only=True, slots=True)
class Dependency:
    """One declared requirement of an app.

    ``kind`` is ``project`` (``[project] dependencies``), ``optional``
    (``[project.optional-dependencies]``, ``section`` = the extra) or ``group``
    (``[dependency-groups]``, ``section`` = the group).
    """

    name: str
    kind: DepKind
    section: str
    line: int

    def describe(self) -> str:
        """Where it is declared, for messages."""
        if self.kind == "project":
            return "[project] dependencies"
        if self.kind == "optional":
            return f"optional dependency `{self.section}`"
        return f"dependency group `{self.section}`"


@dataclass(frozen=True, kw_only=True, slots=True)
class EntryPoint:
    """One ``[project.entry-points.<group>]`` entry: ``name = "module:attr"``."""

    group: str
    name: str
    module: str
    line: int


@dataclass(frozen=True, kw_only=True, slots=True)
class App:
    """One workspace member."""

    name: str
    project_name: str
    directory: str
    import_name: str
    dependencies: tuple[Dependency, ...]
    workspace_sources: frozenset[str]
    other_sources: frozenset[str]
    pyproject_error: str | None
    packages: Mapping[str, str] = field(default_factory=dict)
    layout_how: str = "discovery"
    source_roots: tuple[str, ...] = ("src",)
    unresolved_dynamic: tuple[str, ...] = ()
    entry_points: tuple[EntryPoint, ...] = ()
    missing_packages: tuple[str, ...] = ()

    def path(self, sub: str) -> str:
        """``sub`` (relative to the app directory) relative to the workspace root."""
        return sub if self.directory in ("", ".") else f"{self.directory}/{sub}"

    def package_dirs(self) -> dict[str, str]:
        """Import name -> directory (or module file) relative to the workspace root."""
        return {k: self.path(v) for k, v in self.packages.items()}


@dataclass(frozen=True, kw_only=True, slots=True)
class Workspace:
    """The root and its members, sorted by directory."""

    root: Path
    apps: tuple[App, ...]
    workspace_sources: frozenset[str]
    other_sources: frozenset[str]

    def app_names(self) -> frozenset[str]:
        """Canonical names of all apps with a readable pyproject."""
        return frozenset(a.name for a in self.apps if a.pyproject_error is None)


def _table(raw: Mapping[str, Any], *keys: str) -> dict[str, Any] | None:
    """The nested table at ``keys`` (``{}`` when absent), or None when something on the way is
    not a table."""
    cur: object = raw
    for key in keys:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(key, {})
    return cur if isinstance(cur, dict) else None


def _check_glob(pattern: str, key: str) -> str:
    """Refuse a member glob that is absolute or leaves the root (a workspace is one tree)."""
    if not pattern or pattern.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", pattern):
        raise WorkspaceError(
            f"root pyproject.toml: [tool.uv.workspace] {key} entry {pattern!r} is absolute; "
            "members are globs relative to the workspace root"
        )
    if ".." in re.split(r"[/\\]", pattern):
        raise WorkspaceError(
            f"root pyproject.toml: [tool.uv.workspace] {key} entry {pattern!r} leaves the "
            "workspace root; members must be inside it"
        )
    return pattern


def load_workspace(root: Path, policy: Policy | None = None) -> Workspace:
    """Read the root ``pyproject.toml`` and every member's.

    ``policy`` supplies explicit per-app ``packages`` / ``source_roots``; without it the
    packages are found from each member's build configuration and by discovery.
    """
    path = root / "pyproject.toml"
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise WorkspaceError(
            f"no pyproject.toml at {root}: pass --root with a uv workspace root"
        ) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise WorkspaceError(f"root pyproject.toml cannot be read: {exc}") from exc
    ws = _table(raw, "tool", "uv", "workspace")
    if ws is None:
        raise WorkspaceError(
            "root pyproject.toml: [tool.uv.workspace] (and [tool] / [tool.uv]) must be tables"
        )
    members = ws.get("members", ["apps/*"])
    excludes = ws.get("exclude", [])
    for key, value in (("members", members), ("exclude", excludes)):
        if not isinstance(value, list) or not all(isinstance(m, str) for m in value):
            raise WorkspaceError(
                f"root pyproject.toml: [tool.uv.workspace] {key} must be an array of glob strings"
            )
        for pattern in value:
            _check_glob(pattern, key)
    real_root = root.resolve()
    excluded: set[Path] = set()
    for pattern in excludes:
        excluded.update(root.glob(pattern))
    candidates: set[Path] = set()
    for m in members:
        if m.strip("/") in (".", ""):
            candidates.add(root)  # the root itself (pathlib cannot glob ".")
        else:
            candidates.update(root.glob(m))
    if isinstance(raw.get("project"), dict):
        candidates.add(root)  # uv: a root with a [project] table is a member too
    dirs = sorted(
        d
        for d in candidates
        if d.is_dir()
        and (d / "pyproject.toml").is_file()
        and d not in excluded
        and d.resolve().is_relative_to(real_root)
    )
    wsrc, osrc = _sources(raw)
    apps = tuple(_load_app(root, d, policy) for d in dirs)
    return Workspace(root=root, apps=apps, workspace_sources=wsrc, other_sources=osrc)


def _sources(raw: dict[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    sources = _table(raw, "tool", "uv", "sources")
    ws: set[str] = set()
    other: set[str] = set()
    if isinstance(sources, dict):
        for name, spec in sources.items():
            if isinstance(spec, dict) and spec.get("workspace") is True:
                ws.add(canonical(name))
            else:
                other.add(canonical(name))
    return frozenset(ws), frozenset(other)


def _load_app(root: Path, directory: Path, policy: Policy | None) -> App:
    rel = directory.relative_to(root).as_posix()
    fallback = canonical(directory.name)
    text = ""
    try:
        text = (directory / "pyproject.toml").read_text(encoding="utf-8")
        raw = tomllib.loads(text)
        project = raw.get("project")
        if not isinstance(project, dict) or not isinstance(project.get("name"), str):
            raise ValueError("it has no [project] name")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ValueError) as exc:
        return App(
            name=fallback,
            project_name=directory.name,
            directory=rel,
            import_name=fallback,
            dependencies=(),
            workspace_sources=frozenset(),
            other_sources=frozenset(),
            pyproject_error=str(exc),
        )
    name = str(project["name"])
    dynamic = project.get("dynamic", [])
    dynamic = {d for d in dynamic if isinstance(d, str)} if isinstance(dynamic, list) else set()
    unresolved: list[str] = []
    deps: list[Dependency] = []
    if "dependencies" in dynamic:
        reqs, why = _dynamic_requirements(directory, raw, "dependencies", root.resolve())
        if why:
            unresolved.append(why)
        deps.extend(_dep(r, "project", "dependencies", text) for r in reqs)
    else:
        deps.extend(
            _dep(r, "project", "dependencies", text) for r in _reqs(project.get("dependencies", []))
        )
    if "optional-dependencies" in dynamic:
        extras, why = _dynamic_extras(directory, raw, root.resolve())
        if why:
            unresolved.append(why)
        optional: object = extras
    else:
        optional = project.get("optional-dependencies", {})
    if isinstance(optional, dict):
        for extra, reqs in sorted(optional.items()):
            deps.extend(_dep(r, "optional", extra, text) for r in _reqs(reqs))
    groups = raw.get("dependency-groups", {})
    if isinstance(groups, dict):
        for group, reqs in sorted(groups.items()):
            deps.extend(_dep(r, "group", group, text) for r in _reqs(reqs))
    wsrc, osrc = _sources(raw)
    pol = policy.apps.get(canonical(name)) if policy is not None else None
    layout = discover(
        directory,
        raw,
        name,
        packages=pol.packages if pol is not None else (),
        roots=pol.source_roots if pol is not None else (),
    )
    tops = sorted(layout.packages)
    import_name = tops[0] if len(tops) == 1 else canonical(name)
    return App(
        name=canonical(name),
        project_name=name,
        directory=rel,
        import_name=import_name,
        dependencies=tuple(d for d in deps if d.name),
        workspace_sources=wsrc,
        other_sources=osrc,
        pyproject_error=None,
        packages=layout.packages,
        layout_how=layout.how,
        source_roots=layout.roots,
        unresolved_dynamic=tuple(unresolved),
        entry_points=_entry_points(project, text),
        missing_packages=layout.missing,
    )


def _entry_points(project: Mapping[str, Any], text: str) -> tuple[EntryPoint, ...]:
    out = []
    groups = project.get("entry-points", {})
    if isinstance(groups, dict):
        for group, entries in sorted(groups.items()):
            if not isinstance(entries, dict):
                continue
            for ep_name, value in sorted(entries.items()):
                if isinstance(value, str) and value.strip():
                    module = value.partition(":")[0].strip().split("[", 1)[0].strip()
                    out.append(
                        EntryPoint(
                            group=group, name=ep_name, module=module, line=_line_of(text, value)
                        )
                    )
    return tuple(out)


def _requirement_lines(
    directory: Path, rel: str, seen: set[Path], boundary: Path
) -> tuple[list[str], str]:
    """Requirements of a requirements file (``-r`` followed, options skipped), or why not.
    Files outside the workspace root (``boundary``) are refused, never read."""
    try:
        path = (directory / rel).resolve()
    except (OSError, RuntimeError):
        return [], f"requirements file {rel} cannot be resolved"
    if not path.is_relative_to(boundary):
        return [], f"requirements file {rel} is outside the workspace"
    if path in seen:
        return [], ""
    seen.add(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [], f"requirements file {rel} cannot be read ({exc.__class__.__name__})"
    out: list[str] = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ", "-c ", "--constraint ")):
            if line.startswith(("-c", "--constraint")):
                continue
            nested = line.split(None, 1)[1]
            more, why = _requirement_lines(path.parent, nested, seen, boundary)
            if why:
                return [], why
            out.extend(more)
            continue
        if line.startswith("-"):
            continue
        out.append(line)
    return out, ""


def _files(directory: Path, files: list[str], boundary: Path) -> tuple[list[str], str]:
    reqs: list[str] = []
    seen: set[Path] = set()
    for rel in files:
        more, why = _requirement_lines(directory, rel, seen, boundary)
        if why:
            return [], why
        reqs.extend(more)
    return reqs, ""


def _dynamic_requirements(
    directory: Path, raw: Mapping[str, Any], field_name: str, boundary: Path
) -> tuple[list[str], str]:
    """Statically resolve dynamic ``dependencies``: hatch requirements files, setuptools
    ``file:``. Returns (requirements, "" when resolved or a reason when not)."""
    tool = raw.get("tool", {}) if isinstance(raw.get("tool"), dict) else {}
    st = (
        tool.get("setuptools", {}).get("dynamic", {})
        if isinstance(tool.get("setuptools"), dict)
        else {}
    )
    spec = st.get(field_name) if isinstance(st, dict) else None
    if isinstance(spec, dict) and "file" in spec:
        files = spec["file"]
        files = [files] if isinstance(files, str) else files
        if isinstance(files, list) and all(isinstance(f, str) for f in files):
            return _files(directory, files, boundary)
    hatch = tool.get("hatch", {}) if isinstance(tool.get("hatch"), dict) else {}
    hook = (
        hatch.get("metadata", {}).get("hooks", {}).get("requirements_txt")
        if isinstance(hatch.get("metadata"), dict)
        and isinstance(hatch["metadata"].get("hooks"), dict)
        else None
    )
    if isinstance(hook, dict):
        files = hook.get("files", ["requirements.txt"])
        if isinstance(files, list) and all(isinstance(f, str) for f in files):
            return _files(directory, files, boundary)
    return [], (
        f"`{field_name}` is dynamic and no static source is configured (setuptools "
        "`[tool.setuptools.dynamic]` `file`, or hatch's `requirements_txt` hook)"
    )


def _dynamic_extras(
    directory: Path, raw: Mapping[str, Any], boundary: Path
) -> tuple[dict[str, list[str]], str]:
    tool = raw.get("tool", {}) if isinstance(raw.get("tool"), dict) else {}
    st = (
        tool.get("setuptools", {}).get("dynamic", {})
        if isinstance(tool.get("setuptools"), dict)
        else {}
    )
    spec = st.get("optional-dependencies") if isinstance(st, dict) else None
    out: dict[str, list[str]] = {}
    if isinstance(spec, dict):
        for extra, body in spec.items():
            files = body.get("file") if isinstance(body, dict) else None
            files = [files] if isinstance(files, str) else files
            if not (isinstance(files, list) and all(isinstance(f, str) for f in files)):
                return {}, f"optional dependency `{extra}` is dynamic without a `file` source"
            reqs, why = _files(directory, files, boundary)
            if why:
                return {}, why
            out[extra] = reqs
        return out, ""
    hatch = tool.get("hatch", {}) if isinstance(tool.get("hatch"), dict) else {}
    meta = hatch.get("metadata", {}) if isinstance(hatch.get("metadata"), dict) else {}
    hooks = meta.get("hooks", {}) if isinstance(meta.get("hooks"), dict) else {}
    hook = hooks.get("requirements_txt")
    if isinstance(hook, dict) and isinstance(hook.get("optional-dependencies"), dict):
        for extra, files in hook["optional-dependencies"].items():
            if not (isinstance(files, list) and all(isinstance(f, str) for f in files)):
                return {}, f"optional dependency `{extra}` has no requirements files"
            reqs, why = _files(directory, files, boundary)
            if why:
                return {}, why
            out[extra] = reqs
        return out, ""
    return {}, (
        "`optional-dependencies` is dynamic and no static source is configured (setuptools "
        "`file`, or hatch's `requirements_txt` hook)"
    )


def _reqs(value: object) -> list[str]:
    # Entries that are not strings ({include-group = ...}) carry no requirement of their own.
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _dep(req: str, kind: DepKind, section: str, text: str) -> Dependency:
    match = _REQ_NAME.match(req)
    name = canonical(match.group(1)) if match else ""
    return Dependency(name=name, kind=kind, section=section, line=_line_of(text, req))


def _line_of(text: str, needle: str) -> int:
    for quote in ('"', "'"):
        pos = text.find(quote + needle)
        if pos >= 0:
            return text.count("\n", 0, pos) + 1
    return 1
