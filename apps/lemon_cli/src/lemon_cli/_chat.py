"""``lemon chat``: the terminal client of a session port.

It speaks only :class:`~lemon_core.sessions.SessionPort` (the composition root in
:mod:`lemon_cli.chat_cmd` boots the runtime and hands it the port): one bounded, ordered stream
of typed session events per session (text, tool cards, approvals, queue outcomes, phases, run
ends), merged with input lines into one bounded queue and handled in order, so an approval
question and its answer never race with the output. When the stream falls behind it ends with
one overflow marker: the client prints what it missed from ``snapshot()`` and watches again.
Ctrl-C (SIGINT) cancels the active run, never the program. It answers one message (the
one-shot ``lemon chat MESSAGE``, stdin, ``--json``); with no message on a terminal, ``lemon
chat`` opens the full-screen UI instead (``lemon_tui``, through :mod:`lemon_cli.tui_cmd`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import sys
import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from rich.console import Console
from rich.markup import escape

from lemon_core.events import ApprovalDecision, ErrorCode, QueueOutcomeKind
from lemon_core.execution import ALL_TOOLS, RunRequest, ToolPolicy
from lemon_core.sessions import (
    ApprovalAsked,
    ApprovalEnded,
    QueueNotice,
    RunEnded,
    RunPhaseNotice,
    SessionEvent,
    SessionPort,
    SessionStream,
    SessionStreamClosedError,
    StreamOverflow,
    TextDelta,
    ToolCard,
    approval_arguments,
    approval_command,
)
from lemon_core.tasks import Supervisor

__all__ = [
    "DEFAULT_SESSION",
    "DEFAULT_TOOL_POLICY",
    "KNOWN_TOOLS",
    "ChatClient",
    "ChatOptions",
    "session_for",
]

DEFAULT_SESSION: Final = "agent:default:main"


def session_for(cwd: str) -> str:
    """The default session of a working directory: each directory keeps its own
    conversation (``agent:default:main:sub:cwd-<hash of the resolved path>``)."""
    digest = hashlib.sha256(os.path.realpath(cwd).encode("utf-8", "surrogateescape")).hexdigest()
    return f"{DEFAULT_SESSION}:sub:cwd-{digest[:16]}"


#: What ``--approve`` relaxes: read-only tools run, write, edit and bash ask first.
DEFAULT_TOOL_POLICY: Final = ToolPolicy(require_approval=frozenset({"write", "edit", "bash"}))
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
_READ_TOOLS: Final = frozenset({"read", "ls", "find", "grep"})
#: The tools an agent run offers (the coding tools, ``read_skill``, the web tools): what
#: ``--approve`` names.
KNOWN_TOOLS: Final = frozenset(
    {"read", "write", "edit", "ls", "find", "grep", "bash", "todo", "read_skill"}
    | {"web_fetch", "web_search", "browser"}
)
# How the coding executor's approval rationale ends for a path outside the workspace.
_OUTSIDE: Final = "(outside the workspace)"


def preapproved_for(approve: frozenset[str]) -> frozenset[str]:
    """What ``--approve`` (tool names, or ``all``) skips: the approval questions of those
    tools, including a read-only tool's question for a path outside the workspace (the
    executor lifts that only for tools named here, so ``all`` names the read tools too; a
    secret file stays refused). The run's policy stays the executor's (the agent's
    ``[profiles.<agent>.tool_policy]``, else the default): a denied tool stays denied."""
    return frozenset({ALL_TOOLS}) | _READ_TOOLS if "all" in approve else approve


@dataclass(kw_only=True, slots=True)
class ChatOptions:
    session: str = DEFAULT_SESSION
    model: str | None = None
    approve: frozenset[str] = frozenset()
    interactive: bool = True
    cwd: str = field(default_factory=os.getcwd)
    default_model: str | None = None  # what /model shows when none was picked
    markdown: bool = False  # render answers as Markdown, with a spinner (a terminal)
    json_output: bool = False  # one-shot: print one JSON document and nothing else
    quiet: bool = False  # no usage / cost line after the answer


Item = tuple[Literal["line", "eof", "event", "sigint"], Any]


class ChatClient:
    """Talks to one session port for one terminal."""

    def __init__(self, port: SessionPort, options: ChatOptions, console: Console) -> None:
        self.port = port
        self.options = options
        self.console = console
        self.session = options.session
        self.model = options.model
        self.queue: asyncio.Queue[Item] = asyncio.Queue(_QUEUE_BOUND)
        self.mid_line = False
        self.pending_approval: ApprovalAsked | None = None
        # Approvals are asked one at a time, in the order the stream brought them.
        self.to_ask: deque[ApprovalAsked] = deque()
        self.last_ok = True
        # Runs this client submitted and has not seen end (logical run ids, from receipts).
        self.waiting_for: set[str] = set()
        # The ids this client's runs stream under: each logical run id (its first attempt)
        # and the attempts of its retries (``RunPhaseNotice.retry_of``). The session's stream
        # carries every run of the session (another client's too): only these are shown.
        self.mine: set[str] = set()
        # tool cards opened (``╭─``) and not yet closed, by action id; a run that ends with
        # cards open closes them. ``swept`` remembers cards closed that way so a late
        # ``completed`` does not close them twice. Both bounded, oldest forgotten first.
        self.open_cards: OrderedDict[str, str] = OrderedDict()
        self.swept: OrderedDict[str, None] = OrderedDict()
        self.denied: list[str] = []
        # One-shot denials are told after the answer, not in the middle of its stream.
        self.deferred_notes: list[str] = []
        # After an overflow: deltas of an attempt up to this seq were recovered from a snapshot.
        self.recovered_seq: dict[str, int] = {}
        self.active_attempt: str | None = None
        self._stream: SessionStream | None = None
        self._pump_task: asyncio.Task[None] | None = None
        self._tasks = Supervisor("lemon_chat")
        self._live: Any = None  # rich.live.Live while an answer or a spinner is shown
        self._err: Console | None = None  # status lines when stdout is not a terminal
        self._answer = ""
        self._status: str | None = None
        # For --json: what the run did (tool calls by action id, the end, denials).
        self.tool_calls: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.ended: RunEnded | None = None
        self.notes: list[str] = []
        self.exit_code = 0

    # -- plumbing -----------------------------------------------------------------------------

    async def __aenter__(self) -> ChatClient:
        self._follow(self.session)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._pause()
        self._unfollow()
        await self._tasks.close(grace_s=0)

    def _unfollow(self) -> None:
        if self._pump_task is not None:
            self._pump_task.cancel()
            self._pump_task = None
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def _follow(self, session: str) -> None:
        self._unfollow()
        stream = self._stream = self.port.watch(session)
        self._pump_task = self._tasks.spawn(self._pump(stream), name=f"watch:{session}")

    async def _pump(self, stream: SessionStream) -> None:
        with contextlib.suppress(SessionStreamClosedError):
            while True:
                event = await stream.get()
                await self.queue.put(("event", event))
                if isinstance(event, StreamOverflow):
                    return

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
        if self.options.json_output:
            return
        self._pause()
        self.console.file.write(text)
        self.console.file.flush()
        if text:
            self.mid_line = not text.endswith("\n")

    def _line(self, markup: str) -> None:
        if self.options.json_output:
            return
        self._pause()
        if self.mid_line:
            self._write("\n")
        self.console.print(markup, highlight=False)
        self.mid_line = False

    def _note(self, markup: str) -> None:
        """Anything but the answer (a tool's card, a status line, a run's note or error, an
        approval's question): on the terminal with the rest; piped, on stderr, so stdout is
        the answer alone (``x=$(lemon chat ...)``), its segments on either side kept apart."""
        if self.options.json_output:
            return
        if self.console.is_terminal:
            self._line(markup)
            return
        self._pause()
        if self.mid_line:
            self._write("\n")
        self._note_console().print(markup, highlight=False)

    def _prompt_text(self, text: str) -> None:
        """A prompt awaiting a typed answer (``approve> ``): where the questions go."""
        if self.options.json_output:
            return
        if self.console.is_terminal:
            self._write(text)
            return
        err = self._note_console().file
        err.write(text)
        err.flush()

    def _note_console(self) -> Console:
        if self._err is None:
            self._err = Console(
                stderr=True, emoji=False, highlight=False, soft_wrap=True, no_color=True
            )
        return self._err

    def _text(self, text: str) -> None:
        """Answer text: streamed as it comes, or (on a terminal) rendered as Markdown live."""
        if self.options.json_output:
            return
        if not self.options.markdown:
            self._write(text)
            return
        self._answer += text
        self._show()

    def _spin(self, label: str) -> None:
        """On a terminal: a spinner with ``label`` until text or a line comes."""
        if not self.options.markdown or self.options.json_output or self._answer:
            return
        self._status = label
        self._show()

    def __rich__(self) -> Any:
        """The live answer, parsed as Markdown when the live display draws it (at most 8
        times a second), not once per delta: re-parsing the growing answer on every delta is
        quadratic in its length."""
        from rich.markdown import Markdown

        return Markdown(self._answer)

    def _show(self) -> None:
        from rich.live import Live
        from rich.spinner import Spinner

        renderable: Any = (
            self
            if self._answer
            else Spinner("dots", text=f" {self._status or 'working…'}", style="dim")
        )
        if self._live is None:
            self._live = Live(
                renderable, console=self.console, refresh_per_second=8, transient=True
            )
            self._live.start(refresh=True)
        else:
            self._live.update(renderable)

    def _pause(self) -> None:
        """End the live segment: its Markdown is printed for good, a spinner vanishes."""
        live = self._live
        if live is None:
            return
        self._live = None
        live.stop()
        if self._answer:
            from rich.markdown import Markdown

            self.console.print(Markdown(self._answer))
            self._answer = ""
            self.mid_line = False
        self._status = None

    def prompt(self) -> None:
        if self.options.interactive and self.pending_approval is None:
            if self.mid_line:
                self._write("\n")
            self._write("> ")
            self.mid_line = False

    # -- actions ------------------------------------------------------------------------------

    def busy(self) -> bool:
        return bool(self.waiting_for)

    async def send(self, text: str, mode: str = "collect") -> None:
        request = RunRequest(
            origin="cli",
            session_key=self.session,
            prompt=text,
            queue_mode=mode,  # type: ignore[arg-type]  # one of the three modes used here
            model=self.model or None,
            cwd=self.options.cwd,
            preapproved=preapproved_for(self.options.approve),
        )
        receipt = await self.port.submit(request)
        if receipt.status == "rejected":
            self.last_ok = False
            self._note(f"[red]not accepted:[/] {escape(receipt.reason or 'rejected')}")
            return
        self.waiting_for.add(receipt.run_id)
        self.mine.add(receipt.run_id)
        if receipt.status == "started":
            self._spin("thinking…")
        if receipt.status == "queued":
            self._note(f"[dim]queued (position {(receipt.position or 0) + 1})[/]")
        elif receipt.status == "dispatched_to_active":
            self._note("[dim]steering the running answer…[/]")

    async def cancel(self) -> bool:
        """Cancel the session's running answer (messages queued behind it stay queued)."""
        result = await self.port.cancel(session_key=self.session, include_queued=False)
        return result.cancelled > 0

    def _is_mine(self, event: SessionEvent) -> bool:
        """Whether ``event`` belongs to a run this client submitted (a retry's first phase
        names the run it retries: its attempt id is adopted). Approval ends, overflow markers
        and an approval of no run pass (they are matched, or recovered, on their own)."""
        if isinstance(event, RunPhaseNotice) and event.retry_of in self.mine:
            self.mine.add(event.run_id)
        if isinstance(event, QueueNotice) and event.run_id in self.mine:
            if event.outcome is QueueOutcomeKind.MERGED and event.into_run_id:
                # Merged into a queued run: that run's answer answers this message too.
                self.mine.add(event.into_run_id)
                if event.run_id in self.waiting_for:
                    self.waiting_for.add(event.into_run_id)
            return True
        if isinstance(event, TextDelta | ToolCard | RunPhaseNotice | RunEnded):
            return event.run_id in self.mine
        if isinstance(event, ApprovalAsked):
            return event.run_id is None or event.run_id in self.mine
        return True

    async def handle_event(self, event: SessionEvent) -> None:
        if not self._is_mine(event):
            return  # another client's run of this session: not this message's answer
        if isinstance(event, TextDelta):
            if event.seq <= self.recovered_seq.get(event.run_id, 0):
                return  # already shown from the snapshot
            self._text(event.text)
        elif isinstance(event, ToolCard):
            self._card(event)
        elif isinstance(event, ApprovalAsked):
            await self.handle_approval(event)
        elif isinstance(event, ApprovalEnded):
            self._withdrawn(event)
        elif isinstance(event, QueueNotice):
            outcome = event.outcome
            if outcome is QueueOutcomeKind.STEERED:
                self._note("[dim]steer taken by the running answer[/]")
            elif outcome is QueueOutcomeKind.FALLBACK_QUEUED:
                self._note("[dim]steer not taken; queued as the next message[/]")
            elif outcome is QueueOutcomeKind.MERGED:
                self._note("[dim]merged into the queued message[/]")
            if outcome in _SETTLED:
                self.waiting_for.discard(event.run_id)
        elif isinstance(event, RunPhaseNotice):
            self.active_attempt = None if event.phase.terminal else event.run_id
        elif isinstance(event, RunEnded):
            self._ended(event)
        elif isinstance(event, StreamOverflow):
            await self._recover()

    def _card(self, event: ToolCard) -> None:
        self._record_tool(event)
        if event.phase == "started":
            self.open_cards[event.action_id] = event.title
            while len(self.open_cards) > _FINISHED_BOUND:
                self.open_cards.popitem(last=False)
            self._note(f"[cyan]╭─ {escape(event.title)}[/]")
            self._spin(f"{event.title}…")
        elif event.phase == "completed":
            self.open_cards.pop(event.action_id, None)
            if self.swept.pop(event.action_id, 0) is None:
                return
            mark = "[green]✓[/]" if event.ok else "[red]✗[/]"
            message = escape(" ".join((event.message or "").split())[:160])
            self._note(f"[cyan]╰─[/] {mark} {escape(event.title)} [dim]{message}[/]")
            self._spin("thinking…")

    def _record_tool(self, event: ToolCard) -> None:
        entry = self.tool_calls.get(event.action_id)
        if entry is None:
            if len(self.tool_calls) >= _FINISHED_BOUND:
                self.tool_calls.popitem(last=False)
            entry = self.tool_calls[event.action_id] = {
                "id": event.action_id,
                "tool": event.detail.get("tool", event.kind.value),
                "title": event.title,
                "arguments": event.detail.get("arguments"),
                "ok": None,
                "result": None,
            }
        if event.phase == "completed":
            entry["ok"] = event.ok
            entry["result"] = event.message

    def _ended(self, event: RunEnded) -> None:
        cancelled = event.error_code is ErrorCode.CANCELLED
        label = "ended" if event.ok else "cancelled" if cancelled else "failed"
        self._close_cards(label)
        self.waiting_for.discard(event.run_id)
        self.recovered_seq.pop(event.attempt_id, None)
        self.ended = event
        self.exit_code = 0 if event.ok else 130 if cancelled else 1
        self._pause()
        if event.ok:
            self.last_ok = True
            if self.mid_line:
                self._write("\n")
        else:
            self.last_ok = False
            self._note(f"[yellow]{label}:[/] {escape(event.error or label)}")
        if event.warning:
            self._note(f"[yellow]warning:[/] {escape(event.warning)}")
        for note in self.deferred_notes:
            self._note(note)
        self.deferred_notes.clear()
        if event.usage is not None and not self.options.quiet:
            self._usage_line(event)

    def _usage_line(self, event: RunEnded) -> None:
        usage = event.usage
        assert usage is not None
        parts = [f"{usage.total_tokens:,} tokens"]
        if usage.cost_usd:
            parts.append(f"${usage.cost_usd:.4f}")
        if usage.model:
            parts.append(usage.model)
        text = " · ".join(parts)
        if self.options.json_output:
            return
        if self.console.is_terminal:
            self._line(f"[dim]{escape(text)}[/]")
        else:  # piped: stdout is the answer alone, the figures go to stderr
            print(text, file=sys.stderr, flush=True)

    def result_document(self) -> dict[str, Any]:
        """The one JSON document of ``lemon chat --json``."""
        ended = self.ended
        usage = None if ended is None or ended.usage is None else ended.usage
        return {
            "ok": bool(ended and ended.ok),
            "answer": ended.answer if ended else "",
            "error": ended.error if ended else "no answer",
            "error_code": ended.error_code.value if ended and ended.error_code else None,
            "run_id": ended.run_id if ended else None,
            "session_key": self.session,
            "tool_calls": list(self.tool_calls.values()),
            "usage": None
            if usage is None
            else {
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cache_read_tokens": usage.cache_read_tokens,
                "cache_write_tokens": usage.cache_write_tokens,
                "total_tokens": usage.total_tokens,
                "model": usage.model,
                "turns": usage.turns,
            },
            "cost_usd": None if usage is None else usage.cost_usd,
            "notes": self.notes,
            "warning": ended.warning if ended else None,
        }

    async def _recover(self) -> None:
        """The stream fell behind: show what the snapshot has that we have not shown, then
        watch again (deltas the snapshot covered are skipped)."""
        self._follow(self.session)  # watch first, so nothing after the snapshot is missed
        for _ in range(5):
            snapshot = await self.port.snapshot(self.session)
            if snapshot.status == "ok":
                break
        else:
            self._note("[yellow]the session is changing quickly; some output was not shown[/]")
            return
        active = snapshot.active
        if active is not None and active.run_id in self.mine:
            self.recovered_seq[active.attempt_id] = active.text_seq
            self._note("[dim]… (output fell behind; the answer so far:)[/]")
            self._write(active.text)
        for approval in snapshot.pending_approvals:
            asked = ApprovalAsked(
                session_key=self.session,
                approval_id=approval.approval_id,
                run_id=approval.run_id,
                tool=approval.tool,
                action=approval.action,
                rationale=approval.rationale,
                expires_at_ms=approval.expires_at_ms,
            )
            known = self.pending_approval is not None and (
                self.pending_approval.approval_id == approval.approval_id
            )
            if not known and all(a.approval_id != approval.approval_id for a in self.to_ask):
                await self.handle_approval(asked)

    def _close_cards(self, label: str) -> None:
        """Close every card still open when its run ended: ``╰─ ✗ title cancelled``."""
        while self.open_cards:
            action_id, title = self.open_cards.popitem(last=False)
            self.swept[action_id] = None
            while len(self.swept) > _FINISHED_BOUND:
                self.swept.popitem(last=False)
            self._note(f"[cyan]╰─[/] [red]✗[/] {escape(title)} [dim]{label}[/]")

    def question(
        self, tool: str, action: dict[str, Any] | None, rationale: str | None = None
    ) -> str:
        """The approval question, as a person would ask it (plain text, not markup).

        bash: ``Allow bash: sleep 30 ?`` (the command as the shell would show it); write and
        edit: ``Allow write to note.txt ?`` (the path relative to the session's directory when
        inside it); anything else: ``Allow <tool> key=value …?``. Long text ends in ``…``. When
        the executor's ``rationale`` says the path is outside the workspace, the question says
        so too: ``Allow write to /etc/hosts (outside the workspace) ?``.
        """
        asked = self._question(tool, action)
        if rationale is not None and rationale.endswith(_OUTSIDE):
            return asked.removesuffix("?").rstrip() + f" {_OUTSIDE} ?"
        return asked

    def _question(self, tool: str, action: dict[str, Any] | None) -> str:
        args = approval_arguments(action)
        if tool == "bash":
            command = approval_command(args)
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

    async def handle_approval(self, event: ApprovalAsked) -> None:
        approval_id = event.approval_id
        if not self.options.interactive:
            await self._resolve(approval_id, ApprovalDecision.DENY)
            self.denied.append(event.tool)
            hint = f"rerun with --approve {escape(event.tool)} to allow it"
            self.notes.append(
                f"denied {event.tool}: it needs an approval and there is no terminal to ask"
            )
            self.deferred_notes.append(
                f"[yellow]denied {escape(event.tool)}:[/] it needs an approval and there is no "
                f"terminal to ask; {hint}"
            )
            return
        self.to_ask.append(event)
        self.ask_next()

    def _withdrawn(self, event: ApprovalEnded) -> None:
        """An approval ended without our answer (timeout, run cancelled): stop asking it."""
        approval_id = event.approval_id
        for queued in list(self.to_ask):
            if queued.approval_id == approval_id:
                self.to_ask.remove(queued)
        current = self.pending_approval
        if current is not None and current.approval_id == approval_id:
            self.pending_approval = None
            tool = escape(current.tool)
            self._note(f"[dim]approval for {tool} ended: {event.decision.value}[/]")
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
        self._note(
            f"[bold yellow]{escape(self.question(event.tool, event.action, event.rationale))}[/] "
            r"[bold]\[o][/]nce / [bold]\[s][/]ession / [bold]\[a][/]lways / [bold]\[d][/]eny"
        )
        self._prompt_text("approve> ")
        return True

    async def answer_approval(self, line: str) -> None:
        event = self.pending_approval
        assert event is not None
        decision = _ANSWERS.get(line.strip().lower())
        if decision is None:
            self._note("answer o (once), s (session), a (always) or d (deny)")
            self._prompt_text("approve> ")
            return
        self.pending_approval = None
        if await self._resolve(event.approval_id, decision):
            self._note(f"[dim]{_SAID.get(decision, decision.value)}[/]")
        else:
            self._note("[dim]that approval is no longer pending[/]")
        self.ask_next()

    async def _resolve(self, approval_id: str, decision: ApprovalDecision) -> bool:
        result = await self.port.resolve_approval(approval_id, decision)
        return result.resolved

    async def compact(self, instructions: str | None = None) -> bool:
        """Compact the session now; True when it worked (or there was nothing to do)."""
        self._spin("compacting the conversation…")
        result = await self.port.compact(self.session, instructions=instructions)
        if result.error is not None:
            self._line(f"[yellow]could not compact:[/] {escape(result.error)}")
            return False
        if not result.compacted:
            self._line(f"[dim]{escape(result.note or 'nothing to compact')}[/]")
            return True
        self._line(
            f"[dim]compacted: {result.messages_summarised} messages summarised, "
            f"{result.messages_kept} kept; about {result.tokens_before:,} → "
            f"{result.tokens_after:,} tokens of {result.context_window:,}[/]"
        )
        return True

    # -- loops ----------------------------------------------------------------------------------

    async def run_once(self, message: str) -> int:
        """One message; returns the exit code (0 when the answer completed)."""
        await self.send(message)
        while self.waiting_for:
            kind, value = await self.queue.get()
            if kind == "event":
                await self.handle_event(value)
            elif kind == "line" and self.pending_approval is not None:
                await self.answer_approval(value)
            elif kind == "sigint":
                if not await self.cancel():
                    return 130
                self._note("[yellow]cancelling…[/]")
            elif kind == "eof" and self.pending_approval is not None:
                await self.answer_approval("deny")
        self._pause()
        if self.mid_line:
            self._write("\n")
        if self.ended is None:
            return 1  # not accepted
        return self.exit_code


def _clip(text: str, limit: int = _SHOWN_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
