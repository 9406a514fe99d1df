"""The slash commands' work: each answers in the transcript (a note), from the session port
and, where the daemon offers them, the control plane's own methods (see ``_daemon``).
What a daemon does not offer is said, with what the client itself knows instead."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from lemon_core.sessions import SessionPort, check_session_key
from lemon_tui._commands import help_text
from lemon_tui._daemon import ModelInfo, models_from_wire, offered, server_version
from lemon_tui._pickers import NEW_SESSION, ModelPicker, SessionRow, SessionSwitcher
from lemon_tui._tasks import TaskState, says
from lemon_tui._text import count, escape

if TYPE_CHECKING:
    from lemon_tui._app import LemonTUI

__all__ = [
    "SessionUsage",
    "load_models",
    "open_model_picker",
    "open_switcher",
    "run_command",
    "set_model",
]

_HISTORY_DEFAULT: Final = 20
_HISTORY_MAX: Final = 200
_CLIP: Final = 160


@dataclass(kw_only=True, slots=True)
class SessionUsage:
    """What this client saw of one session's runs (added up from their ends)."""

    runs: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_tokens: int = 0
    cost_usd: float = 0.0
    context_tokens: int = 0
    """The prompt size of the last run (input plus cache): what the context gauge shows."""


def _clip(text: str, limit: int = _CLIP) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


async def load_models(app: LemonTUI, *, fresh: bool = False) -> list[ModelInfo] | None:
    """The daemon's model catalogue (cached for the connection); ``None`` when it offers no
    ``models.list``."""
    if app.models is not None and not fresh:
        return app.models
    daemon = offered(app.port, "models.list")
    if daemon is None:
        return None
    app.models = models_from_wire(await daemon.call("models.list", {}))
    return app.models


async def set_model(app: LemonTUI, ref: str | None) -> None:
    """Use ``ref`` for this session's next messages (``None``: the daemon's default). Each
    message carries it (``RunRequest.model``); where the daemon offers ``sessions.patch`` the
    session is patched too, so other clients see it."""
    app.model = ref
    daemon = offered(app.port, "sessions.patch")
    shown = escape(ref or "the daemon default")
    if daemon is None:
        app.note(f"model: {shown} (sent with each message from here)")
    else:
        await daemon.call("sessions.patch", {"sessionKey": app.session, "model": ref})
        # Stored on the session: later one-shot chats in this directory use it too.
        later = "" if ref is None else "; later `lemon chat` runs here too (/model default resets)"
        app.note(f"this session now uses {shown} (set on the session{later})")
    app.paint_status()


async def open_switcher(app: LemonTUI) -> None:
    """The session switcher: ``sessions.list`` with this client's unread counts, plus the
    current and background sessions the list does not hold (not run yet, or past its page)."""
    port = app.port
    if port is None:
        app.note("[yellow]not connected[/]: the sessions cannot be listed")
        return
    rows = [
        SessionRow(
            key=r.session_key,
            runs=r.runs,
            active=r.active,
            updated_at_ms=r.updated_at_ms,
            preview=r.last_answer_preview,
            unread=app.background.get(r.session_key, 0),
            current=r.session_key == app.session,
        )
        for r in await port.sessions()
    ]
    known = {r.key for r in rows}
    for key, unread in [(app.session, 0), *app.background.items()]:
        if key not in known:
            known.add(key)
            rows.append(SessionRow(key=key, unread=unread, current=key == app.session))

    def taken(key: str | None) -> None:
        app.editor.focus()
        if key == NEW_SESSION:
            app.run_worker(app.command("/new"), group="commands")
        elif key is not None and key != app.session:
            app.switch(key)

    app.push_screen(SessionSwitcher(rows, now=app.clock), taken)


async def open_model_picker(app: LemonTUI) -> None:
    """The model picker over ``models.list``; the one taken is set (the default: none)."""
    models = await load_models(app)
    if not models:
        app.note("this daemon does not list its models; /model PROVIDER:MODEL sets one")
        return

    def taken(model: ModelInfo | None) -> None:
        app.editor.focus()
        if model is not None:
            ref = None if model.default else model.ref
            app.run_worker(app.set_model_or_say(ref), group="commands")

    app.push_screen(ModelPicker(models, current=app.model), taken)


async def run_command(app: LemonTUI, line: str) -> None:
    """Run one slash command line (it is known: see ``_commands.is_command``)."""
    name, _, arg = line.partition(" ")
    arg = arg.strip()
    port = app.port
    if name in ("/quit", "/exit"):
        app.exit(0)
    elif name == "/help":
        app.note(escape(help_text()))
    elif name == "/abort":
        await app.abort_run(quiet_when_idle=True)
    elif name == "/status":
        await _status(app)
    elif name == "/usage":
        await _usage(app)
    elif port is None:
        app.note("[yellow]not connected[/] (what you type waits and is sent after the reconnect)")
    elif name == "/new":
        app.switch(f"{_base(app.session)}:sub:{secrets.token_hex(4)}")
    elif name == "/resume":
        if not arg:
            app.note("usage: /resume KEY (/sessions lists them; Ctrl+X picks one)")
            return
        try:
            check_session_key(arg)
        except ValueError as exc:
            app.note(f"[red]{escape(str(exc))}[/]")
            return
        app.switch(arg)
    elif name == "/sessions":
        rows = await port.sessions()
        if not rows:
            app.note("no sessions yet")
        for row in rows:
            mark = "*" if row.session_key == app.session else " "
            busy = " · running" if row.active else ""
            app.note(f"{mark} {escape(row.session_key)}  {count(row.runs, 'run')}{busy}")
    elif name == "/history":
        await _history(app, port, arg)
    elif name == "/model":
        await _model(app, arg)
    elif name == "/approvals":
        await _approvals(app, port)
    elif name == "/tasks":
        await _tasks(app, arg)
    elif name == "/mcp":
        await _mcp(app)
    elif name == "/compact":
        if app.waiting_for:
            app.note("wait until the running answer ends (or Ctrl+C it), then /compact")
            return
        result = await port.compact(app.session, instructions=arg or None)
        if result.error is not None:
            app.note(f"[yellow]could not compact:[/] {escape(result.error)}")
        elif not result.compacted:
            app.note(escape(result.note or "nothing to compact"))
        else:
            app.note(
                f"compacted: {result.messages_summarised} messages summarised, "
                f"{result.messages_kept} kept"
            )


def _base(session: str) -> str:
    """The session a ``/new`` branches from (a sub-session's parent)."""
    return session.split(":sub:", 1)[0]


async def _history(app: LemonTUI, port: SessionPort, arg: str) -> None:
    limit = _HISTORY_DEFAULT
    if arg:
        if not arg.isdigit() or int(arg) < 1:
            app.note(escape(f"usage: /history [N] (N a number of messages, 1 to {_HISTORY_MAX})"))
            return
        limit = min(int(arg), _HISTORY_MAX)
    page = await port.transcript(app.session, limit=limit)
    if page.notice:
        app.note(f"[yellow]{escape(page.notice)}[/]")
    if not page.entries:
        app.note("no history in this session yet")
        return
    older = " (older ones exist: /history N shows more)" if page.more else ""
    app.note(f"[b]the last {len(page.entries)} messages[/]{older}")
    for entry in page.entries:
        app.note(f"{entry.index:>4} [b]{entry.role}[/] {escape(_clip(entry.text))}")


async def _model(app: LemonTUI, arg: str) -> None:
    models = await load_models(app)
    if not arg:
        current = app.model or next((m.ref for m in models or () if m.default), None)
        app.note(f"model: {escape(current or 'the daemon default')} · Ctrl+O picks one")
        if models is None:
            app.note("this daemon does not list its models (no models.list); /model REF sets one")
            return
        for m in models:
            mark = "*" if m.ref == current else " "
            window = f"  {m.context_window // 1000:,}k context" if m.context_window else ""
            app.note(f"{mark} {escape(m.ref)}  {escape(m.name)}{window}")
        return
    if arg == "default":
        await set_model(app, None)
        return
    if models is not None and arg not in {m.ref for m in models}:
        close = [m.ref for m in models if arg.lower() in m.ref.lower()]
        hint = f"; did you mean {', '.join(close[:3])}?" if close else "; /model lists them"
        app.note(f"[red]unknown model {escape(arg)}[/]{escape(hint)}")
        return
    if ":" not in arg:
        app.note("[red]a model is PROVIDER:MODEL[/] (for example openai:gpt-4o)")
        return
    await set_model(app, arg)


async def _approvals(app: LemonTUI, port: SessionPort) -> None:
    snapshot = await port.snapshot(app.session)
    pending = snapshot.pending_approvals
    if not pending:
        app.note("no approval is waiting in this session")
    for p in pending:
        why = f" · {escape(_clip(p.rationale, 80))}" if p.rationale else ""
        app.note(f"waiting: [b]{escape(p.tool)}[/] {escape(_clip(str(p.action or {}), 80))}{why}")
    if pending and app.panel is None:
        app.ask_again(pending)
    daemon = offered(app.port, "exec.approvals.get")
    if daemon is None:
        return
    payload: Any = await daemon.call("exec.approvals.get", {})
    grants = payload.get("approvals") if isinstance(payload, dict) else None
    if isinstance(grants, list) and grants:
        app.note(f"[b]standing grants[/] ({len(grants)})")
        for grant in grants[:20]:
            if isinstance(grant, dict):
                scope = grant.get("scope", "")
                app.note(f"  {escape(str(grant.get('tool', '?')))} {escape(str(scope))}")


async def _mcp(app: LemonTUI) -> None:
    """``/mcp``: the daemon's MCP servers (``mcp.status``). The first one on a connection
    subscribes it to the ``mcp`` topic first, so later changes keep the rows (and a failure
    is said as it happens)."""
    daemon = offered(app.port, "mcp.status")
    if daemon is None:
        app.note("this daemon offers no mcp.status (no MCP here)")
        return
    if not app.mcp_watching:
        watch = offered(app.port, "events.subscribe")
        if watch is not None:
            await watch.call("events.subscribe", {"topics": ["mcp"]})
            app.mcp_watching = True
    app.mcp_heard.clear()
    servers = app.learn_mcp(await daemon.call("mcp.status", {}))
    if not servers:
        app.note("no MCP servers configured ([mcp.servers.NAME] in config.toml)")
        return
    app.note("[b]MCP servers[/]\n" + "\n".join(escape(_clip(s.line(), 300)) for s in servers))


_TASKS_USAGE: Final = "usage: /tasks, /tasks cancel ID or /tasks open ID (/tasks lists the ids)"


async def _tasks(app: LemonTUI, arg: str) -> None:
    """``/tasks``: the session's tasks (``tasks.list``: those not ended, plus the ended ones
    this client heard of); ``/tasks cancel ID`` (``tasks.cancel``); ``/tasks open ID``: follow
    the child's session (its transcript)."""
    verb, _, task_id = arg.partition(" ")
    task_id = task_id.strip()
    if verb not in ("", "cancel", "open") or (verb and not task_id) or (not verb and task_id):
        app.note(escape(_TASKS_USAGE))
        return
    if verb == "cancel":
        daemon = offered(app.port, "tasks.cancel")
        if daemon is None:
            app.note("this daemon offers no tasks.cancel (no subagents here)")
            return
        payload: Any = await daemon.call("tasks.cancel", {"taskId": task_id})
        node = payload.get("task") if isinstance(payload, dict) else None
        learned = app.learn_tasks({"tasks": [node]})
        status = learned[0].status if learned else "cancelled"
        app.note(f"task {escape(task_id)}: {escape(says(status))}")
        return
    listed = await _listed(app)
    if verb == "open":
        task = app.tasks.get(task_id)
        if task is None or not task.session_key:
            app.note(f"[red]no task {escape(task_id)} in this session[/] (/tasks lists them)")
            return
        app.switch(task.session_key)
        return
    if listed is None:
        app.note("this daemon offers no tasks.list; the tasks heard of here follow")
    shown = [t for t in app.tasks.values() if t.parent_run_id or t.session_key]
    if not shown:
        app.note("no tasks in this session")
        return
    running = sum(1 for t in shown if not t.ended)
    app.note(
        f"[b]tasks[/] ({running} not ended) · /tasks cancel ID · /tasks open ID (its transcript)"
    )
    for task in shown:
        app.note(escape(task.row()))


async def _listed(app: LemonTUI) -> list[TaskState] | None:
    """The session's tasks not ended, from ``tasks.list`` (``None``: not offered)."""
    daemon = offered(app.port, "tasks.list")
    if daemon is None:
        return None
    return app.learn_tasks(await daemon.call("tasks.list", {"sessionKey": app.session}))


async def _usage(app: LemonTUI) -> None:
    seen = app.usage.get(app.session) or SessionUsage()
    app.note(
        f"[b]this session[/] (as this client saw it): {count(seen.runs, 'run')} · "
        f"{seen.input_tokens:,} in · {seen.output_tokens:,} out · "
        f"{seen.cache_tokens:,} cached · ${seen.cost_usd:.4f}"
    )
    gauge = app.context_gauge()
    if gauge:
        app.note(f"context: {gauge}")
    daemon = offered(app.port, "usage.status")
    if daemon is None:
        app.note("[dim]the daemon offers no usage.status; these are this client's figures[/]")
        return
    payload: Any = await daemon.call("usage.status", {})
    if isinstance(payload, dict):
        tokens = payload.get("tokens") or {}
        app.note(
            f"[b]the daemon[/] ({escape(str(payload.get('period', 'today')))}): "
            f"{count(payload.get('runs', '?'), 'run')} · {tokens.get('input', 0):,} in · "
            f"{tokens.get('output', 0):,} out · ${float(payload.get('cost') or 0):.4f}"
        )


async def _status(app: LemonTUI) -> None:
    status = app.status
    app.note(
        f"[b]{escape(status.connection)}[/] · {escape(app.where)} · session "
        f"{escape(app.session)} · {escape(status.run)} · queued {status.queued} · "
        f"recoveries {app.recoveries}"
    )
    app.note(f"model: {escape(app.model or 'the daemon default')}")
    daemon = offered(app.port, "status")
    if daemon is None:
        if app.port is not None:
            app.note("[dim]the daemon offers no status method[/]")
        return
    payload: Any = await daemon.call("status", {})
    if not isinstance(payload, dict):
        return
    server = payload.get("server") or {}
    conns = payload.get("connections") or {}
    runs = payload.get("runs") or {}
    uptime = server.get("uptime_ms") or server.get("uptimeMs")
    app.note(
        f"daemon {escape(server_version(daemon))}"
        + (f" · up {int(uptime) // 1000:,} s" if isinstance(uptime, int) else "")
        + f" · {conns.get('active', '?')} connections · {runs.get('active', '?')} runs active"
    )
