"""Session locks across the processes of one home: one writer of a session's transcript.

On a store one machine's processes share (the default SQLite file) several processes may host
a runtime on the same home at once: the daemon, a ``lemon chat`` or ``lemon tui`` that hosts
its own. Each has its own router and gateway, so neither one's session queue or engine lock
sees the other's runs. Without more, two runs of one session would both write its transcript
(the second one's resume state read before the first one's was written), and a turn is lost.

So, on such a store, a run holds an exclusive ``flock`` on its session's lock file
``<directory>/<hash of the session key>.lock`` from after its local engine lock until its
finalisation has written the session's resume state and run history, as two daemons sharing
PostgreSQL hold the session's shared lease. The next run of the session, in any process,
takes the lock after that and reads the resume state again, so it continues the same
conversation.

Guarantees:

* At most one run of a session executes at a time among the processes of one home (on a file
  system with ``flock``); a waiting run waits as long as the holder runs, as it would wait in
  its session's queue in one process.
* The kernel drops the lock when its process ends, however it ends (``kill -9`` included): a
  dead holder never blocks the session.
* Waiting is a poll (5 ms doubling to 50 ms), cancellable: a cancelled waiter holds nothing.

Not guaranteed: exclusion on a file system without ``flock`` (a network mount); a lock file
that cannot be opened is logged and the run goes on as before (in-process exclusion only).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import logging
from pathlib import Path
from typing import IO, Final

__all__ = ["SessionFileLock", "session_lock_path"]

log = logging.getLogger(__name__)

_POLL_START_S: Final = 0.005
_POLL_MAX_S: Final = 0.05


def session_lock_path(directory: Path, session_key: str) -> Path:
    """The lock file of ``session_key`` (a hash: a session key never becomes a path)."""
    digest = hashlib.sha256(session_key.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return directory / f"{digest}.lock"


def _open(directory: Path, session_key: str) -> IO[bytes]:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    return session_lock_path(directory, session_key).open("ab")


class SessionFileLock:
    """An exclusive ``flock`` on one session's lock file; :meth:`release` is idempotent."""

    def __init__(self, handle: IO[bytes]) -> None:
        self._handle: IO[bytes] | None = handle

    @classmethod
    async def acquire(cls, directory: Path, session_key: str) -> SessionFileLock | None:
        """The session's lock, waiting while another process holds it; None when the lock
        file cannot be used (logged: the run goes on without cross-process exclusion)."""
        try:
            # Opened here, not in a thread: a cancellation while a thread opened it would
            # leave the file open (a local directory and file: no waiting on a network).
            handle = _open(directory, session_key)
        except OSError as exc:
            log.warning("cannot open the session lock in %s: %r", directory, exc)
            return None
        delay = _POLL_START_S
        try:
            while True:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return cls(handle)
                except BlockingIOError:
                    pass
                await asyncio.sleep(delay)
                delay = min(delay * 2, _POLL_MAX_S)
        except OSError as exc:  # no flock here (a network mount)
            handle.close()
            log.warning("cannot lock the session lock in %s: %r", directory, exc)
            return None
        except BaseException:
            handle.close()
            raise

    @property
    def held(self) -> bool:
        return self._handle is not None

    def release(self) -> None:
        """Let the lock go (the file stays: deleting it would race a waiter's open)."""
        handle, self._handle = self._handle, None
        if handle is None:
            return
        try:
            with contextlib.suppress(OSError):
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        finally:
            handle.close()
