"""The wire's secondary methods: usage, run lists, the daemon log, the configuration.

Each reads through the session port (runs and their usage from the run history the runtime
records), the bridge (runs in flight) or the daemon's own files (the log), bounded, and never
puts a secret on the wire (the configuration is redacted).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from lemon_control_plane._wire import _name, model_parts, usage_payload
from lemon_control_plane.errors import WireError
from lemon_core.config import redact_config
from lemon_core.config import redact_text as _redact_text
from lemon_core.sessions import RunRecord

__all__ = [
    "MAX_USAGE_RUNS",
    "UNSUPPORTED",
    "day_range",
    "day_start_ms",
    "log_lines",
    "redacted",
    "run_row",
    "usage_totals",
]

#: Runs read at most to answer one usage question (the answer says when it was cut).
MAX_USAGE_RUNS: Final = 10_000
#: The dates ``usage.cost`` takes (run times are Unix milliseconds).
_FIRST_DAY: Final = dt.date(1970, 1, 1)
_LAST_DAY: Final = dt.date(9999, 12, 30)
_LOG_TAIL_BYTES: Final = 256 * 1024
_LOG_LINE_CHARS: Final = 2000
_LOG_LINE: Final = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)\s+"
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+(?P<message>.*)$"
)
_BARE_LEVEL: Final = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):(?P<message>.*)$")
_LEVELS: Final = {"debug": 10, "info": 20, "warning": 30, "warn": 30, "error": 40, "critical": 50}
#: Methods of the reference the daemon has no feature for: not advertised; a call is answered
#: ``NOT_IMPLEMENTED`` with this reason.
UNSUPPORTED: Final = {
    "config.set": "the configuration is changed in config.toml (`lemon config`), not over the wire",
}


def day_range(start: object, end: object, *, default_days: int = 30) -> tuple[dt.date, dt.date]:
    """The UTC dates ``YYYY-MM-DD`` of ``usage.cost`` (default: the last ``default_days``)."""
    today = dt.datetime.now(dt.UTC).date()

    def parse(value: object, name: str, fallback: dt.date) -> dt.date:
        if value is None:
            return fallback
        if not isinstance(value, str):
            raise WireError("INVALID_REQUEST", f"Type errors: {name}: expected string")
        try:
            day = dt.date.fromisoformat(value)
        except ValueError:
            raise WireError(
                "INVALID_PARAMS", f"{name} {_short(value)!r} is not a date: use YYYY-MM-DD"
            ) from None
        if not _FIRST_DAY <= day <= _LAST_DAY:
            # The day after the last one must exist (the range ends at its midnight).
            raise WireError(
                "INVALID_PARAMS",
                f"{name} must be between {_FIRST_DAY.isoformat()} and {_LAST_DAY.isoformat()}",
            )
        return day

    last = parse(end, "endDate", today)
    default_first = max(_FIRST_DAY, last - dt.timedelta(days=default_days - 1))
    first = parse(start, "startDate", default_first)
    if first > last:
        raise WireError("INVALID_PARAMS", "startDate is after endDate")
    return first, last


def _short(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def day_start_ms(day: dt.date) -> int:
    return int(dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC).timestamp() * 1000)


def _provider(model: str | None) -> str:
    provider, _ = model_parts(model)
    return provider or "unknown"


def usage_totals(runs: Iterable[RunRecord]) -> dict[str, Any]:
    """Tokens, cost and per-provider counts of ``runs``."""
    tokens = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    cost = 0.0
    count = 0
    providers: dict[str, dict[str, Any]] = {}
    for run in runs:
        count += 1
        usage = run.usage
        provider = _provider(usage.model if usage else None)
        row = providers.setdefault(
            provider,
            {"provider": provider, "requests": 0, "cost": 0.0, "inputTokens": 0, "outputTokens": 0},
        )
        row["requests"] += 1
        if usage is None:
            continue
        tokens["input"] += usage.input_tokens
        tokens["output"] += usage.output_tokens
        tokens["cacheRead"] += usage.cache_read_tokens
        tokens["cacheWrite"] += usage.cache_write_tokens
        cost += usage.cost_usd
        row["cost"] = round(row["cost"] + usage.cost_usd, 6)
        row["inputTokens"] += usage.input_tokens
        row["outputTokens"] += usage.output_tokens
    return {
        "runs": count,
        "tokens": tokens,
        "cost": round(cost, 6),
        "providers": sorted(providers.values(), key=lambda r: (-r["requests"], r["provider"])),
    }


def run_row(run: RunRecord) -> dict[str, Any]:
    """``runs.recent.list``'s row."""
    return {
        "runId": run.run_id,
        "status": "completed" if run.ok else "failed",
        "ok": run.ok,
        "engine": "lemon",
        "sessionKey": run.session_key,
        "durationMs": run.duration_ms,
        "startedAtMs": run.started_at_ms,
        "finishedAtMs": run.finished_at_ms,
        "errorCode": None if run.error_code is None else _name(run.error_code),
        "model": run.usage.model if run.usage else None,
        "usage": usage_payload(run.usage),
    }


def log_lines(path: Path | None, *, limit: int, level: object) -> dict[str, Any]:
    """The last ``limit`` lines of the daemon log at ``path`` (read from its last 256 KiB),
    at or above ``level``, oldest first."""
    floor = 0
    if level is not None:
        if not isinstance(level, str) or level.lower() not in _LEVELS:
            raise WireError(
                "INVALID_PARAMS", "level must be one of: debug, info, warning, error, critical"
            )
        floor = _LEVELS[level.lower()]
    if path is None:
        return {"logs": [], "file": None, "notice": "this daemon writes no log file"}
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - _LOG_TAIL_BYTES))
            raw = f.read(_LOG_TAIL_BYTES)
    except FileNotFoundError:
        return {"logs": [], "file": str(path), "notice": "no log yet"}
    except OSError as exc:
        raise WireError("UNAVAILABLE", f"the daemon log cannot be read: {exc.strerror}") from None
    lines = raw.decode("utf-8", "replace").splitlines()
    if size > _LOG_TAIL_BYTES and lines:
        lines = lines[1:]  # the first one is cut
    rows: list[dict[str, Any]] = []
    for line in lines:
        if not line.strip():
            continue
        row = _log_row(line[:_LOG_LINE_CHARS])
        if _LEVELS.get(row["level"], 20) >= floor:
            rows.append(row)
    return {"logs": rows[-limit:], "file": str(path), "truncated": len(rows) > limit}


def _log_row(line: str) -> dict[str, Any]:
    found = _LOG_LINE.match(line)
    if found is not None:
        stamp = found["ts"].replace(",", ".")
        try:
            when = dt.datetime.fromisoformat(stamp)
        except ValueError:
            when = None
        ms = None
        if when is not None:
            ms = int(when.astimezone(dt.UTC).timestamp() * 1000)
        return {
            "timestampMs": ms,
            "level": found["level"].lower(),
            "message": redact_text(found["message"]),
        }
    bare = _BARE_LEVEL.match(line)
    if bare is not None:
        return {
            "timestampMs": None,
            "level": bare["level"].lower(),
            "message": redact_text(bare["message"]),
        }
    return {"timestampMs": None, "level": "info", "message": redact_text(line)}


def redact_text(text: str) -> str:
    """A log line with its credential-shaped words, URL userinfo and DSN passwords hidden."""
    return _redact_text(text)


def redacted(value: Any) -> Any:
    """``value`` (JSON builtins) as it may go on the wire: the configuration's own redaction
    (:func:`lemon_core.config.redact_config`: secret-named keys, URL userinfo, DSN passwords,
    credential-shaped strings)."""
    return redact_config(value)


ConfigView = Callable[[], Mapping[str, Any]]
