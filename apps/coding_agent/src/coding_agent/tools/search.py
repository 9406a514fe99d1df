"""Listing and search tools: ``ls``, ``find`` (glob), ``grep`` (regular expression).

Walks skip ``.git`` and, unless ``hidden`` is set, other dot-entries; outputs are bounded by the
workspace limits with a marker when cut. Blocking filesystem work runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from coding_agent.tools._text import cap
from coding_agent.workspace import Workspace
from lemon_agent import Tool, ToolContext, ToolError

__all__ = ["find_tool", "grep_tool", "ls_tool"]

_ALWAYS_SKIPPED = {".git", "__pycache__", "node_modules", ".venv"}


def _walk(root: Path, hidden: bool) -> Iterator[Path]:
    """Files under ``root`` in a stable (sorted) order."""
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(
            d for d in dirs if d not in _ALWAYS_SKIPPED and (hidden or not d.startswith("."))
        )
        for name in sorted(files):
            if hidden or not name.startswith("."):
                yield Path(directory) / name


def _directory(workspace: Workspace, raw: object) -> Path:
    path = workspace.resolve_checked(raw)
    if not path.exists():
        raise ToolError(f"{workspace.show(path)}: no such directory")
    return path


class _Skipped:
    """Files a walk left out, and why: secret files, and links leading out of the tree."""

    def __init__(self, workspace: Workspace, root: Path) -> None:
        self._workspace = workspace
        self._root = root
        # Taken once per walk: every file is compared with them (hard links to a secret).
        self._identities = workspace.access.protected_identities()
        self.secret: list[str] = []
        self.escaping: list[str] = []

    def keep(self, file: Path) -> bool:
        """Whether the walk may use ``file`` (a path under the root, as walked)."""
        # The walk starts from a resolved root and never follows directory links, so only the
        # file itself can be a link: resolve it only then (a realpath per file is costly).
        target = Path(os.path.realpath(file)) if os.path.islink(file) else file
        access = self._workspace.access
        if access.secret_reason(file, resolved=target, identities=self._identities) is not None:
            self.secret.append(self._workspace.show(file))
            return False
        if not (target.is_relative_to(self._root) or self._workspace.contains(target)):
            self.escaping.append(self._workspace.show(file))
            return False
        return True

    def note(self, verb: str) -> str:
        """The marker saying what was left out ("" when nothing was)."""
        out = ""
        if self.secret:
            out += f"\n[{len(self.secret)} secret file(s) {verb}: {_names(self.secret)}]"
        if self.escaping:
            out += (
                f"\n[{len(self.escaping)} file(s) {verb} because they are links leading out "
                f"of the searched directory and the workspace: {_names(self.escaping)}]"
            )
        return out


def _names(paths: list[str], shown: int = 10) -> str:
    more = f", and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more


def ls_tool(workspace: Workspace) -> Tool:
    """``ls``: a directory's entries (directories end with ``/``)."""
    limit = workspace.limits.max_entries

    def run(args: dict[str, Any]) -> str:
        path = _directory(workspace, args.get("path", "."))
        if not path.is_dir():
            return workspace.show(path)
        show_all = bool(args.get("all", False))
        entries = sorted(
            (entry.name + ("/" if entry.is_dir() else ""))
            for entry in path.iterdir()
            if show_all or not entry.name.startswith(".")
        )
        if not entries:
            return f"{workspace.show(path)} is empty"
        listed = "\n".join(entries[:limit])
        if len(entries) > limit:
            listed += f"\n[... {len(entries) - limit} more entries not shown]"
        return listed

    async def execute(ctx: ToolContext) -> str:
        return await asyncio.to_thread(run, dict(ctx.arguments))

    return Tool(
        name="ls",
        description="List a directory (default: the workspace). Directories end with '/'.",
        execute=execute,
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "all": {"type": "boolean", "description": "include dot-entries"},
            },
            "additionalProperties": False,
        },
    )


def find_tool(workspace: Workspace) -> Tool:
    """``find``: files whose path relative to ``path`` matches a glob (``**/*.py``, ``*.md``)."""
    limit = workspace.limits.max_entries

    def run(args: dict[str, Any]) -> str:
        root = _directory(workspace, args.get("path", "."))
        pattern: str = args["pattern"]
        hidden = bool(args.get("hidden", False))
        found: list[str] = []
        more = 0
        skipped = _Skipped(workspace, root)
        for file in _walk(root, hidden):
            if not skipped.keep(file):
                continue
            relative = file.relative_to(root).as_posix()
            if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(file.name, pattern):
                if len(found) < limit:
                    found.append(workspace.show(file))
                else:
                    more += 1
        if not found:
            return f"no files match {pattern!r} under {workspace.show(root)}" + skipped.note(
                "not listed"
            )
        listed = "\n".join(found)
        if more:
            listed += f"\n[... {more} more matches not shown; narrow the pattern]"
        return listed + skipped.note("not listed")

    async def execute(ctx: ToolContext) -> str:
        return await asyncio.to_thread(run, dict(ctx.arguments))

    return Tool(
        name="find",
        description="Find files by glob pattern (matched against the relative path or the name).",
        execute=execute,
        parameters={
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "minLength": 1},
                "path": {"type": "string"},
                "hidden": {"type": "boolean"},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
    )


def grep_tool(workspace: Workspace) -> Tool:
    """``grep``: lines matching a regular expression, as ``path:line: text``."""
    limits = workspace.limits

    def run(args: dict[str, Any]) -> str:
        root = _directory(workspace, args.get("path", "."))
        flags = re.IGNORECASE if args.get("ignore_case") else 0
        raw: str = args["pattern"]
        try:
            regex = re.compile(re.escape(raw) if args.get("literal") else raw, flags)
        except re.error as exc:
            raise ToolError(f"invalid regular expression {raw!r}: {exc}") from exc
        glob = args.get("glob")
        context = int(args.get("context_lines", 0))
        limit = min(int(args.get("max_results", limits.max_matches)), limits.max_matches)
        files = [root] if root.is_file() else _walk(root, bool(args.get("hidden", False)))
        out: list[str] = []
        matches = 0
        skipped = _Skipped(workspace, root)
        for file in files:
            if glob and not fnmatch.fnmatch(file.name, glob):
                continue
            if file is not root and not skipped.keep(file):
                continue
            try:
                if file.stat().st_size > limits.max_file_bytes:
                    continue
                data = file.read_bytes()
            except OSError:
                continue
            if b"\0" in data[:8192]:
                continue
            lines = data.decode("utf-8", errors="replace").splitlines()
            shown = workspace.show(file)
            for number, line in enumerate(lines, 1):
                if not regex.search(line):
                    continue
                matches += 1
                if matches > limit:
                    break
                if context:
                    low, high = max(1, number - context), min(len(lines), number + context)
                    out.extend(f"{shown}:{n}{':' if n == number else '-'} {lines[n - 1]}"
                               for n in range(low, high + 1))  # fmt: skip
                    out.append("--")
                else:
                    out.append(f"{shown}:{number}: {line}")
            if matches > limit:
                break
        if not out:
            return f"no matches for {raw!r}" + skipped.note("not searched")
        text = cap("\n".join(out), limits.max_output_chars)
        if matches > limit:
            text += f"\n[stopped after {limit} matches; narrow the pattern or path]"
        return text + skipped.note("not searched")

    async def execute(ctx: ToolContext) -> str:
        return await asyncio.to_thread(run, dict(ctx.arguments))

    return Tool(
        name="grep",
        description=(
            "Search file contents with a regular expression (Python syntax). Results are "
            "'path:line: text'. Options: literal, ignore_case, glob (file names), context_lines. "
            "Secret files are skipped; a path outside the workspace needs the user's approval."
        ),
        execute=execute,
        parameters={
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "minLength": 1},
                "path": {"type": "string"},
                "glob": {"type": "string"},
                "ignore_case": {"type": "boolean"},
                "literal": {"type": "boolean"},
                "hidden": {"type": "boolean"},
                "context_lines": {"type": "integer", "minimum": 0, "maximum": 10},
                "max_results": {"type": "integer", "minimum": 1},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
    )
