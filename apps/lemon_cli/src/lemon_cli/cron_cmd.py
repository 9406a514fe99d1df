"""``lemon cron``: scheduled jobs (lemon_automation), and ``lemon heartbeat``.

- ``next EXPR [--tz ZONE] [--count N]``: the next due times of a cron expression in a timezone,
  each with its UTC offset, flagging those on a DST transition day.
- ``add NAME (--cron EXPR [--tz ZONE] | --every DUR | --at TIME) --prompt TEXT [--agent ID]
  [--session KEY] [--jitter DUR] [--catch-up latest|all|skip] [--grace DUR] [--timeout DUR]
  [--max-retries N] [--channel CHANNEL:PEER] [--model P:M] [--skill NAME ...]``, ``update ID
  [--name N] [--prompt T] [--jitter D] [--catch-up P] [--grace D] [--timeout D]
  [--max-retries N] [--model P:M|''] [--skill NAME ... | --no-skills]``, ``list``,
  ``remove ID``, ``pause ID``,
  ``resume ID``, ``run ID [--wait]``, ``history [ID] [--limit N]``, ``abort RUN_ID``,
  ``audit [--job ID] [--action A]``.
- ``lemon cron --url ws://HOST:PORT/ws ...`` (and ``lemon heartbeat --url ...``) talks to that
  daemon only (given ``LEMON_CONTROL_PLANE_TOKEN``, never this home's local token).
- ``lemon heartbeat set|show|off [--agent ID] [--every DUR] [--prompt TEXT] [--channel T]
  [--active-hours HH:MM-HH:MM|none] [--tz ZONE]``.

Each works against this home's running daemon (its ``cron.*`` / ``set-heartbeats`` /
``last-heartbeat`` wire methods) and, when none runs, against the configured store directly
with the same handlers (a daemon started later sees the change within ``poll_ms``); ``run``
needs the daemon. Every command takes ``--json``. Bad input is one line on stderr naming the
field, exit 2; nothing is stored.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import typer

from lemon_cli._groups import command_group
from lemon_cli._output import make_console
from lemon_cli._wire_call import daemon_call, daemon_runs

__all__ = ["cron_app", "heartbeat_app"]

cron_app = command_group("Cron schedules (lemon_automation).")


@cron_app.command("next")
def next_cmd(
    expr: Annotated[str, typer.Argument(help="Five cron fields or @hourly/@daily/...")],
    tz: Annotated[str, typer.Option("--tz", help="IANA timezone (default UTC).")] = "UTC",
    count: Annotated[int, typer.Option("--count", min=1, max=1000)] = 5,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Show the next COUNT due times of EXPR in ZONE with their UTC offsets."""
    import json

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


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]
IdArg = Annotated[str, typer.Argument(help="The job id (see lemon cron list).")]


def _fail(command: str, message: str, code: int) -> typer.Exit:
    make_console(emoji=False, stderr=True, highlight=False).print(
        f"{command}: {message}", markup=False
    )
    return typer.Exit(code)


_TARGET: dict[str, str | None] = {"url": None}

UrlOpt = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="The daemon's WebSocket, ws://HOST:PORT/ws (it gets LEMON_CONTROL_PLANE_TOKEN only).",
    ),
]


def _target(url: str | None) -> None:
    if url is not None and not url.startswith(("ws://", "wss://")):
        raise _fail("lemon cron", f"--url must be ws://HOST:PORT/ws, not {url!r}", 2)
    _TARGET["url"] = url


@cron_app.callback()
def _cron_main(url: UrlOpt = None) -> None:
    """Cron schedules (lemon_automation): on --url, else this home's daemon, else the store."""
    _target(url)


def call(command: str, method: str, params: dict[str, Any]) -> Any:
    """``method`` on the daemon at ``--url``, else the running daemon, else on the store
    directly; the payload with snake-case keys."""
    from lemon_automation.local import snake

    url = _TARGET["url"]
    if url is not None or daemon_runs():
        payload = daemon_call(
            command,
            method,
            params,
            feature="automation",
            app="lemon_automation",
            hint="set [automation] enabled = true, or leave it unset, and restart the daemon",
            url=url,
        )
        return snake(payload)
    import asyncio

    from lemon_automation.local import call_on_store
    from lemon_core.config import ConfigError, load_config
    from lemon_core.errors import UsageError
    from lemon_core.store import StoreError

    try:
        loaded = load_config()
        return snake(asyncio.run(call_on_store(loaded, method, params)))
    except UsageError as exc:
        raise _fail(command, str(exc), 2) from None
    except (ConfigError, StoreError) as exc:
        raise _fail(command, str(exc), 1) from None


def _ms(command: str, text: str | None, field: str) -> int | None:
    if text is None:
        return None
    from lemon_automation.schedule import ScheduleError, parse_duration_ms

    try:
        return parse_duration_ms(text, field=field)
    except ScheduleError as exc:
        raise _fail(command, str(exc), 2) from None


def _when(ms: int | None, tz: str = "UTC") -> str:
    if ms is None:
        return "-"
    from zoneinfo import ZoneInfo

    try:
        zone = ZoneInfo(tz)
    except (KeyError, ValueError):
        zone = ZoneInfo("UTC")
    return datetime.fromtimestamp(ms / 1000, tz=UTC).astimezone(zone).isoformat(timespec="seconds")


def _job_line(job: dict[str, Any]) -> str:
    state = "enabled" if job.get("enabled") else "paused"
    last = job.get("last_status") or "-"
    return (
        f"{job['id']}  {job['name']}  {job['schedule']}  {job.get('timezone')}  "
        f"next {_when(job.get('next_due_at_ms'), job.get('timezone') or 'UTC')}  {state}  "
        f"last {last}"
    )


@cron_app.command("add")
def add_cmd(
    name: Annotated[str, typer.Argument(help="The job's name (unique per agent).")],
    prompt: Annotated[str, typer.Option("--prompt", help="What the agent is asked.")],
    cron: Annotated[str | None, typer.Option("--cron", help="Five cron fields.")] = None,
    every: Annotated[str | None, typer.Option("--every", help="A period: 10s, 15m, 2h.")] = None,
    at: Annotated[str | None, typer.Option("--at", help="One ISO 8601 instant.")] = None,
    tz: Annotated[str | None, typer.Option("--tz", help="IANA timezone of --cron.")] = None,
    agent: Annotated[str, typer.Option("--agent", help="The agent id.")] = "default",
    session: Annotated[str | None, typer.Option("--session", help="Run in this session.")] = None,
    jitter: Annotated[str | None, typer.Option("--jitter", help="Up to this late.")] = None,
    catch_up: Annotated[str, typer.Option("--catch-up", help="latest, all or skip.")] = "latest",
    grace: Annotated[str | None, typer.Option("--grace", help="Misfire grace.")] = None,
    timeout: Annotated[str | None, typer.Option("--timeout", help="Run timeout.")] = None,
    max_retries: Annotated[int, typer.Option("--max-retries", min=0, max=10)] = 0,
    channel: Annotated[
        str | None, typer.Option("--channel", help="Also deliver each summary: telegram:CHAT.")
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Pin the model: provider:model.")
    ] = None,
    skill: Annotated[
        list[str] | None, typer.Option("--skill", help="A skill the prompt needs (repeatable).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Add a job that runs PROMPT on a schedule."""
    import json

    command = "lemon cron add"
    chosen = [(k, v) for k, v in (("cron", cron), ("every", every), ("at", at)) if v is not None]
    if len(chosen) != 1:
        raise _fail(command, "schedule: give exactly one of --cron, --every or --at", 2)
    kind, value = chosen[0]
    if tz is not None and kind != "cron":
        raise _fail(command, "timezone: --tz goes with --cron only", 2)
    schedule = value if kind == "cron" else f"{kind} {value}"
    params: dict[str, Any] = {
        "name": name,
        "schedule": schedule,
        "prompt": prompt,
        "agentId": agent,
        "catchUp": catch_up,
        "maxRetries": max_retries,
    }
    if tz is not None:
        params["timezone"] = tz
    if session is not None:
        params["sessionKey"] = session
    if channel is not None:
        params["channel"] = channel
    if model is not None:
        params["model"] = model
    if skill:
        params["skills"] = list(skill)
    for key, text, field in (
        ("jitterSec", jitter, "jitter"),
        ("graceSec", grace, "grace"),
        ("timeoutSec", timeout, "timeout"),
    ):
        ms = _ms(command, text, field)
        if ms is not None:
            params[key] = ms / 1000
    job = call(command, "cron.add", params)["job"]
    if as_json:
        typer.echo(json.dumps(job))
    else:
        typer.echo(f"added {_job_line(job)}")


@cron_app.command("list")
def list_cmd(as_json: JsonOpt = False) -> None:
    """List the jobs: id, name, schedule, timezone, next due time, state, last status."""
    import json

    payload = call("lemon cron list", "cron.list", {})
    if as_json:
        typer.echo(json.dumps(payload))
        return
    if not payload["jobs"]:
        typer.echo("no jobs (add one with lemon cron add)")
    for job in payload["jobs"]:
        typer.echo(_job_line(job))
    for bad in payload.get("quarantined", []):
        typer.echo(f"quarantined {bad['id']}: {bad['reason']}")


def _toggle(method: str, verb: str) -> Any:
    def command(job_id: IdArg, as_json: JsonOpt = False) -> None:
        import json

        payload = call(f"lemon cron {verb}", method, {"id": job_id})
        if as_json:
            typer.echo(json.dumps(payload))
        elif method == "cron.remove":
            typer.echo(f"removed {payload['id']} ({payload['name']})")
        else:
            typer.echo(_job_line(payload["job"]))

    command.__doc__ = {
        "cron.remove": "Remove a job: future fires stop (one in flight finishes).",
        "cron.pause": "Pause a job (its due times are not fired until resumed).",
        "cron.resume": "Resume a paused job.",
    }[method]
    return command


cron_app.command("remove")(_toggle("cron.remove", "remove"))
cron_app.command("pause")(_toggle("cron.pause", "pause"))
cron_app.command("resume")(_toggle("cron.resume", "resume"))


@cron_app.command("update")
def update_cmd(
    job_id: IdArg,
    name: Annotated[str | None, typer.Option("--name", help="A new name.")] = None,
    prompt: Annotated[str | None, typer.Option("--prompt", help="A new prompt.")] = None,
    jitter: Annotated[str | None, typer.Option("--jitter", help="Up to this late.")] = None,
    catch_up: Annotated[str | None, typer.Option("--catch-up", help="latest, all or skip.")] = None,
    grace: Annotated[str | None, typer.Option("--grace", help="Misfire grace.")] = None,
    timeout: Annotated[str | None, typer.Option("--timeout", help="Run timeout.")] = None,
    max_retries: Annotated[int | None, typer.Option("--max-retries", min=0, max=10)] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Pin the model: provider:model ('' for the default)."),
    ] = None,
    skill: Annotated[
        list[str] | None,
        typer.Option("--skill", help="The skills the prompt needs (repeatable; replaces)."),
    ] = None,
    no_skills: Annotated[
        bool, typer.Option("--no-skills", help="The prompt needs no skill.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Change a job's name, prompt, timing, retries, model pin or skills (nothing else)."""
    import json

    command = "lemon cron update"
    if skill and no_skills:
        raise _fail(command, "skills: give --skill or --no-skills, not both", 2)
    params: dict[str, Any] = {"id": job_id}
    for key, value in (
        ("name", name),
        ("prompt", prompt),
        ("catchUp", catch_up),
        ("maxRetries", max_retries),
        ("model", model),
    ):
        if value is not None:
            params[key] = value
    if skill or no_skills:
        params["skills"] = list(skill or [])
    for key, text, field in (
        ("jitterSec", jitter, "jitter"),
        ("graceSec", grace, "grace"),
        ("timeoutSec", timeout, "timeout"),
    ):
        ms = _ms(command, text, field)
        if ms is not None:
            params[key] = ms / 1000
    if len(params) == 1:
        raise _fail(command, "give a field to change (see lemon cron update --help)", 2)
    job = call(command, "cron.update", params)["job"]
    if as_json:
        typer.echo(json.dumps(job))
    else:
        typer.echo(f"updated {_job_line(job)}")


@cron_app.command("run")
def run_cmd(
    job_id: IdArg,
    wait: Annotated[bool, typer.Option("--wait", help="Wait and print the answer.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run a job now (on the running daemon)."""
    import json

    params: dict[str, Any] = {"id": job_id, "wait": wait}
    payload = call("lemon cron run", "cron.run", params)
    if as_json:
        typer.echo(json.dumps(payload))
    elif wait and payload.get("status") not in ("submitted", "running"):
        if payload.get("status") == "completed":
            typer.echo(payload.get("output") or "")
        else:
            raise _fail(
                "lemon cron run",
                f"{payload.get('status')}: {payload.get('error') or payload.get('reason')}",
                1,
            )
    else:
        typer.echo(f"{payload['cron_run_id']} {payload['status']}")


@cron_app.command("abort")
def abort_cmd(
    run_id: Annotated[str, typer.Argument(help="The cron run id (see lemon cron history).")],
    as_json: JsonOpt = False,
) -> None:
    """Abort an active fire (on the daemon that owns it); it is recorded aborted."""
    import json

    payload = call("lemon cron abort", "cron.abort", {"runId": run_id})
    if as_json:
        typer.echo(json.dumps(payload))
    else:
        typer.echo(f"{payload['run_id']} {payload['status']}")


@cron_app.command("audit")
def audit_cmd(
    job_id: Annotated[str | None, typer.Option("--job", help="One job's entries.")] = None,
    action: Annotated[str | None, typer.Option("--action", help="One action.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000)] = 50,
    as_json: JsonOpt = False,
) -> None:
    """The lifecycle audit: job changes, skipped due times, retries, aborts; newest first."""
    import json

    params: dict[str, Any] = {"limit": limit}
    if job_id is not None:
        params["jobId"] = job_id
    if action is not None:
        params["action"] = action
    payload = call("lemon cron audit", "cron.audit", params)
    if as_json:
        typer.echo(json.dumps(payload))
        return
    if not payload["events"]:
        typer.echo("no audit entries")
    for e in payload["events"]:
        typer.echo(
            f"{_when(e['ts_ms'])}  {e['action']}  {e.get('job_id') or '-'}  "
            f"{e.get('run_id') or ''}  {e.get('reason') or ''}".rstrip()
        )


@cron_app.command("history")
def history_cmd(
    job_id: Annotated[str | None, typer.Argument(help="One job (default: all).")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=1000)] = 20,
    as_json: JsonOpt = False,
) -> None:
    """The newest fires and their outcome, newest first."""
    import json

    params: dict[str, Any] = {"limit": limit}
    if job_id is not None:
        params["id"] = job_id
    payload = call("lemon cron history", "cron.runs", params)
    if as_json:
        typer.echo(json.dumps(payload))
        return
    if not payload["runs"]:
        typer.echo("no runs yet")
    for run in payload["runs"]:
        why = run.get("reason") or run.get("error") or ""
        mark = " (suppressed)" if run.get("suppressed") else ""
        typer.echo(
            f"{_when(run['due_at_ms'])}  {run['job_id']}  {run['status']}{mark}  "
            f"{run.get('triggered_by')}  {run.get('owner') or '-'}  {why}".rstrip()
        )


heartbeat_app = command_group(
    "An agent's heartbeat: a periodic check that speaks only when something needs you."
)

AgentOpt = Annotated[str, typer.Option("--agent", help="The agent id.")]


@heartbeat_app.callback()
def _heartbeat_main(url: UrlOpt = None) -> None:
    """Heartbeats: on --url, else this home's daemon, else the store."""
    _target(url)


def _show_heartbeat(payload: dict[str, Any], as_json: bool) -> None:
    import json

    if as_json:
        typer.echo(json.dumps(payload))
        return
    job = payload.get("heartbeat")
    if job is None:
        typer.echo("no heartbeat")
        return
    typer.echo(_job_line(job))
    if job.get("active_hours"):
        typer.echo(f"active hours: {job['active_hours']} ({job.get('timezone')})")
    last = payload.get("last")
    if last:
        mark = " (suppressed)" if last.get("suppressed") else ""
        typer.echo(f"last: {last['status']}{mark} at {_when(last['due_at_ms'])}")


@heartbeat_app.command("set")
def heartbeat_set(
    agent: AgentOpt = "default",
    every: Annotated[str | None, typer.Option("--every", help="Period (default 30m).")] = None,
    prompt: Annotated[str | None, typer.Option("--prompt", help="Replaces the default.")] = None,
    channel: Annotated[str | None, typer.Option("--channel", help="Where alerts go.")] = None,
    active_hours: Annotated[
        str | None,
        typer.Option("--active-hours", help="HH:MM-HH:MM when it may run; none clears them."),
    ] = None,
    tz: Annotated[str | None, typer.Option("--tz", help="IANA timezone of --active-hours.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Turn the agent's heartbeat on (or change it)."""
    command = "lemon heartbeat set"
    params: dict[str, Any] = {"enabled": True, "agentId": agent}
    ms = _ms(command, every, "every")
    if ms is not None:
        params["intervalMs"] = ms
    if prompt is not None:
        params["prompt"] = prompt
    if channel is not None:
        params["channel"] = channel
    if active_hours is not None:
        params["activeHours"] = "" if active_hours.strip().lower() == "none" else active_hours
    if tz is not None:
        params["timezone"] = tz
    call(command, "set-heartbeats", params)
    _show_heartbeat(call(command, "last-heartbeat", {"agentId": agent}), as_json)


@heartbeat_app.command("show")
def heartbeat_show(agent: AgentOpt = "default", as_json: JsonOpt = False) -> None:
    """Show the agent's heartbeat and its last run."""
    _show_heartbeat(call("lemon heartbeat show", "last-heartbeat", {"agentId": agent}), as_json)


@heartbeat_app.command("off")
def heartbeat_off(agent: AgentOpt = "default", as_json: JsonOpt = False) -> None:
    """Turn the agent's heartbeat off."""
    import json

    payload = call("lemon heartbeat off", "set-heartbeats", {"enabled": False, "agentId": agent})
    if as_json:
        typer.echo(json.dumps(payload))
    else:
        typer.echo("heartbeat off")
