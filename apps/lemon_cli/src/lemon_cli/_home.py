"""Can ``$LEMON_HOME`` hold Lemon's state? One check for every command that keeps state there.

A home that is a regular file, lies under one, cannot be created (``/proc/...``) or cannot be
written in (a read-only directory) is reported as one line naming the path, the reason and what
to do, instead of the traceback the first ``mkdir`` or SQLite open would raise. The check does
not rely on permission bits alone (``os.access`` says yes to root on a read-only mount's
neighbours): it really creates what it needs, and with ``create=False`` removes what it made.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["home_error", "home_problem", "require_home"]

_PROBE_PREFIX = ".lemon-probe-"


def _first_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return Path(path.anchor or ".")


def home_problem(home: Path, *, create: bool) -> str | None:
    """Why ``home`` cannot hold Lemon's state, in words, or ``None`` when it can.

    A missing home is created (mode 0700); with ``create=False`` it is removed again after the
    probe, so nothing is left behind. An existing home gets a short-lived probe file.
    """
    if home.exists() and not home.is_dir():
        return "it is a file, not a directory"
    made: list[Path] = []
    if not home.exists():
        existing = _first_existing(home)
        if existing.exists() and not existing.is_dir():
            return f"{existing} is a file, not a directory"
        missing = [p for p in (home, *home.parents) if p != existing and existing in p.parents]
        try:
            for directory in reversed(missing):
                directory.mkdir(mode=0o700)
                made.append(directory)
        except OSError as exc:
            _remove(made)
            return f"it cannot be created ({exc.strerror or exc})"
    try:
        fd, probe = tempfile.mkstemp(prefix=_PROBE_PREFIX, dir=home)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        if not create:
            _remove(made)
        return f"it cannot be written in ({exc.strerror or exc})"
    if not create:
        _remove(made)
    return None


def _remove(made: list[Path]) -> None:
    for directory in reversed(made):
        with contextlib.suppress(OSError):
            directory.rmdir()


def home_error(home: Path, problem: str) -> str:
    """The one line shown for an unusable home."""
    return (
        f"lemon: cannot use {home} as the Lemon home: {problem}. "
        "Set LEMON_HOME to a directory you can write to (or unset it to use ~/.lemon)."
    )


def require_home(home: Path, *, create: bool) -> None:
    """Exit 2 with :func:`home_error` on standard error when ``home`` is unusable."""
    import typer  # here: the chat's front uses the checks above without Typer

    problem = home_problem(home, create=create)
    if problem is not None:
        typer.echo(home_error(home, problem), err=True)
        raise typer.Exit(2)
