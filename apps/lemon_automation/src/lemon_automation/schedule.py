"""Schedules: ``every`` (``anchor + k * period``), ``cron`` (five fields in an IANA zone,
evaluated by cronsim: POSIX OR of day-of-month and day-of-week, ``L``, ``LW``, ``nL``, ``n#k``)
and ``at`` (one instant). Bad input raises :class:`ScheduleError` naming the field and the fix;
an unknown timezone is refused, never treated as UTC."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

__all__ = [
    "At",
    "Cron",
    "Every",
    "Schedule",
    "ScheduleError",
    "parse_duration_ms",
    "shorthand_cron",
    "zone",
]

_DURATION: Final = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)\s*$")
_UNIT_MS: Final = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_MACROS: Final = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
}
_DAYS: Final = {
    "daily": "*", "weekdays": "1-5", "weekends": "0,6",
    "sunday": "0", "monday": "1", "tuesday": "2", "wednesday": "3", "thursday": "4",
    "friday": "5", "saturday": "6",
    "sun": "0", "mon": "1", "tue": "2", "wed": "3", "thu": "4", "fri": "5", "sat": "6",
}  # fmt: skip
_SHORTHAND: Final = re.compile(r"^(?:every\s+)?([a-z]+)\s+at\s+(.+)$")
_CLOCK: Final = re.compile(r"^(\d{1,2})(?::(\d{2}))?\s*(am|pm)?$")
_BARE: Final = {"hourly": "0 * * * *", "daily": "0 0 * * *", "weekly": "0 0 * * 0",
                "monthly": "0 0 1 * *"}  # fmt: skip
#: How far ahead a cron expression is searched before it is called one that never fires.
_HORIZON_YEARS: Final = 8


class ScheduleError(ValueError):
    """A schedule the caller must fix; the message names the field and how."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def parse_duration_ms(text: str, *, field: str = "every") -> int:
    match = _DURATION.match(text)
    if match is None:
        raise ScheduleError(field, f"{text!r} is not a duration; write e.g. 10s, 15m, 2h or 1d")
    return int(match.group(1)) * _UNIT_MS[match.group(2)]


def shorthand_cron(text: str) -> str | None:
    """Lemon's shorthands as five cron fields: ``daily at 9am``, ``weekdays at 09:30``,
    ``weekends at 10pm``, ``monday at 8:15``, ``every friday at 17:00``, and the bare
    ``hourly`` / ``daily`` / ``weekly`` / ``monthly``; ``None`` when ``text`` is not one. A
    shorthand with a bad time is a :class:`ScheduleError` naming ``schedule``."""
    lowered = " ".join(text.strip().lower().split())
    if lowered in _BARE:
        return _BARE[lowered]
    match = _SHORTHAND.match(lowered)
    if match is None or match.group(1) not in _DAYS:
        return None
    clock = _CLOCK.match(match.group(2))
    bad = ScheduleError(
        "schedule", f"{match.group(2)!r} is not a time of day; write e.g. 9am, 5:30pm or 17:30"
    )
    if clock is None:
        raise bad
    hour, minute, half = int(clock.group(1)), int(clock.group(2) or 0), clock.group(3)
    if half is not None:
        if not 1 <= hour <= 12:
            raise bad
        hour = hour % 12 + (12 if half == "pm" else 0)
    if hour > 23 or minute > 59:
        raise bad
    return f"{minute} {hour} * * {_DAYS[match.group(1)]}"


@functools.lru_cache(maxsize=256)
def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``; an unknown one is a ScheduleError (never UTC in its place)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleError(
            "timezone", f"unknown timezone {name!r}; use an IANA name such as Europe/London"
        ) from exc


@dataclass(frozen=True, slots=True)
class Every:
    """Due at ``anchor_ms + k * period_ms`` (k >= 0): every daemon computes the same instants."""

    period_ms: int
    anchor_ms: int

    @classmethod
    def parse(cls, text: str, *, anchor_ms: int) -> Every:
        period = parse_duration_ms(text)
        if period < 1000:
            raise ScheduleError("every", f"{text!r} is below the minimum of 1s")
        return cls(period, anchor_ms)

    def next_after(self, after_ms: int) -> int | None:
        if after_ms < self.anchor_ms:
            return self.anchor_ms
        k = (after_ms - self.anchor_ms) // self.period_ms + 1
        return self.anchor_ms + k * self.period_ms


@dataclass(frozen=True, slots=True)
class Cron:
    """Five cron fields (or a macro) evaluated in ``timezone``."""

    expr: str
    timezone: str

    @classmethod
    def parse(cls, expr: str, timezone: str) -> Cron:
        tz = zone(timezone)
        text = _MACROS.get(expr.strip().lower(), expr.strip())
        if len(text.split()) != 5:
            raise ScheduleError(
                "cron",
                f"{expr!r} has {len(text.split())} fields; write five "
                "(minute hour day-of-month month day-of-week) or @hourly/@daily/@weekly/@monthly",
            )
        try:
            it = CronSim(text, datetime(2026, 1, 1, tzinfo=tz))
        except CronSimError as exc:
            raise ScheduleError("cron", f"{expr!r} is not a valid expression: {exc}") from exc
        cron = cls(text, timezone)
        try:
            first = next(it)
        except StopIteration:
            first = None
        if first is None or first.year > 2026 + _HORIZON_YEARS:
            raise ScheduleError("cron", f"{expr!r} never fires; check day-of-month against month")
        return cron

    def next_after(self, after_ms: int) -> int | None:
        start = datetime.fromtimestamp(after_ms / 1000, tz=zone(self.timezone))
        for due in CronSim(self.expr, start):
            due_ms = int(due.timestamp() * 1000)
            if due_ms > after_ms:
                return due_ms
        return None


@dataclass(frozen=True, slots=True)
class At:
    """One instant; after it the job ends itself."""

    at_ms: int

    @classmethod
    def parse(cls, text: str, *, now_ms: int) -> At:
        try:
            when = datetime.fromisoformat(text)
        except ValueError as exc:
            raise ScheduleError("at", f"{text!r} is not ISO 8601 with an offset") from exc
        if when.tzinfo is None:
            raise ScheduleError("at", f"{text!r} has no UTC offset; add one, e.g. +00:00")
        at_ms = int(when.timestamp() * 1000)
        if at_ms <= now_ms:
            raise ScheduleError("at", f"{text!r} is in the past")
        return cls(at_ms)

    def next_after(self, after_ms: int) -> int | None:
        return self.at_ms if self.at_ms > after_ms else None


Schedule = Every | Cron | At
