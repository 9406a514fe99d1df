"""Reading a uv workspace: its members, their declared dependencies and uv sources.

Nothing is executed or imported: ``pyproject.toml`` files are parsed as TOML. An app is a member
directory (from ``[tool.uv.workspace] members``, default ``apps/*``) holding a ``pyproject.toml``;
its name is the canonical ``[project] name``.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from lemon_quality.errors import WorkspaceError
from lemon_quality.policy import canonical

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


def load_workspace(root: Path) -> Workspace:
    """Read the root ``pyproject.toml`` and every member's."""
    path = root / "pyproject.toml"
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise WorkspaceError(
            f"no pyproject.toml at {root}: pass --root with a uv workspace root"
        ) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise WorkspaceError(f"root pyproject.toml cannot be read: {exc}") from exc
    uv = raw.get("tool", {}).get("uv", {})
    ws = uv.get("workspace", {})
    members = ws.get("members", ["apps/*"])
    excludes = ws.get("exclude", [])
    if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
        raise WorkspaceError(
            "root pyproject.toml: [tool.uv.workspace] members must be an array of glob strings"
        )
    excluded: set[Path] = set()
    for pattern in excludes if isinstance(excludes, list) else []:
        excluded.update(root.glob(str(pattern)))
    dirs = sorted(
        {
            d
            for m in members
            for d in root.glob(m)
            if d.is_dir() and (d / "pyproject.toml").is_file() and d not in excluded
        }
    )
    wsrc, osrc = _sources(raw)
    apps = tuple(_load_app(root, d) for d in dirs)
    return Workspace(root=root, apps=apps, workspace_sources=wsrc, other_sources=osrc)


def _sources(raw: dict[str, Any]) -> tuple[frozenset[str], frozenset[str]]:
    sources = raw.get("tool", {}).get("uv", {}).get("sources", {})
    ws: set[str] = set()
    other: set[str] = set()
    if isinstance(sources, dict):
        for name, spec in sources.items():
            if isinstance(spec, dict) and spec.get("workspace") is True:
                ws.add(canonical(name))
            else:
                other.add(canonical(name))
    return frozenset(ws), frozenset(other)


def _load_app(root: Path, directory: Path) -> App:
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
    deps: list[Dependency] = []
    for req in _reqs(project.get("dependencies", [])):
        deps.append(_dep(req, "project", "dependencies", text))
    optional = project.get("optional-dependencies", {})
    if isinstance(optional, dict):
        for extra, reqs in sorted(optional.items()):
            deps.extend(_dep(r, "optional", extra, text) for r in _reqs(reqs))
    groups = raw.get("dependency-groups", {})
    if isinstance(groups, dict):
        for group, reqs in sorted(groups.items()):
            deps.extend(_dep(r, "group", group, text) for r in _reqs(reqs))
    wsrc, osrc = _sources(raw)
    return App(
        name=canonical(name),
        project_name=name,
        directory=rel,
        import_name=canonical(name),
        dependencies=tuple(d for d in deps if d.name),
        workspace_sources=wsrc,
        other_sources=osrc,
        pyproject_error=None,
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
