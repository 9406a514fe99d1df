"""Retry policy: bounded attempts, exponential backoff with jitter, honouring ``retry-after``.

Only errors whose ``retryable`` flag is set are retried (rate limits, 5xx and overloaded, connection
failures before the response began). A provider's ``retry-after`` (or ``retry-after-ms``) wins over
the computed backoff; when it asks for longer than ``max_retry_after`` seconds the call fails at
once with that error rather than hanging. Sleep, clock and randomness are injected so tests are
deterministic.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from lemon_ai.errors import LemonAiUsageError

__all__ = ["RetryPolicy", "parse_retry_after"]


def _default_sleep(delay: float) -> Awaitable[None]:
    return asyncio.sleep(delay)


@dataclass(frozen=True, kw_only=True, slots=True)
class RetryPolicy:
    """How a provider call is retried.

    ``max_attempts`` counts the first try (3 = one try and two retries). The n-th retry waits
    ``min(max_delay, base_delay * 2**(n-1))`` reduced by up to ``jitter`` (a fraction) at random.
    """

    max_attempts: int = 3
    base_delay: float = 0.5
    max_delay: float = 20.0
    jitter: float = 0.5
    max_retry_after: float = 60.0
    sleep: Callable[[float], Awaitable[None]] = field(default=_default_sleep, repr=False)
    random: Callable[[], float] = field(default=random.random, repr=False)
    clock: Callable[[], float] = field(default=time.time, repr=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise LemonAiUsageError(
                f"RetryPolicy.max_attempts must be >= 1, got {self.max_attempts}"
            )
        if not 0.0 <= self.jitter <= 1.0:
            raise LemonAiUsageError(f"RetryPolicy.jitter must be within [0, 1], got {self.jitter}")
        if self.base_delay < 0 or self.max_delay < 0 or self.max_retry_after < 0:
            raise LemonAiUsageError("RetryPolicy delays must not be negative")

    def backoff(self, retry_number: int) -> float:
        """The computed delay before retry ``retry_number`` (1-based), jitter applied."""
        delay = min(self.max_delay, self.base_delay * 2.0 ** (retry_number - 1))
        return delay * (1.0 - self.jitter * self.random())

    def delay_for(self, retry_number: int, retry_after: float | None) -> float | None:
        """The delay before retry ``retry_number``, or ``None`` when the call must not wait.

        ``retry_after`` (seconds asked by the provider) is honoured exactly; above
        ``max_retry_after`` the answer is ``None`` (give up now).
        """
        if retry_after is not None:
            if retry_after > self.max_retry_after:
                return None
            return max(0.0, retry_after)
        return self.backoff(retry_number)


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, or ``retry-after`` (seconds or an HTTP date)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)
