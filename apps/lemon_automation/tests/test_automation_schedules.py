"""Schedules: next due times strictly increase, POSIX OR of day-of-month and day-of-week,
L / LW / 5L / 1#3, DST gap and fall-back, the every anchor, and every bad input refused with
the field named (an unknown timezone is never UTC)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lemon_automation.schedule import At, Cron, Every, ScheduleError, shorthand_cron
from lemon_automation.service import parse_schedule

NY = "America/New_York"


def _ms(text: str, tz: str = "UTC") -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(tz)).timestamp() * 1000)


def _local(ms: int, tz: str) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).astimezone(ZoneInfo(tz))


def _series(cron: Cron, start_ms: int, n: int) -> list[int]:
    out, t = [], start_ms
    for _ in range(n):
        nxt = cron.next_after(t)
        assert nxt is not None
        out.append(nxt)
        t = nxt
    return out


@settings(max_examples=60, deadline=None)
@given(
    expr=st.sampled_from(
        ["*/5 9-17 * * 1-5", "0 0 * * *", "30 1 * * *", "* * * * *", "0 */2 1,15 * *", "0 0 L * *"]
    ),
    tz=st.sampled_from(["UTC", NY, "Europe/London", "Australia/Lord_Howe", "Asia/Kathmandu"]),
    start=st.integers(min_value=_ms("2026-01-01T00:00:00"), max_value=_ms("2026-12-31T00:00:00")),
)
def test_next_is_after_and_strictly_increasing(expr: str, tz: str, start: int) -> None:
    series = _series(Cron.parse(expr, tz), start, 5)
    assert series[0] > start
    assert all(a < b for a, b in itertools.pairwise(series))


def test_posix_or_of_day_of_month_and_day_of_week() -> None:
    # "the 1st, or any Monday": from Thursday 1970-01-01 00:00 the next is Monday the 5th.
    days = [_local(t, "UTC").day for t in _series(Cron.parse("0 0 1 * 1", "UTC"), 0, 2)]
    assert days == [5, 12]
    series = _series(Cron.parse("0 0 13 * 1", "UTC"), _ms("2026-02-01T00:00:00"), 4)
    assert [_local(t, "UTC").day for t in series] == [2, 9, 13, 16]  # OR, not AND


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("0 0 L * *", "2026-02-28"),
        ("0 0 LW * *", "2026-02-27"),
        ("0 0 * * 5L", "2026-02-27"),
        ("0 0 * * 1#3", "2026-02-16"),
    ],
)
def test_last_and_nth_forms(expr: str, expected: str) -> None:
    (due,) = _series(Cron.parse(expr, "UTC"), _ms("2026-02-01T00:00:00"), 1)
    assert _local(due, "UTC").date().isoformat() == expected


def test_spring_forward_gap_runs_at_the_first_valid_minute() -> None:
    (due,) = _series(Cron.parse("30 2 * * *", NY), _ms("2026-03-08T00:00:00", NY), 1)
    assert _local(due, NY).isoformat() == "2026-03-08T03:00:00-04:00"


def test_a_fixed_time_runs_once_per_local_date_across_2026() -> None:
    for tz in (NY, "Europe/London", "Australia/Lord_Howe", "Asia/Kathmandu"):
        cron = Cron.parse("30 1 * * *", tz)
        series = _series(cron, _ms("2026-01-01T00:00:00", tz), 365)
        dates = [_local(t, tz).date() for t in series]
        assert len(dates) == len(set(dates)), tz


def test_a_wildcard_hour_runs_in_both_copies_of_the_repeated_hour() -> None:
    start = _ms("2026-11-01T00:30:00", NY)
    series = _series(Cron.parse("30 * * * *", NY), start, 3)
    assert [_local(t, NY).strftime("%H:%M%z") for t in series] == [
        "01:30-0400",
        "01:30-0500",
        "02:30-0500",
    ]


def test_every_is_anchored() -> None:
    every = Every.parse("15m", anchor_ms=1_000)
    assert every.next_after(0) == 1_000
    assert every.next_after(1_000) == 1_000 + 900_000
    assert every.next_after(1_000 + 900_000 - 1) == 1_000 + 900_000


def test_macros_are_accepted() -> None:
    assert Cron.parse("@daily", "UTC").expr == "0 0 * * *"
    assert Cron.parse("@hourly", "UTC").expr == "0 * * * *"


@pytest.mark.parametrize(
    ("make", "field", "words"),
    [
        (lambda: Cron.parse("61 * * * *", "UTC"), "cron", "not a valid"),
        (lambda: Cron.parse("*/0 * * * *", "UTC"), "cron", "not a valid"),
        (lambda: Cron.parse("0 0 31 2 *", "UTC"), "cron", "day-of-month"),
        (lambda: Cron.parse("* * * *", "UTC"), "cron", "five"),
        (lambda: Cron.parse("* * * * *", "Mars/Base"), "timezone", "IANA"),
        (lambda: Every.parse("500ms", anchor_ms=0), "every", "minimum"),
        (lambda: Every.parse("soon", anchor_ms=0), "every", "not a duration"),
        (
            lambda: At.parse("2020-01-01T00:00:00+00:00", now_ms=_ms("2026-01-01T00:00")),
            "at",
            "past",
        ),
        (lambda: At.parse("2030-01-01T00:00:00", now_ms=0), "at", "offset"),
    ],
)
def test_bad_input_names_the_field(make: object, field: str, words: str) -> None:
    with pytest.raises(ScheduleError, match=words) as info:
        make()  # type: ignore[operator]
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")


def test_at_fires_once() -> None:
    at = At.parse("2030-01-01T00:00:00+00:00", now_ms=0)
    assert at.next_after(0) == at.at_ms
    assert at.next_after(at.at_ms) is None


@pytest.mark.parametrize(
    ("text", "expr"),
    [
        ("daily at 9am", "0 9 * * *"),
        ("Daily At 12pm", "0 12 * * *"),
        ("weekdays at 09:30", "30 9 * * 1-5"),
        ("weekends at 12am", "0 0 * * 0,6"),
        ("monday at 8:15", "15 8 * * 1"),
        ("every friday at 5:30pm", "30 17 * * 5"),
        ("hourly", "0 * * * *"),
        ("weekly", "0 0 * * 0"),
    ],
)
def test_lemons_shorthands_are_normalised_to_cron(text: str, expr: str) -> None:
    assert shorthand_cron(text) == expr
    assert parse_schedule(text) == ("cron", expr)


@pytest.mark.parametrize("text", ["daily at 13pm", "daily at 25:00", "weekdays at noon"])
def test_a_shorthand_with_a_bad_time_names_the_schedule(text: str) -> None:
    with pytest.raises(ScheduleError, match=r"^schedule: .* is not a time of day"):
        shorthand_cron(text)


def test_what_is_not_a_shorthand_is_left_to_the_other_schedules() -> None:
    assert shorthand_cron("every 30m") is None
    assert shorthand_cron("0 9 * * *") is None
    assert parse_schedule("every 30m") == ("every", "30m")
