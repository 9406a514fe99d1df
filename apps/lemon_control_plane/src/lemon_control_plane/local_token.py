"""The home's local token: what the owner's own clients present to a loopback daemon.

A loopback bind is reachable by every account of the machine, so "loopback" alone proves
nothing about who connects. The daemon therefore requires a token on loopback too, and makes the
owner's one itself: ``$LEMON_HOME/control_plane/local_token`` (the folder 0700, the file 0600),
created at the daemon's first start and reused after. Whoever can read that file is the owner
(it has every scope); another account cannot read it and so gets ``UNAUTHORIZED``.

The owner's clients read it without being told: ``lemon chat``, bare ``lemon``, ``lemon tui``
and ``lemon web`` call :func:`client_token` (``LEMON_CONTROL_PLANE_TOKEN`` first, when set,
else this file). Another client (Lemon's own terminal UI) is given it with
``LEMON_CONTROL_PLANE_TOKEN=$(lemon tokens local)``.

Creation is atomic and first-writer-wins: the secret is written to a private temporary file
which is then hard-linked to the final name (``link`` never replaces an existing file), so
two daemons or clients starting together agree on one token and nobody ever reads a partial
one. A file that group or others could read is treated as disclosed: it is replaced by a new
token (the old one stops working at the daemon's next start). Symbolic links are refused.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from lemon_control_plane.config import TOKEN_ENV
from lemon_control_plane.errors import ControlPlaneConfigError

__all__ = [
    "LOCAL_TOKEN_ID",
    "client_token",
    "ensure_local_token",
    "local_token_path",
    "read_local_token",
]

_log = logging.getLogger(__name__)

#: The token id connections with the local token are recorded under.
LOCAL_TOKEN_ID: Final = "local"
_PREFIX: Final = "lcp_local_"


def local_token_path(home: Path) -> Path:
    """Where ``home``'s local token lives."""
    return home / "control_plane" / "local_token"


def _read(path: Path) -> str | None:
    """The token in ``path`` (``None``: no file, or one that group/others could read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if os.path.islink(path):
            raise ControlPlaneConfigError(
                f"the local token {path} is a symbolic link; remove it (a new one is made)"
            ) from None
        raise ControlPlaneConfigError(f"cannot read the local token {path}: {exc}") from None
    with os.fdopen(fd, "r", encoding="ascii", errors="replace") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ControlPlaneConfigError(f"the local token {path} is not a regular file")
        if info.st_mode & 0o077:
            return None
        token = f.read().strip()
    return token or None


def read_local_token(home: Path) -> str | None:
    """``home``'s local token, or ``None`` (none yet, unreadable by this account, or exposed
    to other accounts: never use one of those)."""
    try:
        return _read(local_token_path(home))
    except (ControlPlaneConfigError, OSError):
        return None


def ensure_local_token(path: Path) -> str:
    """The token in ``path``, created first when there is none (see the module docstring);
    :class:`ControlPlaneConfigError` when it cannot be read or made."""
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if folder.stat().st_mode & 0o077:
            os.chmod(folder, 0o700)
    except OSError as exc:
        raise ControlPlaneConfigError(f"cannot prepare {folder}: {exc}") from None
    for _ in range(3):
        found = _read(path)
        if found is not None:
            return found
        if path.exists():  # readable by others: disclosed, make a new one
            _log.warning("the local token %s was readable by other accounts; replacing it", path)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        token = _PREFIX + secrets.token_urlsafe(32)
        tmp = folder / f".local_token.{os.getpid()}.{secrets.token_hex(4)}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as out:
                out.write(token + "\n")
                out.flush()
                os.fsync(out.fileno())
            try:
                os.link(tmp, path)
            except FileExistsError:
                continue  # another process made it first: read theirs
            return token
        except OSError as exc:
            raise ControlPlaneConfigError(f"cannot write the local token {path}: {exc}") from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
    raise ControlPlaneConfigError(f"the local token {path} keeps changing; is something else?")


def client_token(home: Path, environ: Mapping[str, str] | None = None) -> str | None:
    """The token a client of ``home``'s daemon presents: ``LEMON_CONTROL_PLANE_TOKEN`` when
    set, else ``home``'s local token (``None``: neither is there to read)."""
    env = os.environ if environ is None else environ
    return env.get(TOKEN_ENV) or read_local_token(home)
