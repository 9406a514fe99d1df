"""A run's working directory, resolved one way by every app.

``resolve_cwd(explicit, default=..., workspace=...)`` is the rule: the explicit cwd of the
request when it is not blank, else the configured default, else the daemon's workspace (the
directory it serves, default the process's current directory); ``~`` is expanded, relative
paths are taken from the process's current directory, and the result is the real path (``..``
and symlinks resolved), so containment checks compare like with like. A missing or non-directory
result raises :class:`CwdError` naming the path and which it was; ``check=False`` resolves
without looking at the filesystem beyond the symlinks (for a caller whose executor checks later
and reports the failure as the run's).

``default_cwd(configured)`` is the engine's lenient default: the configured directory when it is
one, else the user's home, else the process's current directory (it never raises: a daemon
starts with a broken ``default_cwd`` and its runs without an explicit cwd go home).

``is_within(path, root)`` is the containment test on real paths.
"""

from __future__ import annotations

import os

from lemon_core.errors import LemonCoreError

__all__ = ["CwdError", "default_cwd", "is_within", "real_path", "resolve_cwd"]


class CwdError(LemonCoreError, ValueError):
    """A working directory that is missing or not a directory (``path``: the real path)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"working directory {path} {problem}")
        self.path = path
        self.problem = problem


def real_path(path: str) -> str:
    """``path`` with ``~`` expanded, absolute, ``..`` and symlinks resolved (no check)."""
    return os.path.realpath(os.path.expanduser(path))


def resolve_cwd(
    explicit: str | None,
    *,
    default: str | None = None,
    workspace: str | None = None,
    check: bool = True,
) -> str:
    """The working directory of a run (see the module docstring); raises :class:`CwdError`
    for a missing or non-directory result unless ``check`` is false."""
    for candidate in (explicit, default, workspace):
        if candidate is not None and candidate.strip():
            path = real_path(candidate)
            break
    else:
        path = real_path(os.getcwd())
    if check:
        if not os.path.exists(path):
            raise CwdError(path, "does not exist")
        if not os.path.isdir(path):
            raise CwdError(path, "is not a directory")
    return path


def default_cwd(configured: str | None) -> str:
    """The configured default cwd if it is a directory, else home, else the process cwd (real
    paths; never raises)."""
    if configured and configured.strip():
        path = real_path(configured)
        if os.path.isdir(path):
            return path
    home = real_path("~")
    return home if os.path.isdir(home) else real_path(os.getcwd())


def is_within(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or below it, comparing real paths."""
    real, top = real_path(path), real_path(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)
