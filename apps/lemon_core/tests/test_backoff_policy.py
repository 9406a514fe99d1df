"""Backoff: monotone before jitter, never above the cap, Retry-After honoured up to its cap."""

from __future__ import annotations

import email.utils
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lemon_core import Backoff, BackoffUsageError
from lemon_core.backoff import parse_retry_after

_delays = st.floats(0.0, 1e6, allow_nan=False)
_fractions = st.floats(0.0, 1.0)
_attempts = st.integers(1, 10_000)


@st.composite
def _backoffs(draw: st.DrawFn) -> Backoff:
    value = draw(_fractions)
    return Backoff(
        initial=draw(_delays),
        multiplier=draw(st.floats(1.0, 100.0)),
        cap=draw(_delays),
        jitter=draw(_fractions),
        retry_after_cap=draw(_delays),
        random=lambda: value,
    )


@given(backoff=_backoffs(), attempt=_attempts)
def test_delays_before_jitter_never_decrease(backoff: Backoff, attempt: int) -> None:
    assert backoff.ceiling(attempt) <= backoff.ceiling(attempt + 1)


@given(backoff=_backoffs(), attempt=_attempts)
def test_no_delay_is_above_the_cap_and_jitter_only_shortens(backoff: Backoff, attempt: int) -> None:
    ceiling = backoff.ceiling(attempt)
    assert ceiling <= backoff.cap
    assert ceiling * (1 - backoff.jitter) - 1e-9 <= backoff.delay(attempt) <= ceiling


@given(backoff=_backoffs(), attempt=_attempts, retry_after=_delays)
def test_retry_after_is_respected_within_its_cap(
    backoff: Backoff, attempt: int, retry_after: float
) -> None:
    delay = backoff.delay(attempt, retry_after=retry_after)
    assert delay >= min(retry_after, backoff.retry_after_cap)
    assert delay <= max(backoff.cap, backoff.retry_after_cap)
    assert delay >= backoff.delay(attempt)


def test_the_documented_defaults() -> None:
    backoff = Backoff(random=lambda: 0.0)
    assert [backoff.delay(n) for n in range(1, 9)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    assert Backoff(random=lambda: 1.0).delay(1) == pytest.approx(0.4)  # jitter 0.2
    assert backoff.delay(1, retry_after=1_000) == 300.0
    assert not backoff.exhausted(1_000_000)


def test_a_long_outage_does_not_overflow() -> None:
    assert Backoff(initial=1e-3, cap=5.0).ceiling(10**9) == 5.0


def test_max_attempts_counts_the_first_try() -> None:
    backoff = Backoff(max_attempts=3)
    assert [backoff.exhausted(n) for n in (1, 2, 3)] == [False, False, True]


@pytest.mark.parametrize(
    ("settings", "word"),
    [
        ({"initial": -1.0}, "negative"),
        ({"cap": -1.0}, "negative"),
        ({"retry_after_cap": float("nan")}, "negative"),
        ({"multiplier": 0.5}, "multiplier"),
        ({"jitter": 1.5}, "jitter"),
        ({"max_attempts": 0}, "max_attempts"),
    ],
)
def test_impossible_settings_are_refused(settings: dict[str, Any], word: str) -> None:
    with pytest.raises(BackoffUsageError, match=word):
        Backoff(**settings)


def test_attempts_count_from_one() -> None:
    with pytest.raises(BackoffUsageError, match="from 1"):
        Backoff().delay(0)


def test_retry_after_in_seconds_or_as_an_http_date() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after(" 3 ", now=now) == 3.0
    assert parse_retry_after("-2", now=now) == 0.0
    assert parse_retry_after(email.utils.formatdate(now + 30, usegmt=True), now=now) == (
        pytest.approx(30.0)
    )
    assert parse_retry_after(email.utils.formatdate(now - 30, usegmt=True), now=now) == 0.0
    assert parse_retry_after("soon", now=now) is None
    assert parse_retry_after("inf", now=now) is None
