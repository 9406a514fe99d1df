"""Runs in flight on a local store: who owns them, and how a dead owner's runs are found.

On a store one machine's processes share (the default SQLite file), every run is recorded in
the store table ``gateway_in_flight`` (:data:`~lemon_gateway._shared.IN_FLIGHT`) from its start
until its finalisation, with its *owner*: the gateway that accepted it. Each gateway holds, for
its whole life, an exclusive ``flock`` on its own owner file ``<owners_dir>/<hash of owner>.lock``,
taken before it records anything; the kernel drops the lock when the process ends, however it
ends (``kill -9`` included).

Guarantees:

* An owner is dead exactly when another process can take its lock (:func:`claim_dead_owner`).
  A live owner is never claimed, so its runs are never completed by anyone else.
* Whoever claims a dead owner holds its lock while it completes that owner's runs (each gets
  one ``vanished`` completion and its record is deleted), and deletes the owner file before
  letting go. Another process that claims the same owner afterwards, through the old file or a
  new one, reads the records again under the lock and finds none: exactly one completion per
  run, whichever processes start or sweep at the same time.
* This is stronger than the home's daemon lock: an in-process runtime (``lemon chat`` without
  a daemon) does not take that lock, but it is an owner like the daemon is.

Not guaranteed: recovery of an owner whose lock file lives on a file system without ``flock``
(a network mount); the store's records are then left in place and logged.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO

from lemon_core.execution import VanishedRun

__all__ = ["OwnerLock", "VanishedHook", "VanishedRun", "claim_dead_owner", "owner_lock_path"]


#: Called (and awaited) before a vanished run's record is forgotten; see
#: :meth:`~lemon_gateway.Gateway.on_vanished`. (:class:`VanishedRun` is core language: the
#: runtime's ``VANISHED_RUN_LISTENER`` hears of the same runs.)
VanishedHook = Callable[[VanishedRun], Awaitable[None]]


def owner_lock_path(directory: Path, owner: str) -> Path:
    """The lock file of ``owner`` (a hash: an owner name never becomes a path)."""
    digest = hashlib.sha256(owner.encode("utf-8")).hexdigest()[:32]
    return directory / f"{digest}.lock"


class OwnerLock:
    """An exclusive ``flock`` on a file, held until :meth:`release` (or the process's end)."""

    def __init__(self, path: Path, handle: IO[bytes]) -> None:
        self.path = path
        self._handle: IO[bytes] | None = handle

    @classmethod
    def take(cls, directory: Path, owner: str) -> OwnerLock:
        """This process's lock as ``owner`` (a fresh name: nobody else can hold it). Blocking."""
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = owner_lock_path(directory, owner)
        handle = path.open("ab")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            handle.close()
            raise
        return cls(path, handle)

    def release(self) -> None:
        """Delete the file, then let the lock go (idempotent). Blocking."""
        handle, self._handle = self._handle, None
        if handle is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        finally:
            handle.close()


def claim_dead_owner(directory: Path, owner: str) -> OwnerLock | None:
    """``owner``'s lock when its process is gone (then hold it while completing its runs and
    :meth:`OwnerLock.release` it); ``None`` while the owner lives. Blocking."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = owner_lock_path(directory, owner)
    handle = path.open("ab")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    except BaseException:
        handle.close()
        raise
    return OwnerLock(path, handle)
