"""Listing and search tools: ``ls``, ``find`` (glob), ``grep`` (regular expression).

Walks skip ``.git`` and, unless ``hidden`` is set, other dot-entries; outputs are bounded by the
workspace limits with a marker when cut. Blocking filesystem work runs in a worker thread.

Model-chosen patterns: ``grep``'s regular expression is searched in a child process with a
deadline (see :func:`grep_tool`): Python's ``re`` backtracks, and one ``search`` call holds the
interpreter lock until it returns. Globs (``find``'s pattern, ``grep``'s ``glob``) go through
``fnmatch``, whose translation of ``*`` cannot backtrack (Python >= 3.9), so they need none.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import msgspec

from coding_agent.tools._text import cap
from coding_agent.workspace import Workspace
from lemon_agent import AbortSignal, Tool, ToolContext, ToolError

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
    """``grep``: lines matching a regular expression, as ``path:line: text``.

    The walk (and the secret-file and link checks) runs in a worker thread; the search itself
    in a child process (:mod:`coding_agent.tools._grep_search`) killed at the deadline
    (``CodingLimits.grep_timeout``), on an abort or when the call is cancelled, so a pattern
    that backtracks exponentially is an error for the model, never a stalled daemon.
    """
    limits = workspace.limits

    def choose(args: dict[str, Any], deadline: float) -> tuple[list[tuple[str, str]], _Skipped]:
        root = _directory(workspace, args.get("path", "."))
        glob = args.get("glob")
        files = [root] if root.is_file() else _walk(root, bool(args.get("hidden", False)))
        skipped = _Skipped(workspace, root)
        chosen: list[tuple[str, str]] = []
        for file in files:
            if time.monotonic() > deadline:
                raise ToolError(_timed_out(args["pattern"], limits.grep_timeout))
            if glob and not fnmatch.fnmatch(file.name, glob):
                continue
            if file is not root and not skipped.keep(file):
                continue
            chosen.append((str(file), workspace.show(file)))
        return chosen, skipped

    async def execute(ctx: ToolContext) -> str:
        args = dict(ctx.arguments)
        raw: str = args["pattern"]
        deadline = time.monotonic() + limits.grep_timeout
        chosen, skipped = await asyncio.to_thread(choose, args, deadline)
        limit = min(int(args.get("max_results", limits.max_matches)), limits.max_matches)
        request = {
            "pattern": raw,
            "ignore_case": bool(args.get("ignore_case", False)),
            "literal": bool(args.get("literal", False)),
            "context": int(args.get("context_lines", 0)),
            "limit": limit,
            "max_output_chars": limits.max_output_chars,
            "max_file_bytes": limits.max_file_bytes,
            "timeout_s": limits.grep_timeout,
            "protected": list(workspace.access.protected_identities()),
            "files": chosen,
        }
        timed_out = _timed_out(raw, limits.grep_timeout)
        answer = await _search(request, deadline, ctx.signal, timed_out=timed_out)
        if answer.error is not None:
            raise ToolError(answer.error)
        skipped.secret.extend(answer.secret)
        if not answer.lines:
            return f"no matches for {raw!r}" + skipped.note("not searched")
        text = cap("\n".join(answer.lines), limits.max_output_chars)
        if answer.matches > limit:
            text += f"\n[stopped after {limit} matches; narrow the pattern or path]"
        return text + skipped.note("not searched")

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


_SEARCH: Final = Path(__file__).with_name("_grep_search.py")
_KILLED_FOR_CPU: Final = -signal.SIGXCPU


class _Answer(msgspec.Struct, frozen=True, kw_only=True):
    """What the search child answers (see :mod:`coding_agent.tools._grep_search`)."""

    error: str | None = None
    lines: list[str] = []
    matches: int = 0
    secret: list[str] = []


def _timed_out(pattern: str, timeout: float) -> str:
    return (
        f"grep timed out after {timeout:g} s and was stopped: the pattern {pattern!r} is too "
        "slow on these files (nested repetition such as (a+)+ or (a|aa)* can take exponential "
        "time). Simplify the pattern (or use literal=true), or narrow path or glob."
    )


async def _search(
    request: dict[str, Any], deadline: float, abort: AbortSignal, *, timed_out: str
) -> _Answer:
    """Run the search child on ``request``; kill it at ``deadline`` (a ToolError saying
    ``timed_out``), on ``abort`` or when the caller is cancelled (it is always reaped before
    this returns or raises)."""
    # An empty environment (it needs none) and its own session: a terminal's Ctrl-C is the
    # daemon's to handle, and the child is killed when the call ends, whatever way it ends.
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", str(_SEARCH),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={}, start_new_session=True,
    )  # fmt: skip
    talking = asyncio.ensure_future(child.communicate(json.dumps(request).encode()))
    aborted = asyncio.ensure_future(abort.wait())
    try:
        done, _ = await asyncio.wait(
            {talking, aborted},
            timeout=max(deadline - time.monotonic(), 0.0),
            return_when=asyncio.FIRST_COMPLETED,
        )
    finally:
        aborted.cancel()
        if child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
        out, err = await talking  # the pipes close with the child; then it is reaped
    if talking not in done:
        if aborted in done:
            raise ToolError("grep was aborted; the search was stopped")
        raise ToolError(timed_out)
    if child.returncode == _KILLED_FOR_CPU:
        raise ToolError(timed_out)
    if child.returncode != 0:
        tail = err.decode("utf-8", errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise ToolError(f"grep's search failed (exit code {child.returncode}): {tail[0]}")
    try:
        return msgspec.convert(json.loads(out), _Answer)
    except (ValueError, msgspec.ValidationError) as exc:
        raise ToolError(f"grep's search gave an answer that cannot be read: {exc}") from None
