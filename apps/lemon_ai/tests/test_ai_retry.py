"""Retry policy: backoff with jitter, retry-after parsing, bounds."""

from __future__ import annotations

import email.utils

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lemon_ai import LemonAiUsageError, RetryPolicy, parse_retry_after


def test_retry_after_in_seconds_milliseconds_and_http_date() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=now) == pytest.approx(30.0)
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_backoff_doubles_up_to_the_cap_without_jitter() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=3.0, jitter=0.0)
    assert [policy.backoff(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


@given(number=st.integers(1, 30), draw=st.floats(0.0, 1.0), jitter=st.floats(0.0, 1.0))
def test_jitter_only_shortens_the_delay(number: int, draw: float, jitter: float) -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=20.0, jitter=jitter, random=lambda: draw)
    ceiling = min(20.0, 0.5 * 2 ** (number - 1))
    assert ceiling * (1 - jitter) - 1e-9 <= policy.backoff(number) <= ceiling + 1e-9


def test_retry_after_wins_and_an_excessive_one_gives_up() -> None:
    policy = RetryPolicy(max_retry_after=10.0)
    assert policy.delay_for(1, 4.0) == 4.0
    assert policy.delay_for(1, 11.0) is None


def test_invalid_policies_are_refused() -> None:
    with pytest.raises(LemonAiUsageError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(LemonAiUsageError, match="jitter"):
        RetryPolicy(jitter=2.0)
