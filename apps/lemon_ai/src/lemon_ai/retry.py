"""Retry policy: bounded attempts, exponential backoff with jitter, honouring ``retry-after``.

Only errors whose ``retryable`` flag is set are retried (rate limits, 5xx and overloaded, connection
failures before the response began). A provider's ``retry-after`` (or ``retry-after-ms``) wins over
the computed backoff; when it asks for longer than ``max_retry_after`` seconds the call fails at
once with that error rather than hanging. Sleep, clock and randomness are injected so tests are
deterministic. The delays themselves are ``lemon_core.Backoff``'s (:attr:`RetryPolicy.delays`).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from lemon_ai.errors import LemonAiUsageError
from lemon_core.backoff import Backoff, BackoffUsageError
from lemon_core.backoff import parse_retry_after as parse_retry_after_value

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
        try:
            _checked = self.delays  # built once here, so a bad setting fails at construction
        except BackoffUsageError as exc:
            raise LemonAiUsageError(f"RetryPolicy: {exc}") from exc

    @property
    def delays(self) -> Backoff:
        """The delays as a :class:`lemon_core.Backoff` (doubling, capped, jittered)."""
        return Backoff(
            initial=self.base_delay,
            cap=self.max_delay,
            jitter=self.jitter,
            retry_after_cap=self.max_retry_after,
            max_attempts=self.max_attempts,
            random=self.random,
        )

    def backoff(self, retry_number: int) -> float:
        """The computed delay before retry ``retry_number`` (1-based), jitter applied."""
        return self.delays.delay(retry_number)

    def delay_for(self, retry_number: int, retry_after: float | None) -> float | None:
        """The delay before retry ``retry_number``, or ``None`` when the call must not wait.

        ``retry_after`` (seconds asked by the provider) is a lower bound; above
        ``max_retry_after`` the answer is ``None`` (give up now).
        """
        if retry_after is not None and retry_after > self.max_retry_after:
            return None
        return self.delays.delay(retry_number, retry_after=retry_after)


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
    return parse_retry_after_value(value, now=time.time() if now is None else now)
