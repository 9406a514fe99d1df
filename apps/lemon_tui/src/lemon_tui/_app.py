"""The full-screen client: one Textual app speaking only the session port of a daemon.

One worker owns the connection: it connects (with backoff), watches the session and handles
its typed events in order on the app's loop. When the stream ends with a ``StreamOverflow``
(it fell behind, or the connection dropped) the worker watches again *first*, then asks
``snapshot()``: the active answer is replaced from the snapshot (never appended to an
uncertain prefix) and deltas the snapshot already holds (``seq <= text_seq``) are skipped.
A dropped connection is re-opened with backoff and recovered the same way.

The editor is ``_editor``, the slash commands and pickers' work ``_slash`` (with
``_pickers``), the blocks and cards ``_widgets`` (entries and the widgets made from them),
the virtual transcript that mounts only those near the view ``_transcript``, the subagent
tasks shown on `task` cards ``_tasks`` (their wire events come through the port client's
``on_event``); what the app shows is in the app README.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Final, Protocol

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from lemon_core.events import ApprovalDecision, ErrorCode, QueueOutcomeKind, RunPhase
from lemon_core.execution import RunRequest, ToolPolicy
from lemon_core.sessions import (
    ApprovalAsked,
    ApprovalEnded,
    PendingApproval,
    QueueNotice,
    RunEnded,
    RunPhaseNotice,
    SessionEvent,
    SessionPort,
    SessionSnapshot,
    SessionStream,
    StreamOverflow,
    TextDelta,
    ToolCard,
    TranscriptEntry,
)
from lemon_tui._commands import is_command
from lemon_tui._daemon import ModelInfo, offered
from lemon_tui._editor import CommandHints, Editor, HistorySearch
from lemon_tui._mcp import ALARMING as MCP_ALARMING
from lemon_tui._mcp import McpServerState
from lemon_tui._mcp import from_event as mcp_from_event
from lemon_tui._mcp import from_status as mcp_from_status
from lemon_tui._question import QuestionPanel, is_question, question_line
from lemon_tui._slash import (
    SessionUsage,
    load_models,
    open_model_picker,
    open_switcher,
    run_command,
    set_model,
)
from lemon_tui._tasks import TaskState, from_event, from_row
from lemon_tui._text import clip, escape
from lemon_tui._theme import THEMES, Shade, pick_shade
from lemon_tui._transcript import Transcript
from lemon_tui._widgets import (
    AnswerEntry,
    ApprovalPanel,
    Back,
    CardEntry,
    Entry,
    NoteEntry,
    Status,
    StatusLine,
    UserEntry,
    question,
)

__all__ = ["DEFAULT_SESSION", "ClientPort", "Connector", "LemonTUI"]

DEFAULT_SESSION: Final = "agent:default:main"
_BACKOFF_S: Final = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0)
_SNAPSHOT_TRIES: Final = 5
_REMEMBERED: Final = 1024
_SETTLED: Final = frozenset(
    {QueueOutcomeKind.MERGED, QueueOutcomeKind.STEERED, QueueOutcomeKind.CANCELLED}
)
# A run past these phases runs: its message's "queued" note goes.
_RUNNING: Final = frozenset(
    {RunPhase.DISPATCHED_TO_GATEWAY, RunPhase.STARTING_ENGINE, RunPhase.STREAMING}
)
_FULL_COLLECTION_EVERY: Final = 32  # run ends between two full garbage collections
_BACKGROUND: Final = 64  # background sessions whose unread events are counted
_TASKS: Final = 256  # tasks of the session shown that are remembered (the oldest forgotten)
_TASK_EVENTS: Final = frozenset(
    {"task.started", "task.completed", "task.error", "task.timeout", "task.aborted"}
)
_CARDS_SEARCHED: Final = 200  # entries looked through for an async task's card
_MAIN_SCREEN_ONLY: Final = frozenset(
    {"search_history", "switch_session", "pick_model", "toggle_output"}
)
_SAID: Final = {
    ApprovalDecision.APPROVE_ONCE: "approved once",
    ApprovalDecision.APPROVE_SESSION: "approved for this session",
    ApprovalDecision.APPROVE_GLOBAL: "approved always",
    ApprovalDecision.DENY: "denied",
}


def _lost() -> tuple[type[Exception], ...]:
    """What a call on a gone connection raises. Imported late: the control plane package
    pulls in its server stack, which the first paint should not wait for."""
    from lemon_control_plane.errors import ControlPlaneError

    return (ControlPlaneError, OSError)


def _k(tokens: int) -> str:
    """1234 → ``1.2k``, 200000 → ``200k``, 1047576 → ``1.0M``."""
    if tokens >= 1_000_000:
        return f"{tokens / 1_000_000:.1f}M"
    if tokens >= 10_000:
        return f"{tokens // 1000}k"
    if tokens >= 1000:
        return f"{tokens / 1000:.1f}k"
    return str(tokens)


def _same_call(card: CardEntry, asked: ApprovalAsked) -> bool:
    """Whether an open card is the call an approval is about (same tool; same path when
    both name one: the approval's is resolved to an absolute path)."""
    if not card.title.startswith(asked.tool):
        return False
    path = (asked.action or {}).get("path")
    named = card.title.removeprefix(asked.tool).strip()
    return not isinstance(path, str) or not named or path.endswith(named)


def _history_card(entry: TranscriptEntry) -> CardEntry:
    """A tool call of the history, shown with its real outcome (ran ok / failed, or denied /
    expired / cancelled: it did not run or did not finish), as the transcript records it."""
    name = entry.tool or entry.text.split(":", 1)[0]
    body = entry.text.removeprefix(f"{name}:").strip() if entry.tool else entry.text
    card = CardEntry(f"history-{entry.index}", name)
    if entry.outcome in (None, "ok", "failed"):
        card.complete(entry.outcome != "failed", body)
    else:
        card.message = body
        card.seal(entry.outcome)
    return card


def _refused() -> tuple[type[Exception], ...]:
    """A call the daemon refused (bad input) or could not answer (gone)."""
    return (ValueError, *_lost())


class ClientPort(SessionPort, Protocol):
    """A connected session port this client can close."""

    async def aclose(self) -> None: ...


Connector = Callable[[], Awaitable[ClientPort]]
"""Opens a connection (raises ``ControlPlaneError`` or ``OSError`` when it cannot)."""


class LemonTUI(App[int]):
    """See the module docstring. ``connect`` opens the port; ``where`` names it for messages."""

    TITLE = "lemon"
    CSS = """
    #transcript { height: 1fr; }
    #input { height: auto; }
    #approval-waiting {
        display: none; height: auto; padding: 0 1; border-left: thick $warning;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "abort", "abort", priority=True, show=False),
        Binding("ctrl+r", "search_history", "history search", priority=True, show=False),
        Binding("ctrl+x", "switch_session", "sessions", priority=True, show=False),
        Binding("ctrl+o", "pick_model", "models", priority=True, show=False),
        Binding("ctrl+t", "toggle_output", "tool output", priority=True, show=False),
        # Only while an approval waits and no `/` completion shows (check_action): else Tab
        # stays the editor's. Not Ctrl+A: that is the editor's line start, pressed mid-typing.
        Binding("tab", "open_approval", "answer approval", priority=True, show=False),
    ]

    def __init__(
        self,
        connect: Connector,
        *,
        where: str = "the daemon",
        session: str = DEFAULT_SESSION,
        tool_policy: ToolPolicy | None = None,
        preapproved: frozenset[str] = frozenset(),
        cwd: str | None = None,
        clock: Callable[[], float] = time.time,
        shade: Shade | None = None,
        history: Path | None = None,
    ) -> None:
        super().__init__()
        self.clock = clock
        self.history_path = history
        self.first_paint_at: float | None = None  # time.monotonic() of the first frame
        self._settled = 0
        self.theme = THEMES[shade or pick_shade(os.environ)]
        self._connect = connect
        self.where = where
        self.session = session
        self.tool_policy = tool_policy
        self.preapproved = preapproved
        self.cwd = cwd
        self.port: ClientPort | None = None
        self.status = Status(session=session)
        self.waiting_for: set[str] = set()
        self.answer: AnswerEntry | None = None
        # The run being shown and its last block (answer or card): what it says next goes
        # right after that, in its place, even when messages were sent below it meanwhile.
        self.tail: Entry | None = None
        self.tail_run: str | None = None
        self.noted: dict[str, UserEntry] = {}  # run id -> its message with a note (bounded)
        self.cards: dict[str, CardEntry] = {}  # open cards by action id
        self.sealed_cards: dict[str, None] = {}  # bounded (oldest forgotten first)
        self.recovered_seq: dict[str, int] = {}
        # Characters of a run's text already shown in its earlier (sealed) answer blocks: a
        # snapshot's active text is the whole run's text, the open block holds only the rest.
        self.sealed_chars: dict[str, int] = {}
        self.to_ask: deque[ApprovalAsked] = deque()
        # The approval in front of the person: shown in a line above the editor, its panel
        # opened only by Tab, so nothing typed for the editor can answer it.
        # A child task's question (``ask_parent``) is a QuestionPanel: answered in free text
        # (or by an option) with ``tasks.answer``, where the daemon offers it.
        self.panel: ApprovalPanel | QuestionPanel | None = None
        self._decided: Callable[[Any], None] | None = None
        self.idle_aborts = 0
        self.recoveries = 0  # how often a gap was recovered from a snapshot
        self.model: str | None = None  # None: the daemon's default
        self.models: list[ModelInfo] | None = None  # models.list, cached per connection
        self.usage: dict[str, SessionUsage] = {}
        self.background: dict[str, int] = {}  # sessions left, by unread events (bounded)
        self._stream: SessionStream | None = None
        # The session's subagent tasks (``_tasks``), by id, and the `task` card showing each.
        self.tasks: OrderedDict[str, TaskState] = OrderedDict()
        self.task_cards: dict[str, CardEntry] = {}
        # The daemon's MCP servers (``_mcp``), by name: read by /mcp, kept by mcp.server events
        # once /mcp subscribed this connection to the ``mcp`` topic (``mcp_watching``).
        self.mcp_servers: dict[str, McpServerState] = {}
        self.mcp_watching = False
        self.mcp_heard: set[str] = set()  # servers an event told of since the last read
        self._switched = True  # the first watch shows the session's recent history
        # Kept here, not queried: a worker may still add to it while the app shuts down.
        self._transcript = Transcript(id="transcript")

    # -- layout ----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield self._transcript
        hints = CommandHints(id="hints")
        yield hints
        editor = Editor(
            id="input",
            placeholder="message · /help · Shift+Enter or Ctrl+J: new line",
            history=self.history_path,
        )
        editor.hints = hints
        yield Static("", id="approval-waiting")
        yield editor
        yield StatusLine(id="status")

    def on_mount(self) -> None:
        self.paint_status()
        self.editor.focus()
        # Connect once the first frame is drawn: the screen is there before the network is.
        self.call_after_refresh(self._painted)

    def _painted(self) -> None:
        self.first_paint_at = time.monotonic()
        self.run_worker(self._follow_loop(), name="connection", exit_on_error=True)

    @property
    def transcript(self) -> Transcript:
        """The virtual transcript (``_transcript``): every entry kept, widgets only near the
        view."""
        return self._transcript

    def _add(self, entry: Entry, *, follow: bool = False) -> None:
        """At the end; ``follow``: what the person did (a message, a command's answer) brings
        the view back to the end, other output only while the view is there."""
        self.transcript.add(entry)
        self.transcript.follow(force=follow)

    def _follow_end(self) -> None:
        """Keep the newest output in view, unless the person scrolled up."""
        self.transcript.follow()

    def _add_for_run(self, entry: Entry) -> None:
        """Show a block of the run being shown: after its last block, else at the end."""
        tail = self.tail
        if tail is not None and self.transcript.holds(tail):
            self.transcript.add(entry, after=tail)
            self._follow_end()
        else:
            self._add(entry)
        self.tail = entry

    def _run_seen(self, run_id: str) -> None:
        """An event of ``run_id``: a run other than the one shown starts a new place (at the
        end), and its message's note ("queued", "steering"...) is gone: it runs."""
        if self.tail_run != run_id:
            self._seal_answer("ok")
            self.tail, self.tail_run = None, run_id
        self._ran(run_id)

    def _ran(self, run_id: str, note: str = "") -> None:
        block = self.noted.pop(run_id, None)
        if block is not None:
            block.set_note(note)

    def note(self, markup: str) -> None:
        self._add(NoteEntry(markup), follow=True)

    async def _learn_models(self) -> None:
        """The catalogue, for the gauge's context window (quietly absent when not offered)."""
        try:
            await load_models(self)
        except ValueError:
            return
        except _lost():
            return
        self.paint_status()

    async def _learn_session(self) -> None:
        """The session's own model, where the daemon keeps one (``session.detail``'s
        ``modelOverride``); a model given to this client (``--model``) stays."""
        daemon = offered(self.port, "session.detail")
        if daemon is None or self.model is not None:
            return
        try:
            payload = await daemon.call("session.detail", {"sessionKey": self.session})
        except ValueError:
            return
        except _lost():
            return
        session = payload.get("session") if isinstance(payload, dict) else None
        override = session.get("modelOverride") if isinstance(session, dict) else None
        if isinstance(override, str) and override and self.model is None:
            self.model = override
        self.paint_status()

    def context_window(self) -> int:
        """The context window of the model in use, from the catalogue (0: not known)."""
        ref = self.model or self.status.model
        for m in self.models or ():
            if (ref is not None and m.ref == ref) or (ref is None and m.default):
                return m.context_window
        return 0

    def context_gauge(self) -> str:
        """``12% 24k/200k``: the last prompt's tokens against the model's window."""
        seen = self.usage.get(self.session)
        used = seen.context_tokens if seen is not None else 0
        window = self.context_window()
        if not window:
            return f"{_k(used)} tokens" if used else ""
        return f"{used * 100 // window}% {_k(used)}/{_k(window)}"

    def paint_status(self) -> None:
        self.status.session = self.session
        if self.model is not None:
            self.status.model = self.model
        elif self.status.model is None and self.models:
            self.status.model = next((m.ref for m in self.models if m.default), None)
        self.status.gauge = self.context_gauge()
        self.status.unread = sum(self.background.values())
        busy = bool(self.waiting_for)
        if isinstance(self.panel, QuestionPanel):
            self.status.run = "question waiting (Tab)"
        elif self.panel is not None:
            self.status.run = "waiting for approval (Tab)"
        else:
            self.status.run = "running" if busy else "idle"
        self.status.queued = max(0, len(self.waiting_for) - 1)
        for line in self.query("#status").results(StatusLine):
            line.show(self.status)  # none while the app shuts down (a worker may still run)

    # -- the connection ----------------------------------------------------------------------------

    async def _open(self) -> ClientPort:
        """Connect, with backoff; the first failure says how to start a daemon."""
        attempt = 0
        while True:
            try:
                return await self._connect()
            except _lost() as exc:
                if attempt == 0:
                    self.note(
                        f"[yellow]cannot reach {escape(self.where)}:[/] {escape(str(exc))}; "
                        "start one with `lemon daemon start` (retrying…)"
                    )
                self.status.connection = "offline"
                self.paint_status()
            await asyncio.sleep(_BACKOFF_S[min(attempt, len(_BACKOFF_S) - 1)])
            attempt += 1
            self.status.connection = "reconnecting"
            self.paint_status()

    async def _follow_loop(self) -> None:
        recover = False
        while True:
            port = self.port = await self._open()
            unhook = self._hear_tasks(port)
            self.models = None  # another daemon may know other models
            self.mcp_watching = False  # a new connection has no topic subscription yet
            self.status.connection = "online"
            self.run_worker(self._learn_models(), group="models", exit_on_error=False)
            self.run_worker(self._learn_session(), group="models", exit_on_error=False)
            self.run_worker(self._count_unread(port), group="background", exit_on_error=False)
            self.paint_status()
            try:
                while True:
                    stream = port.watch(self.session)
                    self._stream = stream
                    if self._switched:
                        self._switched = False
                        await self._recover(port, history=True)
                    elif recover:
                        await self._recover(port, history=False)
                    recover = True
                    async for event in stream:
                        if isinstance(event, StreamOverflow):
                            break
                        self._handle(event)
            except _lost():
                pass  # the connection is gone: open a new one and recover
            self.port = None
            unhook()
            self.status.connection = "reconnecting"
            self.paint_status()
            await port.aclose()

    async def _count_unread(self, port: ClientPort) -> None:
        """Every other session, on one ``watch_all`` stream for the connection: each answer
        ended and each approval asked there is one unread (a session visited before says so
        in a note when an approval waits). At most ``_BACKGROUND`` sessions are counted, the
        least recently heard from forgotten first. An overflow watches again."""
        while self.port is port:
            try:
                stream = port.watch_all()
                async for event in stream:
                    if isinstance(event, StreamOverflow):
                        # Fell behind (counts may miss some) or the link went: pause, and
                        # watch again while this connection is still the app's.
                        await asyncio.sleep(_BACKOFF_S[0])
                        break
                    key = event.session_key
                    if isinstance(event, ToolCard) and event.phase == "started":
                        self._child_action(key, event.title)
                    if key == self.session or not isinstance(event, RunEnded | ApprovalAsked):
                        continue
                    visited = key in self.background
                    self.background[key] = self.background.pop(key, 0) + 1
                    while len(self.background) > _BACKGROUND:
                        del self.background[next(iter(self.background))]
                    if visited and isinstance(event, ApprovalAsked):
                        self.note(f"an approval waits in {escape(key)} (Ctrl+X switches)")
                    self.paint_status()
                else:
                    return  # closed: the connection is being replaced
            except _lost():
                return

    async def _recover(self, port: SessionPort, *, history: bool) -> None:
        """Catch up from the authority after a gap (or show a session switched to)."""
        snapshot: SessionSnapshot | None = None
        for _ in range(_SNAPSHOT_TRIES):
            snapshot = await port.snapshot(self.session)
            if snapshot.status == "ok":
                break
        if snapshot is None or snapshot.status != "ok":
            self.note("[yellow]the session is changing quickly; some output was not shown[/]")
            return
        if not history:
            self.recoveries += 1
            if any(not t.ended for t in self.tasks.values()):
                # Task events may have been missed in the gap: ask the run graph again.
                self.run_worker(self._tasks_again(), group="tasks", exit_on_error=False)
        if history:
            shown: list[Entry] = []
            for entry in snapshot.messages:
                if entry.role == "user":
                    shown.append(UserEntry(entry.text))
                elif entry.role == "assistant":
                    block = AnswerEntry(entry.text)
                    block.sealed = "ok"
                    shown.append(block)
                elif entry.role == "tool":
                    shown.append(_history_card(entry))
            self.transcript.add_all(shown)
            self.transcript.follow(force=True)
            self.call_after_refresh(self.settle_memory)
        active = snapshot.active
        if active is not None:
            self.recovered_seq[active.run_id] = active.text_seq
            self.recovered_seq[active.attempt_id] = active.text_seq
            self._run_seen(active.run_id)
            # Text before a tool card is in a sealed block already: never show it again.
            rest = active.text
            if not active.text_truncated:
                rest = rest[self.sealed_chars.get(active.run_id, 0) :]
            if self.answer is None and rest:
                self.answer = AnswerEntry()
                self._add_for_run(self.answer)
            if self.answer is not None:
                self.answer.replace_text(rest)
        elif not history and self.answer is not None:
            # The run ended while we were away: its answer is the last one in the history.
            said = [e.text for e in snapshot.messages if e.role == "assistant"]
            if said:
                self.answer.replace_text(said[-1])
            self._seal("ended" if snapshot.last_ok else "failed")
        live = set(snapshot.queued) | ({active.run_id} if active is not None else set())
        self.waiting_for &= live
        if active is None and self.cards:
            self._seal("interrupted")  # the run ended while we were away: no card spins
        still = {p.approval_id for p in snapshot.pending_approvals}
        self.to_ask = deque(a for a in self.to_ask if a.approval_id in still)
        if self.panel is not None and self.panel.asked.approval_id not in still:
            self.note(f"approval for {escape(self.panel.asked.tool)} is no longer pending")
            self._close_panel()
        self.ask_again(snapshot.pending_approvals)
        self.paint_status()

    # -- events ------------------------------------------------------------------------------------

    def _handle(self, event: SessionEvent) -> None:
        if isinstance(event, TextDelta):
            if event.seq <= self.recovered_seq.get(event.run_id, 0):
                return  # the snapshot already held it
            self._run_seen(event.run_id)
            if self.answer is None:
                self.answer = AnswerEntry()
                self._add_for_run(self.answer)
            self.answer.append_text(event.text)
            self._follow_end()
        elif isinstance(event, ToolCard):
            self._card(event)
        elif isinstance(event, ApprovalAsked):
            self.to_ask.append(event)
            self._ask_next()
        elif isinstance(event, ApprovalEnded):
            self._withdrawn(event)
        elif isinstance(event, QueueNotice):
            if event.outcome is QueueOutcomeKind.STEERED:
                self.note("steer taken by the running answer")
            elif event.outcome is QueueOutcomeKind.FALLBACK_QUEUED:
                self.note("steer not taken; queued as the next message")
            if event.outcome in _SETTLED:
                self.waiting_for.discard(event.run_id)
                cancelled = event.outcome is QueueOutcomeKind.CANCELLED
                self._ran(event.run_id, "cancelled" if cancelled else "")
        elif isinstance(event, RunPhaseNotice):
            if event.phase in _RUNNING:
                self._ran(event.run_id)
        elif isinstance(event, RunEnded):
            self._ended(event)
        self.paint_status()

    def _card(self, event: ToolCard) -> None:
        card = self.cards.get(event.action_id)
        if card is None:
            if event.action_id in self.sealed_cards:
                return  # sealed when its run ended; a late phase changes nothing
            self._run_seen(event.run_id)
            card = CardEntry(event.action_id, event.title, event.detail)
            card.run_id = event.run_id
            self.cards[event.action_id] = card
            if card.is_task:
                self._task_for(card)
            self._add_for_run(card)
            if self.answer is not None:
                shown = self.sealed_chars.get(event.run_id, 0) + len(self.answer.text)
                self.sealed_chars[event.run_id] = shown
                self._seal_answer("ok")  # text after the card goes into a new block
        if event.phase == "updated":
            card.updated(event.message)
        elif event.phase == "completed":
            card.complete(event.ok, event.message, event.detail)
            self.cards.pop(event.action_id, None)

    # -- subagent tasks ----------------------------------------------------------------------------

    def _hear_tasks(self, port: ClientPort) -> Callable[[], None]:
        """Hear the daemon's task events on ``port`` (when its client offers them); returns
        the call that stops it."""
        hook = getattr(port, "on_event", None)
        if not callable(hook):
            return lambda: None
        unhook = hook(self._wire_event)
        return unhook if callable(unhook) else (lambda: None)

    def _wire_event(self, name: str, payload: dict[str, Any]) -> None:
        """A wire event beyond the session stream: the ``task.*`` ones (and
        ``run.graph.changed``) of the session shown update its tasks and their cards; an
        ``mcp.server`` updates that MCP server's state (said when it failed)."""
        if name == "mcp.server":
            self._mcp_event(payload)
            return
        if name not in _TASK_EVENTS and name not in (
            "run.graph.changed", "task.progress", "task.notice",
        ):  # fmt: skip
            return
        if payload.get("parentSessionKey") != self.session:
            return  # another session's child (or a graph change naming no parent session)
        if name == "task.notice":  # a detached child ended after its parent's run
            text = payload.get("text")
            if isinstance(text, str):
                self.note(escape(clip(text, 2000)))
            return
        task = from_event(name, payload, self.tasks)
        if task is None:
            return
        self._remember(task)
        card = self._card_of(task)
        if card is not None:
            card.show_task(task)
        elif name in _TASK_EVENTS and task.ended:
            # No card shows it (the call is not on this screen): say that it ended.
            self.note(
                f"task {escape(task.task_id)} {escape(task.line().split(' · ', 2)[-1])} · "
                f"/tasks open {escape(task.task_id)}"
            )
        if task.ended and task.parent_run_id and name in _TASK_EVENTS:
            self.run_worker(
                self._task_usage(task.parent_run_id), group="tasks", exit_on_error=False
            )

    def _mcp_event(self, payload: dict[str, Any]) -> None:
        server = mcp_from_event(payload)
        if server is None:
            return
        before = self.mcp_servers.get(server.name)
        self.mcp_servers[server.name] = server
        self.mcp_heard.add(server.name)
        if server.state in MCP_ALARMING and (before is None or before.state != server.state):
            self.note(f"[yellow]MCP[/] {escape(clip(server.line(), 300))} · /mcp")

    def learn_mcp(self, payload: object) -> list[McpServerState]:
        """Take an ``mcp.status`` answer: each server's row, unless an event told of it
        since the read began (the event is newer); returns every server known, by name."""
        for server in mcp_from_status(payload):
            if server.name not in self.mcp_heard:
                self.mcp_servers[server.name] = server
        return [self.mcp_servers[n] for n in sorted(self.mcp_servers)]

    def _child_action(self, session_key: str, title: str) -> None:
        """A tool call started in ``session_key``: when that is a task's child session, it
        is the task's last action (shown on its card while it runs)."""
        for task in self.tasks.values():
            if task.session_key == session_key and not task.ended:
                task.last_action = title
                card = self._card_of(task)
                if card is not None:
                    card.show_task(task)
                return

    def _remember(self, task: TaskState) -> None:
        self.tasks[task.task_id] = task
        self.tasks.move_to_end(task.task_id)
        while len(self.tasks) > _TASKS:
            gone, _ = self.tasks.popitem(last=False)
            self.task_cards.pop(gone, None)

    def _card_of(self, task: TaskState) -> CardEntry | None:
        """The `task` card that shows ``task``: the one bound to it, else the first open one
        of its parent run not bound yet (a sync call waits there), else a card whose result
        names it (an async call returned its id)."""
        card = self.task_cards.get(task.task_id)
        if card is not None and self.transcript.holds(card):
            return card
        found = next(
            (
                c
                for c in self.cards.values()
                if c.is_task and c.task is None and c.run_id == task.parent_run_id
            ),
            None,
        )
        if found is None:
            for entry in reversed(self.transcript.entries[-_CARDS_SEARCHED:]):
                if (
                    isinstance(entry, CardEntry)
                    and entry.is_task
                    and entry.task is None
                    and task.task_id in entry.message
                ):
                    found = entry
                    break
        if found is not None:
            self.task_cards[task.task_id] = found
        return found

    def _task_for(self, card: CardEntry) -> None:
        """A `task` card just started: the task of its run heard of first (its event came
        before the card's) is shown on it."""
        bound = set(self.task_cards)
        for task in self.tasks.values():
            if task.parent_run_id == card.run_id and task.task_id not in bound:
                self.task_cards[task.task_id] = card
                card.show_task(task)
                return

    async def _task_usage(self, run_id: str) -> None:
        """A task of ``run_id`` ended: its turns and tokens from the run graph (``runs.tree``,
        when the daemon offers it)."""
        daemon = offered(self.port, "runs.tree")
        if daemon is None:
            return
        try:
            payload = await daemon.call("runs.tree", {"runId": run_id})
        except _refused():
            return
        self.learn_tasks(payload)

    async def _tasks_again(self) -> None:
        """After a gap: the run graph's word on every task not seen ending (``runs.tree`` of
        their parent runs: an ended one is there too, ``tasks.list`` would drop it)."""
        runs = {t.parent_run_id for t in self.tasks.values() if not t.ended and t.parent_run_id}
        for run_id in sorted(runs):
            await self._task_usage(run_id)

    def learn_tasks(self, payload: object) -> list[TaskState]:
        """Take the rows of a ``tasks.list`` / ``runs.tree`` payload for the session shown;
        the tasks they name, updated (their cards too)."""
        rows = payload.get("tasks") if isinstance(payload, Mapping) else None
        learned: list[TaskState] = []
        for row in rows if isinstance(rows, list) else ():
            if not isinstance(row, Mapping):
                continue
            task = from_row(row, self.tasks)
            if task is None:
                continue
            self._remember(task)
            learned.append(task)
            card = self._card_of(task) if row.get("parent_session_key") == self.session else None
            if card is not None:
                card.show_task(task)
        return learned

    def _seal_answer(self, state: str) -> None:
        if self.answer is not None:
            self.answer.sealed = state
            self.answer = None

    def _seal(self, state: str) -> None:
        """The run ended: its answer and every card still open are sealed as ``state``."""
        self._seal_answer(state)
        for action_id, card in self.cards.items():
            card.seal(state)
            self.sealed_cards[action_id] = None
        while len(self.sealed_cards) > _REMEMBERED:
            del self.sealed_cards[next(iter(self.sealed_cards))]
        self.cards.clear()
        self.tail, self.tail_run = None, None

    def _ended(self, event: RunEnded) -> None:
        cancelled = event.error_code is ErrorCode.CANCELLED
        label = "ended" if event.ok else "cancelled" if cancelled else "failed"
        self._ran(event.run_id, "" if event.ok else label)
        shown = self.tail_run == event.run_id
        if self.answer is None and event.ok and event.answer and not self._shown_answer(shown):
            self.answer = AnswerEntry(event.answer)
            if shown:
                self._add_for_run(self.answer)
            else:
                self._add(self.answer)
        self._seal(label if not event.ok else "ok")
        self.call_after_refresh(self.settle_memory)
        self.waiting_for.discard(event.run_id)
        self.recovered_seq.pop(event.run_id, None)
        self.recovered_seq.pop(event.attempt_id, None)
        self.sealed_chars.pop(event.run_id, None)
        if not event.ok:
            self.note(f"[yellow]{label}:[/] {escape(event.error or label)}")
        if event.usage is not None:
            u = event.usage
            seen = self.usage.setdefault(event.session_key, SessionUsage())
            seen.runs += 1
            seen.input_tokens += u.input_tokens
            seen.output_tokens += u.output_tokens
            seen.cache_tokens += u.cache_read_tokens + u.cache_write_tokens
            seen.cost_usd += u.cost_usd
            seen.context_tokens = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
            if u.model and self.model is None:
                self.status.model = u.model  # what the daemon's default resolved to
            text = f"{u.total_tokens:,} tokens"
            if seen.cost_usd:
                text += f" ${seen.cost_usd:.4f}"
            self.status.usage = text

    def _shown_answer(self, shown: bool) -> bool:
        """Whether the run's last block (``shown``: the run is the one shown), else the
        transcript's, is an answer (streamed, then sealed)."""
        if shown:
            return isinstance(self.tail, AnswerEntry)
        return isinstance(self.transcript.last, AnswerEntry)

    # -- approvals ---------------------------------------------------------------------------------

    def _ask_next(self) -> None:
        if self.panel is not None or not self.to_ask:
            return
        asked = self.to_ask.popleft()
        if is_question(asked) and offered(self.port, "tasks.answer") is not None:
            self._ask_question(asked)
            return
        # The panel shows an edit's diff: the approval names the path, the open card of the
        # same call (it started just before it asked) carries the arguments.
        diff = next(
            (c.diff for c in reversed(self.cards.values()) if c.diff and _same_call(c, asked)),
            None,
        )
        self.panel = ApprovalPanel(asked, diff)

        def decided(decision: ApprovalDecision | Back | None) -> None:
            if isinstance(decision, Back):  # Tab again: back to the editor, still waiting
                self.panel = ApprovalPanel(asked, diff)
                self.paint_status()
                return
            self.panel = None
            self._decided = None
            if decision is not None:
                self.run_worker(self._resolve(asked, decision), group="approvals")
            self._show_waiting()
            self._ask_next()
            self.paint_status()

        self._decided = decided
        self._show_waiting()
        self.paint_status()

    def _ask_question(self, asked: ApprovalAsked) -> None:
        """A child's question: its own panel (free text or its options), opened by Tab."""
        self.panel = QuestionPanel(asked)

        def answered(value: str | None) -> None:
            panel = self.panel
            if value is None and isinstance(panel, QuestionPanel) and not panel.ended:
                self.panel = QuestionPanel(asked)  # Tab / Esc: back to the editor, waiting
                self.paint_status()
                return
            self.panel = None
            self._decided = None
            if value is not None:
                self.run_worker(self._answer_question(asked, value), group="approvals")
            self._show_waiting()
            self._ask_next()
            self.paint_status()

        self._decided = answered
        self._show_waiting()
        self.paint_status()

    async def _answer_question(self, asked: ApprovalAsked, value: str) -> None:
        """Send the person's answer (``tasks.answer``: the first answer wins)."""
        daemon = offered(self.port, "tasks.answer")
        question_id = asked.action.get("question_id") if isinstance(asked.action, dict) else None
        if daemon is None or not isinstance(question_id, str):
            self.note("not connected: the question stays waiting")
            return
        try:
            await daemon.call("tasks.answer", {"questionId": question_id, "answer": value})
        except _refused() as exc:
            self.note(f"[yellow]could not answer the question:[/] {escape(str(exc))}")
            return
        self.note(f"answered the child's question: {escape(clip(value, 200))}")

    def _show_waiting(self) -> None:
        """The line above the editor: what waits and the key that opens its panel."""
        for line in self.query("#approval-waiting").results(Static):
            panel = self.panel
            line.display = panel is not None
            if isinstance(panel, QuestionPanel):
                line.update(question_line(panel.asked))
            elif panel is not None:
                asked = panel.asked
                line.update(
                    f"[b]approval waiting[/] · {escape(question(asked.tool, asked.action))} · "
                    "[b]Tab[/] to answer (what you type stays in the editor)"
                )

    def action_open_approval(self) -> None:
        """Tab: open the waiting approval's panel (the only way to answer it here)."""
        panel, decided = self.panel, self._decided
        if panel is not None and decided is not None and self.screen is self.screen_stack[0]:
            self.push_screen(panel, decided)

    def _close_panel(self) -> None:
        """The approval ended elsewhere: close its panel, open or not."""
        panel, decided = self.panel, self._decided
        if panel is None:
            return
        if isinstance(panel, QuestionPanel):
            panel.ended = True
        if panel in self.screen_stack:
            panel.dismiss(None)
        elif decided is not None:
            decided(None)

    def ask_again(self, pending: Iterable[PendingApproval]) -> None:
        """Put pending approvals (from a snapshot) back in front of the person."""
        known = {a.approval_id for a in self.to_ask}
        if self.panel is not None:
            known.add(self.panel.asked.approval_id)
        for p in pending:
            if p.approval_id not in known:
                self.to_ask.append(
                    ApprovalAsked(
                        session_key=self.session,
                        approval_id=p.approval_id,
                        run_id=p.run_id,
                        tool=p.tool,
                        action=p.action,
                        rationale=p.rationale,
                        expires_at_ms=p.expires_at_ms,
                    )
                )
        self._ask_next()

    async def _resolve(self, asked: ApprovalAsked, decision: ApprovalDecision) -> None:
        port = self.port
        if port is None:
            self.note("not connected: the approval stays pending")
            return
        try:
            result = await port.resolve_approval(asked.approval_id, decision)
        except _lost() as exc:
            self.note(f"[yellow]could not answer the approval:[/] {escape(str(exc))}")
            return
        if result.resolved:
            self.note(f"{escape(asked.tool)}: {_SAID.get(decision, decision.value)}")
        else:
            self.note("that approval is no longer pending")

    def _withdrawn(self, event: ApprovalEnded) -> None:
        for queued in list(self.to_ask):
            if queued.approval_id == event.approval_id:
                self.to_ask.remove(queued)
        panel = self.panel
        if isinstance(panel, QuestionPanel) and panel.asked.approval_id == event.approval_id:
            self.note("the child's question ended (answered elsewhere, or its time ran out)")
            self._close_panel()
        elif panel is not None and panel.asked.approval_id == event.approval_id:
            self.note(f"approval for {escape(panel.asked.tool)} ended: {event.decision.value}")
            self._close_panel()

    # -- input -------------------------------------------------------------------------------------

    @property
    def editor(self) -> Editor:
        return self.query_one("#input", Editor)

    async def on_editor_submitted(self, message: Editor.Submitted) -> None:
        editor = message.editor
        body = message.value.rstrip().lstrip("\n")  # a pasted block keeps its indentation
        text = body.strip()
        if not text:
            return
        if editor.matches and not is_command(text):
            # Enter on the start of a command ("/mo"): take the completion first; one that
            # needs an argument waits for it.
            editor.action_take_completion()
            text = editor.text
            if editor.matches[editor.chosen].arg:
                editor.value = text + " "
                return
        editor.sent(text if is_command(text) else body)
        self.idle_aborts = 0
        if is_command(text):
            await self.command(text)
            return
        mode = "collect"
        if text.startswith("!"):
            mode, body = "interrupt", text[1:].strip()
        elif text.startswith(">"):
            mode, body = "steer", text[1:].strip()
        if body:
            await self.send(body, mode)

    async def send(self, text: str, mode: str = "collect") -> None:
        """Submit ``text``. Nothing is kept to send later (seed 003: no offline mutation is
        replayed): while offline, or when the link drops during the send, the text goes back
        into the editor (unless something new was typed there) and a note says it was not
        sent; the person sends it again once the daemon is back."""
        if self.port is None or not await self._submit(text, mode):
            self._not_sent(text, mode)

    def _not_sent(self, text: str, mode: str) -> None:
        editor = self.editor
        if not editor.text.strip():
            editor.value = {"steer": ">", "interrupt": "!"}.get(mode, "") + text
        self.note(
            f"[yellow]not sent: {escape(self.where)} is offline[/]; the message is kept in the "
            "editor: press Enter to send it once the daemon is back (the status line says online)"
        )

    async def _submit(self, text: str, mode: str) -> bool:
        """True when the daemon answered (accepted or rejected); False when it is gone."""
        port = self.port
        if port is None:
            return False
        request = RunRequest(
            origin="tui",
            session_key=self.session,
            prompt=text,
            queue_mode=mode,  # type: ignore[arg-type]  # one of the three modes chosen above
            cwd=self.cwd,
            tool_policy=self.tool_policy,
            preapproved=self.preapproved,
            model=self.model,
        )
        try:
            receipt = await port.submit(request)
        except _lost():
            return False
        except ValueError as exc:
            self.note(f"[red]not sent:[/] {escape(str(exc))}")
            return True
        if receipt.status == "rejected":
            self.note(f"[red]not accepted:[/] {escape(receipt.reason or 'rejected')}")
            return True
        note = {"queued": "queued", "dispatched_to_active": "steering"}.get(receipt.status, "")
        if mode == "interrupt" and receipt.status != "started":
            note = "interrupting"
        block = UserEntry(text, note=note)
        self._add(block, follow=True)  # at the end; the running answer goes on in its own place
        if note:
            self.noted[receipt.run_id] = block
            while len(self.noted) > _REMEMBERED:
                del self.noted[next(iter(self.noted))]
        self.waiting_for.add(receipt.run_id)
        self.paint_status()
        return True

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The screen-opening keys belong to the main screen: over a panel or picker they
        are left to it (the history search has its own Ctrl+R). Tab is the approval's only
        while one waits and the editor shows no `/` completion; else it stays the editor's."""
        if action == "open_approval":
            on_main = self.screen is self.screen_stack[0]
            return self.panel is not None and on_main and not self.editor.matches
        return action not in _MAIN_SCREEN_ONLY or self.screen is self.screen_stack[0]

    def action_toggle_output(self) -> None:
        """Ctrl+T: unfold (or fold) the newest tool card that has more to show."""
        for card in reversed(self.transcript.entries):
            if isinstance(card, CardEntry) and card.foldable:
                card.toggle()
                if card.expanded:
                    self.transcript.reveal(card)
                return
        self.note("no tool output to unfold")

    def action_search_history(self) -> None:
        """Ctrl+R: search what was sent; the entry taken replaces the editor's text."""
        editor = self.editor

        def taken(entry: str | None) -> None:
            if entry is not None:
                editor.value = entry
            editor.focus()

        self.push_screen(HistorySearch(editor.sent_history, editor.text), taken)

    async def action_switch_session(self) -> None:
        """Ctrl+X: the session switcher (``sessions.list`` with the unread counts)."""
        try:
            await open_switcher(self)
        except _refused() as exc:
            self.note(f"[yellow]could not list the sessions:[/] {escape(str(exc))}")

    async def action_pick_model(self) -> None:
        """Ctrl+O: the model picker (``models.list``)."""
        try:
            await open_model_picker(self)
        except _refused() as exc:
            self.note(f"[yellow]could not list the models:[/] {escape(str(exc))}")

    async def set_model_or_say(self, ref: str | None) -> None:
        try:
            await set_model(self, ref)
        except _refused() as exc:
            self.note(f"[yellow]could not set the model:[/] {escape(str(exc))}")

    async def action_abort(self) -> None:
        """Ctrl+C: abort the running answer (what is queued stays); twice when idle quits."""
        if await self.abort_run():
            self.idle_aborts = 0
            return
        self.idle_aborts += 1
        if self.idle_aborts >= 2:
            self.exit(0)
            return
        self.note("nothing is running; Ctrl+C again to quit")

    async def abort_run(self, *, quiet_when_idle: bool = False) -> bool:
        """Abort the session's running answer (``/abort``, Ctrl+C); True when one was."""
        port = self.port
        if not self.waiting_for or port is None:
            if quiet_when_idle:
                self.note("nothing is running")
            return False
        try:
            result = await port.cancel(session_key=self.session, include_queued=False)
        except _lost() as exc:
            self.note(f"[yellow]could not abort:[/] {escape(str(exc))}")
            return True
        if result.cancelled:
            self.note("[yellow]aborting the run (Ctrl+C)…[/]")
            return True
        if quiet_when_idle:
            self.note("nothing was running")
        return False

    async def command(self, line: str) -> None:
        """Run a slash command; a daemon that refuses or is gone is said in one line."""
        try:
            await run_command(self, line)
        except ValueError as exc:
            self.note(f"[red]{escape(line.split(' ', 1)[0])}:[/] {escape(str(exc))}")
        except _lost() as exc:
            self.note(f"[yellow]{escape(line.split(' ', 1)[0])} failed:[/] {escape(str(exc))}")

    def settle_memory(self) -> None:
        """After a run ends (or a history is shown): collect what is garbage now, then freeze
        what is left (``gc.freeze``), so later collections do not walk a long transcript's
        settled widgets again; that walk was the worst scroll stall (bench/tui_bench.py).
        Only the young objects since the last freeze are walked here. A session switch
        unfreezes first, so the widgets it removes can be collected, and so does every
        ``_FULL_COLLECTION_EVERY``-th call (what was frozen and became garbage since)."""
        self._settled += 1
        if self._settled % _FULL_COLLECTION_EVERY == 0:
            gc.unfreeze()
        gc.collect()
        gc.freeze()

    def switch(self, session: str) -> None:
        """Follow ``session`` instead: the transcript shows its history from a snapshot; the
        one left is listed with the background sessions (their unread events are counted)."""
        left = self.session
        if left != session:
            self.background[left] = self.background.pop(left, 0)
            while len(self.background) > _BACKGROUND:
                del self.background[next(iter(self.background))]
        self.background.pop(session, None)
        self.session = session
        self.model = None  # the next session's own model (or the default) applies
        self.status.model = None
        self.run_worker(self._learn_session(), group="models", exit_on_error=False)
        self.waiting_for.clear()
        self.answer = None
        self.tail, self.tail_run = None, None
        self.noted.clear()
        self.cards.clear()
        self.tasks.clear()
        self.task_cards.clear()
        self.recovered_seq.clear()
        self.sealed_chars.clear()
        self.to_ask.clear()
        gc.unfreeze()  # the removed widgets may be collected (see settle_memory)
        self.transcript.clear()
        self.note(f"session {escape(session)}")
        self._switched = True
        if self._stream is not None:
            self._stream.close()
        self.paint_status()
