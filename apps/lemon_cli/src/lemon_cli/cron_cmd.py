"""``lemon cron next EXPR [--tz ZONE] [--count N] [--json]``: the next due times of a cron
expression in a timezone, each with its UTC offset, flagging those on a DST transition day.

Bad input (an expression out of range, the wrong number of fields, an unknown timezone) is one
line on stderr naming the field, exit 2. The other ``lemon cron`` commands (add, list, remove,
run, history, pause, resume) need the scheduler's lifespan and are not built yet.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

__all__ = ["cron_app"]

cron_app = typer.Typer(
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Cron schedules (lemon_automation).",
    no_args_is_help=True,
)


@cron_app.command("next")
def next_cmd(
    expr: Annotated[str, typer.Argument(help="Five cron fields or @hourly/@daily/...")],
    tz: Annotated[str, typer.Option("--tz", help="IANA timezone (default UTC).")] = "UTC",
    count: Annotated[int, typer.Option("--count", min=1, max=1000)] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Show the next COUNT due times of EXPR in ZONE with their UTC offsets."""
    from lemon_automation.schedule import Cron, ScheduleError, zone

    try:
        cron = Cron.parse(expr, tz)
    except ScheduleError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    zoneinfo = zone(tz)
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    rows = []
    t = now_ms
    for _ in range(count):
        due = cron.next_after(t)
        if due is None:
            break
        local = datetime.fromtimestamp(due / 1000, tz=UTC).astimezone(zoneinfo)
        day = local.replace(hour=0, minute=0, second=0, microsecond=0)
        before = day.astimezone(UTC).astimezone(zoneinfo).utcoffset()
        after = (day + timedelta(days=1)).astimezone(UTC).astimezone(zoneinfo).utcoffset()
        rows.append(
            {
                "due_at_ms": due,
                "local": local.isoformat(),
                "utc_offset": local.strftime("%z"),
                "dst_transition_day": before != after,
            }
        )
        t = due
    if as_json:
        typer.echo(json.dumps({"expr": cron.expr, "timezone": tz, "next": rows}))
        return
    for row in rows:
        flag = "  (DST transition day)" if row["dst_transition_day"] else ""
        typer.echo(f"{row['local']}{flag}")
