"""Agent definitions: the named kinds of child a run's ``task`` tool may start.

Three sources, later ones overriding earlier ones by name:

1. the built-ins ``general`` (the parent's tools) and ``explore`` (read-only tools);
2. the person's own, ``$LEMON_HOME/agents/<name>.md``;
3. a project's, ``.lemon/agents/<name>.md`` in the nearest directory at or above the run's
   working directory that has one. A project definition comes with the code being worked on,
   so it is used only once the person approved it (``lemon agents approve NAME``, run in that
   project): the approval records the file's SHA-256 in ``$LEMON_HOME/agents/approvals.json``
   (the home only, so a project cannot approve itself) and any change to the file lapses it.

A definition file is Markdown with YAML front matter, parsed like a ``SKILL.md``
(:func:`lemon_skills.parse_manifest`: ``safe_load`` only, bounded)::

    ---
    name: reviewer                 # lowercase letters, digits, single hyphens
    description: reviews a diff    # what the parent's model is told
    tools: [read, grep, find]      # at most these (a list, or "read, grep"); omitted: the parent's
    model: anthropic:claude-x      # optional: the child's model
    max_turns: 8                   # optional: at most this many model calls (1..200)
    ---
    The instructions put before the child's prompt.

A definition can only narrow: the child's tools are the parent's intersected with the
definition's (a tool the parent lacks stays absent), and ``max_turns`` never exceeds the
executor's own limit. A file that does not parse is skipped and reported (``problems``), never
fatal to a run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from lemon_skills import ManifestError, parse_manifest

__all__ = [
    "AGENT_DEFINITIONS",
    "MAX_AGENT_TURNS",
    "AgentApprovals",
    "AgentCatalog",
    "AgentDefinition",
    "agent_file_digest",
    "cached_agent_definitions",
    "find_project_agents",
    "load_agent_definitions",
    "parse_agent_definition",
]

#: The largest ``max_turns`` a definition may set.
MAX_AGENT_TURNS: Final = 200
_MAX_FILE_BYTES: Final = 256 * 1024
_MAX_FILES: Final = 64
_MAX_MODEL_CHARS: Final = 200
_READ_ONLY: Final = frozenset({"read", "ls", "find", "grep", "todo", "read_skill"})

Source = Literal["builtin", "home", "project"]


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentDefinition:
    """A named kind of child: a description for the model, the tools it may have at most
    (``None``: whatever its parent has), a preamble put before the prompt, and optionally its
    model and a tighter turn limit."""

    name: str
    description: str
    tools: frozenset[str] | None = None
    preamble: str = ""
    model: str | None = None
    max_turns: int | None = None
    source: Source = "builtin"
    path: Path | None = None


#: The built-in definitions (``general``: the parent's tools; ``explore``: read-only tools).
AGENT_DEFINITIONS: Final[Mapping[str, AgentDefinition]] = {
    "general": AgentDefinition(
        name="general",
        description="a general worker with the parent's tools (less task past the depth cap)",
    ),
    "explore": AgentDefinition(
        name="explore",
        description="a read-only explorer: read, ls, find, grep (it cannot write or run bash)",
        tools=_READ_ONLY,
        preamble="You are exploring: read and search only, then answer with what you found.",
    ),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentCatalog:
    """The definitions a run may use, the project files waiting for approval and the files
    that did not parse (``(path, what is wrong)``)."""

    definitions: Mapping[str, AgentDefinition]
    pending: tuple[AgentDefinition, ...] = ()
    problems: tuple[tuple[Path, str], ...] = field(default_factory=tuple)


def _tools(value: Any, origin: str) -> frozenset[str] | None:
    if value is None:
        return None
    items: list[Any]
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, list):
        items = value
    else:
        raise ManifestError(f"{origin}: 'tools' must be a list of tool names, e.g. [read, grep]")
    if not all(isinstance(item, str) and item and len(item) <= 64 for item in items):
        raise ManifestError(f"{origin}: every entry of 'tools' must be a tool name")
    return frozenset(items)


def parse_agent_definition(
    text: str, *, origin: str, source: Source = "home", path: Path | None = None
) -> AgentDefinition:
    """One definition file's text; :class:`~lemon_skills.ManifestError` saying what to fix."""
    manifest = parse_manifest(text, origin=origin)
    meta = manifest.metadata
    unknown = sorted(set(meta) - {"tools", "model", "max_turns"})
    if unknown:
        raise ManifestError(
            f"{origin}: unknown front matter keys {unknown}; a definition has name, "
            "description, tools, model and max_turns"
        )
    model = meta.get("model")
    if model is not None and (
        not isinstance(model, str) or not model.strip() or len(model) > _MAX_MODEL_CHARS
    ):
        raise ManifestError(f"{origin}: 'model' must be a model name, e.g. anthropic:claude-x")
    turns = meta.get("max_turns")
    if turns is not None and (
        isinstance(turns, bool) or not isinstance(turns, int) or not 1 <= turns <= MAX_AGENT_TURNS
    ):
        raise ManifestError(f"{origin}: 'max_turns' must be a whole number 1..{MAX_AGENT_TURNS}")
    return AgentDefinition(
        name=manifest.name,
        description=manifest.description,
        tools=_tools(meta.get("tools"), origin),
        preamble=manifest.body.strip(),
        model=model.strip() if isinstance(model, str) else None,
        max_turns=turns,
        source=source,
        path=path,
    )


def agent_file_digest(path: Path) -> str:
    """The SHA-256 of a definition file's bytes (what an approval records)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def find_project_agents(cwd: Path, home: Path) -> Path | None:
    """The nearest ``.lemon/agents`` directory at or above ``cwd`` (the home's never counts)."""
    home_dir = (home / "agents").resolve()
    resolved = cwd.resolve()
    for directory in (resolved, *resolved.parents):
        candidate = directory / ".lemon" / "agents"
        if candidate.is_dir() and candidate.resolve() != home_dir:
            return candidate
    return None


class AgentApprovals:
    """The approved project definitions: ``{agents directory: {name: sha256 of the file}}`` in
    ``$LEMON_HOME/agents/approvals.json``."""

    def __init__(self, home: Path) -> None:
        self.path = home / "agents" / "approvals.json"

    def _read(self) -> dict[str, dict[str, str]]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(raw, dict):
            return {}
        return {
            str(project): {str(k): str(v) for k, v in names.items()}
            for project, names in raw.items()
            if isinstance(names, dict)
        }

    def _write(self, data: dict[str, dict[str, str]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

    def approved(self, directory: Path, name: str, digest: str) -> bool:
        return self._read().get(str(directory.resolve()), {}).get(name) == digest

    def approve(self, directory: Path, name: str, digest: str) -> None:
        data = self._read()
        data.setdefault(str(directory.resolve()), {})[name] = digest
        self._write(data)

    def revoke(self, directory: Path, name: str) -> bool:
        data = self._read()
        names = data.get(str(directory.resolve()), {})
        if name not in names:
            return False
        del names[name]
        if not names:
            data.pop(str(directory.resolve()), None)
        self._write(data)
        return True


def _read_dir(
    directory: Path, source: Source, problems: list[tuple[Path, str]]
) -> list[AgentDefinition]:
    found: list[AgentDefinition] = []
    try:
        files = sorted(p for p in directory.iterdir() if p.suffix == ".md")
    except OSError:
        return found
    if len(files) > _MAX_FILES:
        problems.append((directory, f"over {_MAX_FILES} definition files; the rest are skipped"))
        files = files[:_MAX_FILES]
    for path in files:
        try:
            if path.is_symlink() or not path.is_file():
                raise ManifestError(f"{path}: not a regular file (links are not followed)")
            if path.stat().st_size > _MAX_FILE_BYTES:
                raise ManifestError(f"{path}: over {_MAX_FILE_BYTES} bytes")
            text = path.read_text(encoding="utf-8")
            definition = parse_agent_definition(text, origin=str(path), source=source, path=path)
            if definition.name != path.stem:
                raise ManifestError(
                    f"{path}: 'name' is {definition.name!r}; name the file {definition.name}.md"
                )
        except UnicodeDecodeError:
            problems.append((path, f"{path}: not UTF-8 text"))
        except (ManifestError, OSError) as exc:
            problems.append((path, str(exc)))
        else:
            found.append(definition)
    return found


def load_agent_definitions(home: Path, cwd: Path | None) -> AgentCatalog:
    """The definitions a run in ``cwd`` may use (see the module docstring)."""
    definitions: dict[str, AgentDefinition] = dict(AGENT_DEFINITIONS)
    problems: list[tuple[Path, str]] = []
    pending: list[AgentDefinition] = []
    for definition in _read_dir(home / "agents", "home", problems):
        definitions[definition.name] = definition
    project = find_project_agents(cwd, home) if cwd is not None else None
    if project is not None:
        approvals = AgentApprovals(home)
        for definition in _read_dir(project, "project", problems):
            assert definition.path is not None
            digest = ""
            with contextlib.suppress(OSError):
                digest = agent_file_digest(definition.path)
            if digest and approvals.approved(project, definition.name, digest):
                definitions[definition.name] = definition
            else:
                pending.append(definition)
    return AgentCatalog(definitions=definitions, pending=tuple(pending), problems=tuple(problems))


_Stamp = tuple[tuple[str, int, int], ...]
_CACHED: Final = 64  # (home, project) pairs whose catalogue is kept
_cache: OrderedDict[tuple[str, str | None], tuple[_Stamp, AgentCatalog]] = OrderedDict()


def _stamp_dir(directory: Path, out: list[tuple[str, int, int]]) -> None:
    """The directory's and its ``.md`` files' (mtime, size): what a read would see changing."""
    try:
        info = directory.stat()
    except OSError:
        out.append((str(directory), -1, -1))
        return
    out.append((str(directory), info.st_mtime_ns, info.st_size))
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries[: _MAX_FILES + 1]:
        if entry.name.endswith(".md") or entry.name == "approvals.json":
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            out.append((entry.path, st.st_mtime_ns, st.st_size))


def cached_agent_definitions(home: Path, cwd: Path | None) -> AgentCatalog:
    """:func:`load_agent_definitions`, read again only when a definition file, the
    directories or ``approvals.json`` changed (by mtime and size; a run otherwise takes the
    catalogue from memory: a few ``stat`` calls, no file read, parse or hash)."""
    project = find_project_agents(cwd, home) if cwd is not None else None
    stamp: list[tuple[str, int, int]] = []
    _stamp_dir(home / "agents", stamp)
    if project is not None:
        _stamp_dir(project, stamp)
    key = (str(home), str(project) if project is not None else None)
    frozen = tuple(stamp)
    hit = _cache.get(key)
    if hit is not None and hit[0] == frozen:
        _cache.move_to_end(key)
        return hit[1]
    catalog = load_agent_definitions(home, project.parent.parent if project else None)
    _cache[key] = (frozen, catalog)
    while len(_cache) > _CACHED:
        _cache.popitem(last=False)
    return catalog
