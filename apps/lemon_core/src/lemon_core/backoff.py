"""One retry delay policy for every retry loop: exponential growth, a cap, jitter, ``Retry-After``.

A :class:`Backoff` is an immutable value; a loop keeps its own attempt counter and asks
``delay(attempt)`` (1-based: the wait before the first retry is ``delay(1)``). The delay before
jitter is ``min(cap, initial * multiplier ** (attempt - 1))``: non-decreasing in ``attempt`` and
never above ``cap``. Jitter only *shortens* it, by up to ``jitter`` (a fraction in ``[0, 1]``),
drawn from ``random`` (injectable, so tests are deterministic); so a jittered delay never exceeds
the cap either.

A server's ``Retry-After`` (seconds, see :func:`parse_retry_after` for the header's two forms)
is a lower bound: ``delay(attempt, retry_after=s)`` never waits less than the server asked, up
to ``retry_after_cap`` (a server asking for an hour does not park the loop for an hour). Whether
a request that long should rather give up is the loop's decision (``retry_after_cap`` is there
to compare with).

The numbers are seconds by convention; nothing here reads a clock or sleeps.

Documented defaults (what a loop gets for a setting it does not choose): ``initial`` 0.5 s,
``multiplier`` 2, ``cap`` 30 s, ``jitter`` 0.2, ``retry_after_cap`` 300 s, no attempt limit.
"""

from __future__ import annotations

import email.utils
import math
import random as _random
from collections.abc import Callable
from dataclasses import dataclass, field

from lemon_core.errors import LemonCoreError

__all__ = ["Backoff", "BackoffUsageError", "parse_retry_after"]


class BackoffUsageError(LemonCoreError, ValueError):
    """A :class:`Backoff` was built with settings that cannot work (a negative delay, say)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Backoff:
    """How long a retry loop waits before each retry (see the module docstring)."""

    initial: float = 0.5
    """The delay before the first retry (seconds)."""
    multiplier: float = 2.0
    """Each further retry waits this many times longer (>= 1), until ``cap``."""
    cap: float = 30.0
    """No computed delay is longer (seconds)."""
    jitter: float = 0.2
    """Up to this fraction of the delay is taken off at random (0 = none)."""
    retry_after_cap: float = 300.0
    """A server's ``Retry-After`` is honoured up to this many seconds."""
    max_attempts: int | None = None
    """Tries in all, the first included; ``None``: the loop has its own end (a deadline)."""
    random: Callable[[], float] = field(default=_random.random, repr=False, compare=False)
    """The jitter's source: a float in ``[0, 1)`` per call."""

    def __post_init__(self) -> None:
        if not (self.initial >= 0 and self.cap >= 0 and self.retry_after_cap >= 0):
            raise BackoffUsageError(
                "Backoff delays must not be negative "
                f"(initial={self.initial}, cap={self.cap}, retry_after_cap={self.retry_after_cap})"
            )
        if not self.multiplier >= 1:
            raise BackoffUsageError(f"Backoff.multiplier must be >= 1, got {self.multiplier}")
        if not 0.0 <= self.jitter <= 1.0:
            raise BackoffUsageError(f"Backoff.jitter must be within [0, 1], got {self.jitter}")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise BackoffUsageError(f"Backoff.max_attempts must be >= 1, got {self.max_attempts}")

    def ceiling(self, attempt: int) -> float:
        """The delay before retry ``attempt`` (1-based) before jitter."""
        if attempt < 1:
            raise BackoffUsageError(f"Backoff attempts count from 1, got {attempt}")
        if self.initial == 0 or self.cap == 0:
            return 0.0
        try:
            grown = self.initial * self.multiplier ** (attempt - 1)
        except OverflowError:  # a long outage's attempt number: far past the cap
            return self.cap
        return min(self.cap, grown)

    def delay(self, attempt: int, *, retry_after: float | None = None) -> float:
        """The wait before retry ``attempt``: jittered, capped, never below a ``retry_after``
        (itself honoured up to ``retry_after_cap``)."""
        computed = self.ceiling(attempt) * (1.0 - self.jitter * self.random())
        if retry_after is None or not retry_after > 0:
            return computed
        return max(computed, min(retry_after, self.retry_after_cap))

    def exhausted(self, attempts: int) -> bool:
        """True when ``attempts`` tries were made and ``max_attempts`` allows no more."""
        return self.max_attempts is not None and attempts >= self.max_attempts


def parse_retry_after(value: str, *, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` value: delay-seconds or an HTTP date.

    ``now`` is the wall clock (epoch seconds) the date is measured from. ``None`` for a value
    that is neither; a date in the past is 0.
    """
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - now)
