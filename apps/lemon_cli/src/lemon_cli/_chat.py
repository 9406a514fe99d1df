"""``lemon chat``: the terminal client of an in-process runtime.

One asyncio loop runs the runtime and the client. Input lines (read by a daemon thread),
session events (``session:<key>``) and approval requests (``exec_approvals``) are merged into
one bounded queue and handled in order, so an approval question and its answer never race
with the output. Ctrl-C (SIGINT) cancels the active run, never the program; Ctrl-D or
``/quit`` ends it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shlex
import signal
import sys
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from rich.console import Console
from rich.markup import escape

from coding_agent import CodingExecutor
from lemon_cli._executor import DEFAULT_TOOL_POLICY
from lemon_core.approvals import ExecApprovals, UnknownApprovalError
from lemon_core.bus import EXEC_APPROVALS, Delivery, session_topic
from lemon_core.events import ApprovalDecision, Event, QueueOutcome, QueueOutcomeKind
from lemon_core.execution import ROUTER_BRIDGE, RunRequest, ToolPolicy
from lemon_core.runtime import AGENT_RUNTIME, APPROVALS, Runtime
from lemon_core.store import RunStore, Store
from lemon_router import Router

__all__ = ["DEFAULT_SESSION", "ChatClient", "ChatOptions", "list_sessions", "tool_policy_for"]

DEFAULT_SESSION: Final = "agent:default:main"
_QUEUE_BOUND: Final = 4096
_SETTLED: Final = frozenset(
    {QueueOutcomeKind.MERGED, QueueOutcomeKind.STEERED, QueueOutcomeKind.CANCELLED}
)
_FINISHED_BOUND: Final = 4096  # merged input/event items; a full queue makes the reader wait
_ANSWERS: Final = {
    "o": ApprovalDecision.APPROVE_ONCE,
    "once": ApprovalDecision.APPROVE_ONCE,
    "y": ApprovalDecision.APPROVE_ONCE,
    "yes": ApprovalDecision.APPROVE_ONCE,
    "s": ApprovalDecision.APPROVE_SESSION,
    "session": ApprovalDecision.APPROVE_SESSION,
    "a": ApprovalDecision.APPROVE_GLOBAL,
    "always": ApprovalDecision.APPROVE_GLOBAL,
    "d": ApprovalDecision.DENY,
    "deny": ApprovalDecision.DENY,
    "n": ApprovalDecision.DENY,
    "no": ApprovalDecision.DENY,
}
_SAID: Final = {
    ApprovalDecision.APPROVE_ONCE: "approved once",
    ApprovalDecision.APPROVE_SESSION: "approved for this session",
    ApprovalDecision.APPROVE_GLOBAL: "approved always",
    ApprovalDecision.DENY: "denied",
}
_SHOWN_CHARS: Final = 200  # an approval question's command or arguments, then "…"
HELP: Final = (
    "Commands: /new  /resume [KEY]  /sessions  /cancel  /model [M]  /help  /quit\n"
    "While a run is busy: a plain message is queued; '>text' steers the run; '!text' "
    "interrupts it and runs next. Ctrl-C cancels the run; Ctrl-D quits."
)


def tool_policy_for(approve: frozenset[str]) -> ToolPolicy | None:
    """``None`` (the executor's policy: the agent's ``[profiles.<agent>.tool_policy]``, else
    the default) when nothing is pre-approved; else the default policy with ``approve`` (tool
    names, or ``all``) needing no approval."""
    if not approve:
        return None
    if "all" in approve:
        return ToolPolicy()
    return ToolPolicy(require_approval=DEFAULT_TOOL_POLICY.require_approval - approve)


@dataclass(kw_only=True, slots=True)
class ChatOptions:
    session: str = DEFAULT_SESSION
    model: str | None = None
    approve: frozenset[str] = frozenset()
    interactive: bool = True
    cwd: str = field(default_factory=os.getcwd)


Item = tuple[Literal["line", "eof", "event", "approval", "sigint"], Any]


async def list_sessions(store: Store, limit: int = 50) -> list[dict[str, Any]]:
    """Sessions with finished runs, most recent first: key, runs, last answer, last time."""
    rows = await store.scan(RunStore.HISTORY, limit=10_000)
    sessions: dict[str, dict[str, Any]] = {}
    for _, data in rows:
        key = data["session_key"]
        entry = sessions.setdefault(key, {"session_key": key, "runs": 0, "last_ms": 0})
        entry["runs"] += 1
        if data.get("finished_at_ms", 0) >= entry["last_ms"]:
            entry["last_ms"] = data.get("finished_at_ms", 0)
            entry["last_answer"] = data.get("answer", "")
            entry["last_ok"] = data.get("ok", False)
    return sorted(sessions.values(), key=lambda e: -int(e["last_ms"]))[:limit]


class ChatClient:
    """Talks to the runtime's router for one terminal."""

    def __init__(self, runtime: Runtime, options: ChatOptions, console: Console) -> None:
        self.runtime = runtime
        self.options = options
        self.console = console
        router = runtime.context.capabilities.require(ROUTER_BRIDGE)
        assert isinstance(router, Router)
        self.router = router
        self.approvals: ExecApprovals | None = runtime.context.capabilities.get(APPROVALS)
        self.session = options.session
        self.model = options.model
        self.queue: asyncio.Queue[Item] = asyncio.Queue(_QUEUE_BOUND)
        self.mid_line = False
        self.pending_approval: Event | None = None
        # Approvals are asked one at a time, in order. With an executor that reports each
        # approval as an ``approval`` action on the session topic (the coding executor), a
        # request is held until that action arrives, so the question appears after the text
        # streamed before it. Both are bounded by ExecApprovals' max_pending.
        self.to_ask: deque[Event] = deque()
        self.held: dict[str, Event] = {}
        self.announced: OrderedDict[str, None] = OrderedDict()
        agent = runtime.context.capabilities.get(AGENT_RUNTIME)
        self.ordered_approvals = agent is not None and isinstance(agent.executor(), CodingExecutor)
        self.last_ok = True
        self.waiting_for: set[str] = set()
        # run ids whose terminal phase was seen (the router clears its active run a moment
        # later); bounded, oldest forgotten first
        self.finished: OrderedDict[str, None] = OrderedDict()
        # tool cards opened (``╭─``) and not yet closed, by action id; a run that ends with
        # cards open closes them. ``swept`` remembers cards closed that way so a late
        # ``completed`` does not close them twice. Both bounded, oldest forgotten first.
        self.open_cards: OrderedDict[str, str] = OrderedDict()
        self.swept: OrderedDict[str, None] = OrderedDict()
        self.denied: list[str] = []
        # One-shot denials are told after the answer, not in the middle of its stream.
        self.deferred_notes: list[str] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._session_sub_task: asyncio.Task[None] | None = None

    # -- plumbing -----------------------------------------------------------------------------

    async def __aenter__(self) -> ChatClient:
        self._tasks.append(asyncio.create_task(self._pump(EXEC_APPROVALS, "approval")))
        self._follow(self.session)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in [*self._tasks, self._session_sub_task]:
            if task is not None:
                task.cancel()
        for task in [*self._tasks, self._session_sub_task]:
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _follow(self, session: str) -> None:
        if self._session_sub_task is not None:
            self._session_sub_task.cancel()
        self._session_sub_task = asyncio.create_task(self._pump(session_topic(session), "event"))

    async def _pump(self, topic: str, kind: Literal["event", "approval"]) -> None:
        delivery = Delivery(max_entries=10_000)
        with self.runtime.bus.subscribe(topic, delivery=delivery) as sub:
            while True:
                item = await sub.get()
                if isinstance(item, Event):
                    await self.queue.put((kind, item))

    def start_reader(self) -> None:
        """Read stdin lines on a daemon thread into the queue."""
        loop = asyncio.get_running_loop()

        def put(item: Item) -> None:
            asyncio.run_coroutine_threadsafe(self.queue.put(item), loop).result()

        def read() -> None:
            while True:
                try:
                    line = sys.stdin.readline()
                except (OSError, ValueError):
                    line = ""
                if not line:
                    put(("eof", None))
                    return
                put(("line", line.rstrip("\r\n")))

        threading.Thread(target=read, name="lemon-chat-stdin", daemon=True).start()

    def install_sigint(self) -> Callable[[], object]:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, lambda: self.queue.put_nowait(("sigint", None)))
        return lambda: loop.remove_signal_handler(signal.SIGINT)

    # -- output -------------------------------------------------------------------------------

    def _write(self, text: str) -> None:
        self.console.file.write(text)
        self.console.file.flush()
        if text:
            self.mid_line = not text.endswith("\n")

    def _line(self, markup: str) -> None:
        if self.mid_line:
            self._write("\n")
        self.console.print(markup, highlight=False)
        self.mid_line = False

    def prompt(self) -> None:
        if self.options.interactive and self.pending_approval is None:
            if self.mid_line:
                self._write("\n")
            self._write("> ")
            self.mid_line = False

    # -- actions ------------------------------------------------------------------------------

    def active(self) -> str | None:
        """The session's active run, unless it already reached its terminal phase."""
        run_id = self.router.active_run(self.session)
        return None if run_id is None or run_id in self.finished else run_id

    def busy(self) -> bool:
        return self.active() is not None

    async def send(self, text: str, mode: str = "collect") -> None:
        request = RunRequest(
            origin="cli",
            session_key=self.session,
            prompt=text,
            queue_mode=mode,  # type: ignore[arg-type]  # one of the three modes used here
            model=self.model or None,
            cwd=self.options.cwd,
            tool_policy=tool_policy_for(self.options.approve),
        )
        receipt = await self.router.submit(request)
        self.waiting_for.add(receipt.run_id)
        if receipt.status == "rejected":
            self.waiting_for.discard(receipt.run_id)
            self.last_ok = False
            self._line(f"[red]not accepted:[/] {escape(receipt.reason or 'rejected')}")
        elif receipt.status == "queued":
            self._line(f"[dim]queued (position {(receipt.position or 0) + 1})[/]")
        elif receipt.status == "dispatched_to_active":
            self._line("[dim]steering the running answer…[/]")

    def cancel(self) -> bool:
        run_id = self.active()
        if run_id is None:
            return False
        self.router.abort_run(run_id, reason="cancelled from the terminal")
        return True

    async def handle_event(self, event: Event) -> None:
        payload = event.payload
        if event.type == "delta":
            self._write(payload.text)
        elif event.type == "engine_action":
            action = payload.action
            if action.kind.value == "approval":  # asked through exec_approvals, not a card
                approval_id = action.detail.get("approval_id")
                if payload.phase.value == "started" and isinstance(approval_id, str):
                    held = self.held.pop(approval_id, None)
                    if held is not None:
                        self.to_ask.append(held)
                        self.ask_next()
                    else:
                        self.announced[approval_id] = None
                        while len(self.announced) > _FINISHED_BOUND:
                            self.announced.popitem(last=False)
                return
            if payload.phase.value == "started":
                self.open_cards[action.id] = action.title
                while len(self.open_cards) > _FINISHED_BOUND:
                    self.open_cards.popitem(last=False)
                self._line(f"[cyan]╭─ {escape(action.title)}[/]")
            elif payload.phase.value == "completed":
                self.open_cards.pop(action.id, None)
                if self.swept.pop(action.id, 0) is None:
                    return
                mark = "[green]✓[/]" if payload.ok else "[red]✗[/]"
                message = escape(" ".join((payload.message or "").split())[:160])
                self._line(f"[cyan]╰─[/] {mark} {escape(action.title)} [dim]{message}[/]")
        elif event.type == "queue_outcome" and isinstance(payload, QueueOutcome):
            outcome = payload.outcome
            if outcome is QueueOutcomeKind.STEERED:
                self._line("[dim]steer taken by the running answer[/]")
            elif outcome is QueueOutcomeKind.FALLBACK_QUEUED:
                self._line("[dim]steer not taken; queued as the next message[/]")
            elif outcome is QueueOutcomeKind.MERGED:
                self._line("[dim]merged into the queued message[/]")
            settled = (
                QueueOutcomeKind.MERGED,
                QueueOutcomeKind.STEERED,
                QueueOutcomeKind.CANCELLED,
            )
            if outcome in settled:
                self.waiting_for.discard(payload.run_id)
        elif event.type == "run_completed":
            completed = payload.completed
            error = completed.error or ""
            aborted = bool(completed.meta.get("aborted")) or any(
                word in error for word in ("cancel", "interrupt")
            )
            label = "ended" if completed.ok else "cancelled" if aborted else "failed"
            self._close_cards(label)
            if completed.ok:
                self.last_ok = True
                if self.mid_line:
                    self._write("\n")
            else:
                self.last_ok = False
                self._line(f"[yellow]{label}:[/] {escape(error)}")
            for note in self.deferred_notes:
                self._line(note)
            self.deferred_notes.clear()
        elif event.type == "run_phase_changed" and payload.phase.terminal:
            self.finished[payload.run_id] = None
            while len(self.finished) > _FINISHED_BOUND:
                self.finished.popitem(last=False)
            self.waiting_for.discard(payload.run_id)

    def _close_cards(self, label: str) -> None:
        """Close every card still open when its run ended: ``╰─ ✗ title cancelled``."""
        while self.open_cards:
            action_id, title = self.open_cards.popitem(last=False)
            self.swept[action_id] = None
            while len(self.swept) > _FINISHED_BOUND:
                self.swept.popitem(last=False)
            self._line(f"[cyan]╰─[/] [red]✗[/] {escape(title)} [dim]{label}[/]")

    def question(self, tool: str, action: dict[str, Any] | None) -> str:
        """The approval question, as a person would ask it (plain text, not markup).

        bash: ``Allow bash: sleep 30 ?`` (the command as the shell would show it); write and
        edit: ``Allow write to note.txt ?`` (the path relative to the session's directory when
        inside it); anything else: ``Allow <tool> key=value …?``. Long text ends in ``…``.
        """
        given = action or {}
        args = given.get("arguments", given)
        if not isinstance(args, dict):
            args = {"action": args}
        if tool == "bash":
            argv = args.get("argv")
            if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
                command = shlex.join(argv)
            else:
                command = str(args.get("command", ""))
            if command:
                one_line = command.replace("\r", " ").replace("\n", " ")
                return f"Allow bash: {_clip(one_line)} ?"
        if tool in ("write", "edit") and isinstance(args.get("path"), str):
            return f"Allow {tool} to {_clip(self._relative(args['path']))} ?"
        compact = " ".join(f"{k}={v!r}" for k, v in args.items())
        return f"Allow {tool} {_clip(compact)}?" if compact else f"Allow {tool}?"

    def _relative(self, path: str) -> str:
        cwd = os.path.abspath(self.options.cwd)
        full = os.path.abspath(os.path.join(cwd, path))
        if full == cwd or full.startswith(cwd.rstrip(os.sep) + os.sep):
            return os.path.relpath(full, cwd)
        return path

    async def handle_approval(self, event: Event) -> None:
        if event.type == "approval_resolved":
            self._withdrawn(event)
            return
        if event.type != "approval_requested":
            return
        pending = event.payload.pending
        if pending.session_key != self.session or self.approvals is None:
            return
        approval_id = event.payload.approval_id
        if not self.options.interactive:
            self._resolve(approval_id, ApprovalDecision.DENY)
            self.denied.append(pending.tool)
            self.deferred_notes.append(
                f"[yellow]denied {escape(pending.tool)}:[/] it needs an approval and there is no "
                f"terminal to ask; rerun with --approve {escape(pending.tool)} to allow it"
            )
            return
        if not self.ordered_approvals or self.announced.pop(approval_id, 0) is None:
            self.to_ask.append(event)
            self.ask_next()
        else:
            self.held[approval_id] = event

    def _withdrawn(self, event: Event) -> None:
        """An approval ended without our answer (timeout, run cancelled): stop asking it."""
        approval_id = event.payload.approval_id
        self.held.pop(approval_id, None)
        for queued in list(self.to_ask):
            if queued.payload.approval_id == approval_id:
                self.to_ask.remove(queued)
        current = self.pending_approval
        if current is not None and current.payload.approval_id == approval_id:
            self.pending_approval = None
            tool = escape(current.payload.pending.tool)
            self._line(f"[dim]approval for {tool} ended: {event.payload.decision.value}[/]")
            if not self.ask_next() and not self.waiting_for:
                self.prompt()

    def ask_next(self) -> bool:
        """Ask the next queued approval unless one is being asked; True when one is asked."""
        if self.pending_approval is not None:
            return True
        if not self.to_ask:
            return False
        event = self.to_ask.popleft()
        self.pending_approval = event
        pending = event.payload.pending
        self._line(
            f"[bold yellow]{escape(self.question(pending.tool, pending.action))}[/] "
            r"[bold]\[o][/]nce / [bold]\[s][/]ession / [bold]\[a][/]lways / [bold]\[d][/]eny"
        )
        self._write("approve> ")
        return True

    async def answer_approval(self, line: str) -> None:
        event = self.pending_approval
        assert event is not None
        decision = _ANSWERS.get(line.strip().lower())
        if decision is None:
            self._line("answer o (once), s (session), a (always) or d (deny)")
            self._write("approve> ")
            return
        self.pending_approval = None
        if self._resolve(event.payload.approval_id, decision):
            self._line(f"[dim]{_SAID.get(decision, decision.value)}[/]")
        else:
            self._line("[dim]that approval is no longer pending[/]")
        self.ask_next()

    def _resolve(self, approval_id: str, decision: ApprovalDecision) -> bool:
        if self.approvals is None:
            return False
        try:
            self.approvals.resolve(approval_id, decision)
        except UnknownApprovalError:
            return False
        return True

    async def command(self, line: str) -> bool:
        """Handle a slash command; False to quit."""
        name, _, arg = line.partition(" ")
        arg = arg.strip()
        if name in ("/quit", "/exit"):
            return False
        if name == "/help":
            self._line(HELP)
        elif name == "/new":
            self.session = f"{DEFAULT_SESSION}:sub:{secrets.token_hex(4)}"
            self._follow(self.session)
            self._line(f"[dim]new session {self.session}[/]")
        elif name == "/resume":
            target = arg
            if not target:
                found = [
                    s
                    for s in await list_sessions(self.runtime.store)
                    if s["session_key"] != self.session
                ]
                if not found:
                    self._line("no other session to resume")
                    return True
                target = found[0]["session_key"]
            self.session = target
            self._follow(self.session)
            self._line(f"[dim]resumed session {self.session}[/]")
        elif name == "/sessions":
            rows = await list_sessions(self.runtime.store)
            if not rows:
                self._line("no sessions yet")
            for row in rows:
                mark = "*" if row["session_key"] == self.session else " "
                self._line(f"{mark} {escape(row['session_key'])}  [dim]{row['runs']} runs[/]")
        elif name == "/cancel":
            self._line("cancelling…" if self.cancel() else "nothing is running")
        elif name == "/model":
            if arg:
                self.model = arg
                self._line(f"[dim]model for the next messages: {escape(arg)}[/]")
            else:
                current = self.model or self.runtime.config.defaults.model
                self._line(f"model: {escape(current or 'offline (none configured)')}")
        else:
            self._line(f"unknown command {escape(name)}; /help lists them")
        return True

    async def handle_line(self, line: str) -> bool:
        if self.pending_approval is not None:
            await self.answer_approval(line)
            return True
        text = line.strip()
        if not text:
            return True
        if text.startswith("/") and text.split(" ", 1)[0] in _COMMANDS:
            return await self.command(text)
        mode = "collect"
        if text.startswith("!"):
            mode, text = "interrupt", text[1:].strip()
        elif text.startswith(">"):
            mode, text = "steer", text[1:].strip()
        if text:
            await self.send(text, mode)
        return True

    # -- loops ----------------------------------------------------------------------------------

    async def run_once(self, message: str) -> int:
        """One message; returns the exit code (0 when the answer completed)."""
        await self.send(message)
        while True:
            if not self.waiting_for:
                follow = self.active()  # e.g. the router's retry of a run without an answer
                if follow is None:
                    break
                self.waiting_for.add(follow)
            kind, value = await self.queue.get()
            if kind == "event":
                await self.handle_event(value)
            elif kind == "approval":
                await self.handle_approval(value)
            elif kind == "line" and self.pending_approval is not None:
                await self.answer_approval(value)
            elif kind == "sigint":
                if not self.cancel():
                    return 130
                self._line("[yellow]cancelling…[/]")
            elif kind == "eof" and self.pending_approval is not None:
                await self.answer_approval("deny")
        if self.mid_line:
            self._write("\n")
        return 0 if self.last_ok else 1

    async def run_interactive(self) -> int:
        self._line(f"[bold]lemon chat[/] [dim]session {self.session} · /help · Ctrl-D quits[/]")
        self.prompt()
        idle_sigints = 0
        while True:
            kind, value = await self.queue.get()
            if kind == "eof":
                if self.pending_approval is not None:
                    await self.answer_approval("deny")
                self._line("[dim]bye[/]")
                return 0
            if kind == "line":
                idle_sigints = 0
                if not await self.handle_line(value):
                    return 0
                if not self.waiting_for:
                    self.prompt()
            elif kind == "event":
                was_waiting = bool(self.waiting_for)
                await self.handle_event(value)
                if was_waiting and not self.waiting_for:
                    self.prompt()
            elif kind == "approval":
                await self.handle_approval(value)
            elif kind == "sigint":
                if self.cancel():
                    self._line("[yellow]cancelling the run (Ctrl-C)…[/]")
                else:
                    idle_sigints += 1
                    if idle_sigints >= 2:
                        return 130
                    self._line("[dim]nothing is running; Ctrl-C again or Ctrl-D to quit[/]")
                    self.prompt()


_COMMANDS: Final = frozenset(
    {"/quit", "/exit", "/help", "/new", "/resume", "/sessions", "/cancel", "/model"}
)


def _clip(text: str, limit: int = _SHOWN_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
