"""Where the coding tools work, and the bounds they keep."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from coding_agent._sections import FileAccessConfig
from coding_agent.access import FileAccess
from coding_agent.environment import tool_environment
from coding_agent.errors import CodingAgentUsageError
from lemon_agent import ToolError
from lemon_core.config import lemon_home, read_secrets

__all__ = ["CodingLimits", "Workspace"]


@dataclass(frozen=True, kw_only=True, slots=True)
class CodingLimits:
    """Bounds of the coding tools; every large output is cut with a marker saying so."""

    max_read_lines: int = 2000
    """Lines ``read`` returns at most per call (continue with ``offset``)."""
    max_output_chars: int = 50_000
    """Characters any file/search tool returns at most."""
    max_entries: int = 500
    """Entries ``ls`` and ``find`` list at most."""
    max_matches: int = 200
    """Matching lines ``grep`` returns at most."""
    max_file_bytes: int = 10 * 1024 * 1024
    """Files larger than this are not read, edited or searched."""
    grep_timeout: float = 30.0
    """Seconds one ``grep`` call may take (the walk and the search); past it the search is
    killed and the model told to simplify the pattern."""
    bash_timeout: float = 60.0
    """Default ``bash`` timeout in seconds."""
    bash_max_timeout: float = 600.0
    """Largest timeout a ``bash`` call may ask for."""
    bash_output_bytes: int = 50_000
    """Output ``bash`` keeps (the tail; earlier output is counted and dropped)."""
    max_todos: int = 100


def _default_access() -> FileAccess:
    return FileAccess.from_config(FileAccessConfig(), home=lemon_home())


def _default_env() -> dict[str, str]:
    return tool_environment(os.environ, secret_names=read_secrets(lemon_home()))


@dataclass(frozen=True, kw_only=True, slots=True)
class Workspace:
    """The directory relative paths resolve against (the workspace: it and everything below
    it), the limits, the secret-file rules (:class:`~coding_agent.access.FileAccess`) and the
    environment the tools' processes get (:func:`~coding_agent.environment.tool_environment`;
    by default the process's own less its secrets, taken when the workspace is made)."""

    cwd: Path
    limits: CodingLimits = field(default_factory=CodingLimits)
    access: FileAccess = field(default_factory=_default_access)
    env: Mapping[str, str] = field(default_factory=_default_env, repr=False, compare=False)
    """What ``bash`` runs with (never shown by ``repr``: ``pass_env`` may let a secret in)."""

    def __post_init__(self) -> None:
        if not self.cwd.is_dir():
            raise CodingAgentUsageError(f"workspace {self.cwd} is not a directory")

    def resolve(self, raw: object) -> Path:
        """``raw`` (absolute, ``~``-relative or relative to ``cwd``) as an absolute path, with
        ``..`` and symlinks resolved the way the system resolves them when the file is opened."""
        return Path(os.path.realpath(self.absolute(raw)))

    def absolute(self, raw: object) -> Path:
        """``raw`` as an absolute path, exactly as written (nothing resolved)."""
        if not isinstance(raw, str) or not raw.strip():
            raise ToolError("path must be a non-empty string")
        if "\0" in raw:
            raise ToolError("path must not contain a NUL character")
        path = Path(raw).expanduser()
        return path if path.is_absolute() else self.cwd / path

    def contains(self, resolved: Path) -> bool:
        """Whether the resolved path ``resolved`` is the workspace or below it."""
        return resolved.is_relative_to(self.cwd.resolve())

    def secret_reason(self, path: Path) -> str | None:
        """Why the absolute ``path`` is refused as a secret file, or None (see ``access``)."""
        return self.access.secret_reason(path)

    def resolve_checked(self, raw: object) -> Path:
        """Like :meth:`resolve`, but a secret file is a ToolError saying why it is refused."""
        path = self.absolute(raw)
        reason = self.secret_reason(path)
        if reason is not None:
            raise ToolError(f"{self.show(Path(os.path.normpath(path)))} is refused: {reason}.")
        return Path(os.path.realpath(path))

    def show(self, path: Path) -> str:
        """``path`` relative to ``cwd`` when it is inside, else absolute."""
        try:
            return str(path.relative_to(self.cwd.resolve())) or "."
        except ValueError:
            return str(path)
