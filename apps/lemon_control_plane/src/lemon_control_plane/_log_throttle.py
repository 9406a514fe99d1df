"""A logging filter that lets through at most one "out of file descriptors" record per interval.

When the process runs out of file descriptors, asyncio's accept loop reports every failed
``accept()`` through the loop's exception handler, which logs it with its traceback on the
``asyncio`` logger ("socket.accept() out of system resource"): tens of thousands of records a
second, tens of megabytes of log in seconds, which makes the shortage worse. The control plane
installs this filter on the ``asyncio`` and ``uvicorn.error`` loggers while it runs. Of the
records it recognises (that message, or any record whose exception is an ``OSError`` with
``EMFILE``, ``ENFILE``, ``ENOBUFS`` or ``ENOMEM``), the first of each kind passes, then none for
``interval_s``; the first one after that passes with the count of those it held back in its
message. Every other record passes untouched.
"""

from __future__ import annotations

import errno
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = ["LogThrottle", "LogThrottleStatistics"]

_ACCEPT_MESSAGE: Final = "socket.accept() out of system resource"
_RESOURCE_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


@dataclass(frozen=True, kw_only=True, slots=True)
class LogThrottleStatistics:
    passed: int
    suppressed: int


class LogThrottle(logging.Filter):
    """See the module docstring. ``clock`` is for tests (monotonic seconds)."""

    def __init__(
        self, interval_s: float = 10.0, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.interval_s = interval_s
        self._clock = clock
        # kind -> (when the last record passed, records held back since)
        self._kinds: dict[tuple[str, str], tuple[float, int]] = {}
        self._passed = 0
        self._suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        kind = _kind(record)
        if kind is None:
            return True
        now = self._clock()
        seen = self._kinds.get(kind)
        if seen is not None and now - seen[0] < self.interval_s:
            self._kinds[kind] = (seen[0], seen[1] + 1)
            self._suppressed += 1
            return False
        held = 0 if seen is None else seen[1]
        self._kinds[kind] = (now, 0)
        self._passed += 1
        if held:
            record.msg = (
                f"{record.getMessage()} ({held} more like it in the last "
                f"{now - seen[0] if seen else 0:.0f}s were not logged)"
            )
            record.args = None
        return True

    def statistics(self) -> LogThrottleStatistics:
        return LogThrottleStatistics(passed=self._passed, suppressed=self._suppressed)


def _kind(record: logging.LogRecord) -> tuple[str, str] | None:
    """The kind of a record this filter throttles, else ``None``."""
    if isinstance(record.msg, str) and record.msg.startswith(_ACCEPT_MESSAGE):
        return record.name, _ACCEPT_MESSAGE
    exc = record.exc_info[1] if record.exc_info else None
    if isinstance(exc, OSError) and exc.errno in _RESOURCE_ERRNOS:
        return record.name, f"errno {exc.errno}"
    return None
