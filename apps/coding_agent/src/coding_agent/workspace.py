"""Where the coding tools work, and the bounds they keep."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from coding_agent.errors import CodingAgentUsageError
from lemon_agent import ToolError

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
    bash_timeout: float = 60.0
    """Default ``bash`` timeout in seconds."""
    bash_max_timeout: float = 600.0
    """Largest timeout a ``bash`` call may ask for."""
    bash_output_bytes: int = 50_000
    """Output ``bash`` keeps (the tail; earlier output is counted and dropped)."""
    max_todos: int = 100


@dataclass(frozen=True, kw_only=True, slots=True)
class Workspace:
    """The directory relative paths resolve against, and the limits."""

    cwd: Path
    limits: CodingLimits = field(default_factory=CodingLimits)

    def __post_init__(self) -> None:
        if not self.cwd.is_dir():
            raise CodingAgentUsageError(f"workspace {self.cwd} is not a directory")

    def resolve(self, raw: object) -> Path:
        """``raw`` (absolute, ``~``-relative or relative to ``cwd``) as an absolute path."""
        if not isinstance(raw, str) or not raw.strip():
            raise ToolError("path must be a non-empty string")
        path = Path(raw).expanduser()
        if not path.is_absolute():
            path = self.cwd / path
        return path.resolve()

    def show(self, path: Path) -> str:
        """``path`` relative to ``cwd`` when it is inside, else absolute."""
        try:
            return str(path.relative_to(self.cwd.resolve())) or "."
        except ValueError:
            return str(path)
