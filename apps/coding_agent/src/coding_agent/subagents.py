"""Subagents: a run delegates to child runs, each a node of the durable run graph.

A child is submitted like any other client's run, through the session port
(:data:`~lemon_core.sessions.SESSION_PORT`), into its own session
``<parent session>:sub:<task_id>`` with its lineage on the request (``parent_run_id``,
``root_run_id``, ``depth``): the router binds it into the child's execution context and the
gateway runs it natively in-process on the ``subagent`` lane. The agent definition the child
runs as (``general``, ``explore``) is task-only provenance on its graph node; it never selects
the executor (seed 002).

What this guarantees:

* every child, sync or async, at any depth, is a :class:`~lemon_core.store.TaskNode` written
  before it is submitted, and ends in exactly one terminal status;
* the bounds of ``[subagents]`` hold: depth (a run at the cap is not offered ``task``, and a
  request past it is refused), children per run, concurrent children per depth level (the
  others wait ``queued``; one pool per level, so parents waiting for children never hold the
  slots their children need; children take no gateway slot, so they never starve the
  person's top-level runs), a deadline for every child (however busy its stream, it is
  cancelled at the deadline and its parent gets ``timeout``, partial output flagged), and a
  token budget per
  top-level run (once spent the tree's running children stop: ``budget_exceeded``);
* a child's authority is its parent's policy narrowed by the call's ``tools`` and the
  definition's (never widened: a tool the parent lacks is absent in the child);
* cancelling the parent's call cancels the child; a parent run that ends cancels its async
  children unless they were started ``detached``;
* after a restart every task that was not terminal is ``unknown`` (never re-run, never shown
  running): :meth:`Subagents.recover`.

Events (seed 003, untyped on purpose): ``task_started`` / ``task_completed`` / ``task_error``
/ ``task_timeout`` / ``task_aborted`` and ``run_graph_changed`` on the child's and the
parent's run topics (``run:<run_id>``).

Budget: every model call of every descendant is charged as it ends (:meth:`Subagents.charge`,
from the child run's :class:`BudgetedProvider`, in the agent loop's own path), so a child
looping on tool calls is stopped mid-run, its next model call refused, together with the rest
of its tree (each stopped task ``failed`` with a reason starting ``budget_exceeded``).

Parent questions (``ask_parent``, :mod:`coding_agent._parent_questions`): the child's question
is persisted and published; the task turns ``waiting_for_parent``; a parent blocked on the
child (a sync ``task``, ``join``, ``agent wait``) gets it as its call's result at once, an
idle parent run gets it as a steered message, and a top-level parent also relays it to the
person through the parent's approval path (approve: yes / the first option; deny: no / the
second). The first answer wins; none by the question's deadline (never past the child's
own) ends the child's call as an error.

A child's approval requests are relayed to its parent's session (``approval_requested`` /
``approval_resolved`` on ``session:<parent session>``), sync or async, so the person sees
them where they are; a child's approval waits at most until the child's deadline.

``output_schema``: a completed child's answer must be JSON matching the schema; one
correction run in the child's session, then the task fails (``output_schema``).

An async child that ends while nobody waits for it (no ``join`` or ``agent wait`` pending)
is announced to its parent's running answer by a steer (the child's notice, not the
person's message).

Agent definitions (:mod:`coding_agent.agent_definitions`): built-ins, the home's and approved
project Markdown files; a definition's ``model`` is the child's model and its ``max_turns``
travels as ``meta["max_turns"]`` (the child's executor takes the lower of it and its own).

Dollars: each model call is priced from the model's prices and charged like tokens, to the
tree (``max_usd_per_tree``) and to every task above the caller with its own ``budget_usd``
(that task's subtree stops, ``budget_exceeded``). ``task_progress`` carries a running task's
turns, tokens, dollars and last action after each of its model and tool calls.

A ``detached`` child that ends after its parent's run (and a task a restart left ``unknown``)
leaves a durable notice for the parent's session (``task_notice``, then put before the
session's next prompt once: :meth:`Subagents.take_notices`).

Resuming: ``resume`` names an ended task of the caller's session; a new task continues that
child's session (its transcript goes on with the new prompt), as the same agent, with the
caller's authority and every bound again (children per run, deadline, turns, budget, loop
detection). It is only ever asked for explicitly with a new prompt: a task a restart left
``unknown`` is never re-run on its own (claude-code #73601: a resumed child looping for 10M
tokens), but the parent may continue it this way.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import uuid
from collections import Counter
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import msgspec

from coding_agent._output_schema import check_schema, parse_answer, validate
from coding_agent._parent_questions import ParentQuestion, ParentQuestionStore
from coding_agent._subagents_section import SubagentsConfig
from coding_agent.agent_definitions import AGENT_DEFINITIONS, AgentDefinition
from lemon_agent import ToolError
from lemon_ai import (
    AssistantMessage,
    BadRequestError,
    Context,
    DoneEvent,
    ErrorEvent,
    Model,
    Provider,
    StreamEvent,
    StreamOptions,
    ToolCall,
)
from lemon_core import ExecApprovals
from lemon_core.approvals import ApprovalError
from lemon_core.bus import Bus, run_topic, session_topic
from lemon_core.clock import SYSTEM_CLOCK, Clock
from lemon_core.events import (
    ApprovalDecision,
    ApprovalPending,
    ApprovalRequested,
    ApprovalResolved,
    RunUsage,
)
from lemon_core.execution import EditorHandle, RunRequest, ToolPolicy
from lemon_core.sessions import (
    ApprovalAsked,
    ApprovalEnded,
    RunEnded,
    SessionPort,
    SessionStream,
    StreamOverflow,
    TextDelta,
    ToolCard,
)
from lemon_core.store import IllegalTaskTransitionError, RunGraphStore, Store, TaskNode
from lemon_core.tasks import Supervisor

__all__ = [
    "AGENT_DEFINITIONS",
    "AgentDefinition",
    "BudgetedProvider",
    "ParentQuestion",
    "ParentRun",
    "Subagents",
    "SubagentsStatistics",
    "TaskRequest",
    "child_session_key",
]

_MAX_PARTIAL_CHARS: Final = 64_000
_PREVIEW_CHARS: Final = 500  # of a finished task's answer, on its events
_CANCEL_GRACE_S: Final = 10.0
_ORIGIN: Final = "subagent"
_NOTICES: Final = "task_notices"  # table: "<parent session>\x1f<ms>\x1f<task id>" -> notice
_NOTICE_CHARS: Final = 4000  # of the child's answer, in the notice
_NOTICES_PER_RUN: Final = 16  # notices one run takes in (the oldest first; the rest wait)
_NOTICE_SCAN: Final = 256  # notices of a session looked through to withdraw a delivered one


class SubagentsStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """Children alive now (``queued`` of them waiting for a slot), runs that started children
    and are still tracked, and top-level trees whose spend is tracked."""

    live: int
    queued: int
    parents: int
    trees: int


@dataclass(frozen=True, kw_only=True, slots=True)
class ParentRun:
    """The run that delegates: its identity, lineage and authority."""

    run_id: str
    session_key: str
    root_run_id: str
    depth: int
    policy: ToolPolicy
    """The parent's effective tool policy (a child's is never wider)."""
    cwd: str
    agent_id: str = "default"
    preapproved: frozenset[str] = frozenset()
    model: str | None = None
    context_window: int = 128_000
    definitions: Mapping[str, AgentDefinition] = field(default_factory=lambda: AGENT_DEFINITIONS)
    """The agent definitions this run's children may run as
    (:func:`~coding_agent.agent_definitions.load_agent_definitions`)."""
    editor: EditorHandle | None = None
    """The parent's editor (an ACP client's file system and terminal): its children's runs
    get it too, so their reads see the editor's buffers and their commands run in its
    terminals (the editor knows only the parent's session: its calls name that one)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskRequest:
    """What the model asked for through ``task``."""

    prompt: str
    description: str = ""
    agent: str = "general"
    tools: tuple[str, ...] | None = None
    timeout_s: float | None = None
    mode: Literal["sync", "async"] = "sync"
    detached: bool = False
    output_schema: Mapping[str, Any] | None = None
    """A JSON Schema (subset, :mod:`coding_agent._output_schema`) the answer must match."""
    budget_usd: float | None = None
    """The dollars this child (with its own children) may spend; never more than what is
    left of its tree's ``max_usd_per_tree``."""
    resume: str | None = None
    """The id of an ended task of this session whose child to continue: a new task in that
    child's session (its transcript goes on with ``prompt``), as the same agent, with this
    run's authority and every bound again. Only ever asked for explicitly."""


@dataclass(kw_only=True, slots=True)
class _Live:
    node: TaskNode
    parent: ParentRun
    done: asyncio.Future[TaskNode]
    task: asyncio.Task[None] | None = None
    submitted: bool = False
    stop: tuple[str, str] | None = None  # (status, reason) asked for by cancel/budget
    partial: list[str] = field(default_factory=list)
    partial_chars: int = 0
    last_action: str | None = None
    notify: Callable[[str], Awaitable[None]] | None = None  # the parent's pending call
    deadline: float | None = None  # loop time the child is stopped at
    question: ParentQuestion | None = None  # the child's pending question to its parent
    # Set when a question is asked and not yet delivered to a blocked parent call.
    asked: asyncio.Event = field(default_factory=asyncio.Event)
    watchers: int = 0  # parent calls blocked on this task now (sync task, join, wait)
    charged: int = 0  # tokens charged per model call so far
    charged_usd: float = 0.0  # dollars charged per model call so far (this task's own run)
    subtree_usd: float = 0.0  # the same with its descendants' calls
    turns: int = 0  # model calls of this task's own run so far
    budget_usd: float | None = None  # this task's own dollar budget (``budget_usd``)
    relayed: set[str] = field(default_factory=set)  # approval ids relayed to the parent
    calls: Counter[str] = field(default_factory=Counter)  # tool call (name + args) -> asked
    parent_gone: bool = False  # the run that started it ended (a detached child outlives it)
    resumed_from: str | None = None  # the ended task whose child session this one continues


def child_session_key(parent_session_key: str, task_id: str) -> str:
    """``<parent session>:sub:<task_id>``: a grandchild's session hangs off the root session
    (a canonical key carries one ``sub``); the graph holds who is whose parent."""
    base, sep, _sub = parent_session_key.partition(":sub:")
    return f"{base if sep else parent_session_key}:sub:{task_id}"


def _stop_of(live: _Live) -> tuple[str, str] | None:
    """``live.stop`` read afresh (another task may set it while the driver awaits)."""
    return live.stop


def _now_ms(clock: Clock) -> int:
    return clock.now_ms()


class Subagents:
    """Delegation for every run of one daemon (see the module docstring). Loop-only.

    ``port`` returns the session port (the router registers it after this app starts, so it
    is looked up per call); ``None``: delegation is unavailable and ``task`` says so.
    """

    def __init__(
        self,
        *,
        store: Store,
        port: Callable[[], SessionPort | None],
        config: SubagentsConfig | None = None,
        bus: Bus | None = None,
        clock: Clock = SYSTEM_CLOCK,
        approvals: ExecApprovals | None = None,
    ) -> None:
        self.config = config or SubagentsConfig()
        self.graph = RunGraphStore(store)
        self._store = store
        self.questions = ParentQuestionStore(store, bus)
        self._approvals = approvals
        self._port = port
        self._bus = bus
        self._clock = clock
        # One pool per depth: a child waiting for its own child never holds the slot the
        # grandchild needs (the deepest level waits on nobody), so a full pool cannot deadlock.
        self._slots = {
            depth: asyncio.Semaphore(self.config.max_concurrent)
            for depth in range(1, self.config.max_depth + 1)
        }
        self._supervisor = Supervisor("subagents")
        self._live: dict[str, _Live] = {}
        self._started: Counter[str] = Counter()  # parent run -> tasks started
        self._spent: Counter[str] = Counter()  # root run -> tokens its children used
        self._spent_usd: dict[str, float] = {}  # root run -> dollars its children used
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------

    async def recover(self) -> list[TaskNode]:
        """Mark every task a previous process left non-terminal ``unknown`` (at boot)."""
        marked = await self.graph.recover(
            now_ms=_now_ms(self._clock),
            reason="the daemon stopped while the task ran: its outcome is unknown",
        )
        for node in marked:
            self._publish(node, "task_error")
            self._publish(node, "run_graph_changed")
            # Never lost silently: the parent's session is told at its next run.
            await self._store_notice(node)
        return marked

    async def close(self) -> None:
        """Stop every live child (``cancelled``) and wait for their drivers."""
        self._closed = True
        for live in list(self._live.values()):
            await self._request_stop(live, "cancelled", "the daemon is stopping")
        await self._supervisor.close(grace_s=_CANCEL_GRACE_S)

    def statistics(self) -> SubagentsStatistics:
        return SubagentsStatistics(
            live=len(self._live),
            queued=sum(1 for live in self._live.values() if live.node.status == "queued"),
            parents=len(self._started),
            trees=len(self._spent),
        )

    # -- what a run may do -----------------------------------------------------------------

    def offers_task(self, depth: int) -> bool:
        """Whether a run at ``depth`` is offered the ``task`` tool."""
        return depth < self.config.max_depth

    def child_policy(self, parent: ParentRun, request: TaskRequest) -> ToolPolicy:
        """The parent's policy narrowed by the definition's tools and the call's ``tools``;
        a name the parent does not have is refused (fail closed, never widened)."""
        definition = parent.definitions.get(request.agent)
        if definition is None:
            raise ToolError(
                f"unknown agent definition {request.agent!r}; known: "
                f"{', '.join(sorted(parent.definitions))}"
            )
        policy = parent.policy
        if definition.tools is not None:
            policy = policy.intersect(ToolPolicy(allow=definition.tools))
        if request.tools is not None:
            missing = sorted(t for t in request.tools if not parent.policy.permits(t))
            if missing:
                raise ToolError(
                    f"tools {missing} are not available to this run, so a child cannot have "
                    "them; name tools this run may use"
                )
            policy = policy.intersect(ToolPolicy(allow=frozenset(request.tools)))
        return policy

    # -- starting --------------------------------------------------------------------------

    async def start(self, parent: ParentRun, request: TaskRequest) -> TaskNode:
        """Check the bounds, write the node (``queued``) and start the child; returns the node.

        Raises :class:`~lemon_agent.ToolError` (the model sees why) when a bound refuses it.
        """
        cfg = self.config
        if self._closed:
            raise ToolError("delegation is stopping with the daemon; do the work yourself")
        if not request.prompt.strip():
            raise ToolError("task: 'prompt' is empty; say what the child should do")
        resumed = await self._resumable(parent, request.resume) if request.resume else None
        if resumed is not None:  # the child goes on as the agent it was
            request = dataclasses.replace(request, agent=resumed.agent)
        if parent.depth + 1 > cfg.max_depth:
            raise ToolError(
                f"task refused: this run is at depth {parent.depth} and children may go at "
                f"most {cfg.max_depth} deep ([subagents] max_depth); do the work yourself"
            )
        if self._started[parent.run_id] >= cfg.max_children_per_run:
            raise ToolError(
                f"task refused: this run already started {self._started[parent.run_id]} "
                f"children, the most one run may start ([subagents] max_children_per_run = "
                f"{cfg.max_children_per_run}); wait for them and use their answers"
            )
        if self._spent[parent.root_run_id] >= cfg.max_tokens_per_tree:
            raise ToolError(
                "task refused: budget_exceeded: the children of this conversation turn spent "
                f"{self._spent[parent.root_run_id]} tokens of the "
                f"{cfg.max_tokens_per_tree} allowed ([subagents] max_tokens_per_tree)"
            )
        spent_usd = self._spent_usd.get(parent.root_run_id, 0.0)
        if spent_usd >= cfg.max_usd_per_tree:
            raise ToolError(
                "task refused: budget_exceeded: the children of this conversation turn spent "
                f"${spent_usd:.6g} of the ${cfg.max_usd_per_tree:.6g} allowed "
                "([subagents] max_usd_per_tree)"
            )
        budget_usd: Any = request.budget_usd  # from the model's arguments: checked here
        if budget_usd is not None and (
            isinstance(budget_usd, bool)
            or not isinstance(budget_usd, int | float)
            or not budget_usd > 0
        ):
            raise ToolError(f"task: budget_usd must be > 0 dollars, got {budget_usd!r}")
        inherited = self._budget_of_run(parent.run_id)  # a child's child stays in its budget
        if inherited is not None:
            budget_usd = inherited if budget_usd is None else min(float(budget_usd), inherited)
        timeout = request.timeout_s if request.timeout_s is not None else cfg.timeout_s
        if not timeout > 0:
            raise ToolError(f"task: timeout_s must be > 0 seconds, got {request.timeout_s!r}")
        timeout = min(timeout, cfg.max_timeout_s)
        if request.output_schema is not None:
            try:
                check_schema(request.output_schema)
            except ValueError as exc:
                raise ToolError(f"task: output_schema: {exc}") from None
        policy = self.child_policy(parent, request)
        port = self._port()
        if port is None:
            raise ToolError("task: delegation is unavailable (no session port in this daemon)")
        self._started[parent.run_id] += 1
        task_id = f"task_{uuid.uuid4().hex[:16]}"
        description = request.description
        if resumed is not None:
            description = f"continues {resumed.task_id}: {description or resumed.description}"
        node = TaskNode(
            task_id=task_id,
            parent_run_id=parent.run_id,
            parent_session_key=parent.session_key,
            child_run_id=f"run_{uuid.uuid4()}",
            session_key=(
                resumed.session_key
                if resumed is not None
                else child_session_key(parent.session_key, task_id)
            ),
            root_run_id=parent.root_run_id,
            depth=parent.depth + 1,
            agent=request.agent,
            description=description[:200],
            mode=request.mode,
            detached=request.detached,
            status="queued",
            created_at_ms=_now_ms(self._clock),
        )
        await self.graph.put(node)
        self._publish(node, "run_graph_changed")
        loop = asyncio.get_running_loop()
        live = _Live(
            node=node, parent=parent, done=loop.create_future(),
            budget_usd=float(budget_usd) if budget_usd is not None else None,
            resumed_from=resumed.task_id if resumed is not None else None,
        )  # fmt: skip
        self._live[task_id] = live
        live.task = self._supervisor.spawn(
            self._drive(live, port, request, policy, timeout), name=f"task {task_id}"
        )
        return node

    async def _resumable(self, parent: ParentRun, task_id: str) -> TaskNode:
        """The ended task of ``parent``'s session that ``resume`` names (refused otherwise)."""
        node = await self.get(parent, task_id)
        if not node.terminal:
            raise ToolError(
                f"task {task_id} is still {node.status}: send it a message with agent "
                "action=followup, or wait for it"
            )
        for live in self._live.values():
            if live.node.session_key == node.session_key:
                raise ToolError(
                    f"task {task_id}'s child is already being continued by task "
                    f"{live.node.task_id}; wait for that one"
                )
        return node

    # -- waiting, reading, cancelling ------------------------------------------------------

    async def children(self, parent: ParentRun) -> list[TaskNode]:
        """The tasks ``parent`` started, oldest first."""
        return await self.graph.children(parent.run_id)

    async def get(self, parent: ParentRun, task_id: str) -> TaskNode:
        """The task as the graph knows it; a task of another session is not found."""
        node = await self.graph.get(task_id)
        if node is None or node.parent_session_key != parent.session_key:
            raise ToolError(f"task {task_id!r} not found in this session")
        return node

    async def wait(
        self,
        parent: ParentRun,
        task_ids: Iterable[str],
        *,
        mode: Literal["wait_all", "wait_any"] = "wait_all",
        timeout_s: float | None = None,
    ) -> list[TaskNode]:
        """Wait for the tasks (all, or the first to end) at most ``timeout_s``; returns their
        nodes as they stand then (a task still running is returned running). Each ended task
        is read from the graph, so one that ended before the call is returned at once."""
        ids = list(dict.fromkeys(task_ids))
        if not ids:
            raise ToolError("task: name the task_ids to wait for")
        nodes = [await self.get(parent, task_id) for task_id in ids]
        lives = [self._live[n.task_id] for n in nodes if not n.terminal and n.task_id in self._live]
        if mode == "wait_any" and any(n.terminal for n in nodes):
            lives = []  # one has already ended: wait_any returns at once
        if lives:
            await self._wait_lives(lives, mode=mode, timeout_s=timeout_s)
        nodes = [await self.get(parent, task_id) for task_id in ids]
        # A detached child's result given here is given: its notice (for the session's next
        # run) would hand the same result over a second time.
        ended = {n.task_id for n in nodes if n.terminal and n.detached}
        if ended:
            await self._withdraw_notices(parent.session_key, ended)
        return nodes

    async def _wait_lives(self, lives: list[_Live], *, mode: str, timeout_s: float | None) -> None:
        """Until the tasks end (all or any) or one of them asks its parent a question (the
        parent must answer before it can go on: waiting longer would deadlock)."""
        pending: set[asyncio.Future[Any]] = {live.done for live in lives}
        asks = {asyncio.ensure_future(live.asked.wait()) for live in lives}
        for live in lives:
            live.watchers += 1
        try:
            async with asyncio.timeout(timeout_s):
                while pending:
                    finished, _ = await asyncio.wait(
                        [*pending, *asks], return_when=asyncio.FIRST_COMPLETED
                    )
                    if finished & asks:
                        for live in lives:  # delivered: a later wait waits for the end
                            live.asked.clear()
                        return
                    pending -= finished
                    if mode == "wait_any":
                        return
        except TimeoutError:
            return
        finally:
            for ask in asks:
                ask.cancel()
            for live in lives:
                live.watchers -= 1

    async def cancel(self, parent: ParentRun, task_id: str) -> TaskNode:
        node = await self.get(parent, task_id)
        live = self._live.get(task_id)
        if live is None or node.terminal:
            return node
        await self._request_stop(live, "cancelled", "cancelled by the parent")
        return await live.done

    async def cancel_task(self, task_id: str, reason: str) -> TaskNode | None:
        """Cancel a task by its id alone (an operator's ``tasks.cancel``); returns its node
        once its end is recorded (as it stands when it had already ended), None when the
        graph has no such task."""
        node = await self.graph.get(task_id)
        live = self._live.get(task_id)
        if node is None or live is None or node.terminal:
            return node
        await self._request_stop(live, "cancelled", reason)
        return await asyncio.shield(live.done)

    async def followup(self, parent: ParentRun, task_id: str, text: str) -> str:
        """Send ``text`` to a still-running child (offered to its running answer through the
        session port's steer); returns what became of it, in words."""
        node = await self.get(parent, task_id)
        if node.terminal:
            raise ToolError(f"task {task_id} already ended ({node.status}); start a new one")
        if not text.strip():
            raise ToolError("agent action=followup needs a non-empty 'message'")
        port = self._port()
        if port is None:
            raise ToolError("delegation is unavailable (no session port in this daemon)")
        result = await port.steer(node.session_key, text)
        if result.status == "refused":
            raise ToolError(f"task {task_id} did not take the message: {result.reason}")
        return f"task {task_id}: message {result.status}"

    async def parent_ended(self, run_id: str) -> None:
        """The run ``run_id`` ended: its children still running stop (``cancelled``) unless
        they were started ``detached``."""
        for live in list(self._live.values()):
            if live.node.parent_run_id != run_id:
                continue
            if live.node.detached:
                live.parent_gone = True  # its end is told to the session as a notice
            else:
                await self._request_stop(live, "cancelled", "the parent run ended")
        self._started.pop(run_id, None)
        if not any(live.node.root_run_id == run_id for live in self._live.values()):
            self._spent.pop(run_id, None)  # a top-level run's tree is done: forget its spend
            self._spent_usd.pop(run_id, None)

    async def run(
        self,
        parent: ParentRun,
        request: TaskRequest,
        *,
        abort: Callable[[], Awaitable[object]] | None = None,
        notify: Callable[[str], Awaitable[None]] | None = None,
    ) -> TaskNode:
        """A sync task: start it and wait for its end. When ``abort`` (the parent's abort
        signal, awaited) fires or the caller is cancelled, the child is cancelled first: this
        returns (``cancelled``) only once the child's end is recorded. ``notify`` gets the
        child's approval questions (the parent's pending call shows them as its progress, on
        the parent's surface, with the approval id to decide them by)."""
        node = await self.start(parent, request)
        live = self._live[node.task_id]
        live.notify = notify
        live.watchers += 1
        asked = asyncio.ensure_future(live.asked.wait())
        aborted: asyncio.Future[Any] | None = (
            asyncio.ensure_future(abort()) if abort is not None else None
        )
        try:
            waits: list[asyncio.Future[Any]] = [live.done, asked]
            if aborted is not None:
                waits.append(aborted)
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if live.done.done():
                return live.done.result()
            if aborted is not None and aborted.done():
                await self._request_stop(live, "cancelled", "the parent run was cancelled")
                return await asyncio.shield(live.done)
            live.asked.clear()  # delivered: a later wait waits for the end
            return live.node  # waiting_for_parent: the question is this call's result
        except asyncio.CancelledError:
            await self._request_stop(live, "cancelled", "the parent's call was cancelled")
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(live.done)
            raise
        finally:
            live.watchers -= 1
            asked.cancel()
            if aborted is not None:
                aborted.cancel()

    def live_action(self, task_id: str) -> str | None:
        live = self._live.get(task_id)
        return None if live is None else live.last_action

    def pending_question(self, task_id: str) -> ParentQuestion | None:
        """The question task ``task_id`` is waiting on its parent for, if any."""
        live = self._live.get(task_id)
        return None if live is None else live.question

    def time_left(self, run_id: str) -> float | None:
        """Seconds before the child run ``run_id`` reaches its deadline (None: not a child)."""
        live = self._by_run(run_id)
        if live is None or live.deadline is None:
            return None
        return max(0.0, live.deadline - asyncio.get_running_loop().time())

    def _by_run(self, run_id: str) -> _Live | None:
        for live in self._live.values():
            if live.node.child_run_id == run_id:
                return live
        return None

    # -- the budget ------------------------------------------------------------------------

    def charge(
        self, run_id: str, tokens: int, *, cost_usd: float = 0.0, final: bool = False
    ) -> str | None:
        """One model call of the child run ``run_id`` used ``tokens`` costing ``cost_usd``:
        count it against its task (and the tasks above it) and its tree, and publish the
        task's live usage (``task_progress``). Returns the reason when a budget is spent: the
        tree's (every other task of the tree is stopped) or a task's own ``budget_usd`` (that
        task's subtree stops); the calling run stops itself before its next model call (its
        task ends ``failed`` with that reason) unless this call was its ``final`` answer.
        None: go on (or ``run_id`` is not a child)."""
        live = self._by_run(run_id)
        if live is None:
            return None
        tokens = max(0, tokens)
        cost_usd = max(0.0, cost_usd)
        live.turns += 1
        live.charged += tokens
        live.charged_usd += cost_usd
        for up in self._ancestors(live):
            up.subtree_usd += cost_usd
        root = live.node.root_run_id
        self._spent[root] += tokens
        self._spent_usd[root] = self._spent_usd.get(root, 0.0) + cost_usd
        self._publish_progress(live)
        tree = self._check_budget(root, caller=live, final=final)
        if tree is not None:
            return tree
        return self._check_task_budgets(live, final=final)

    def _ancestors(self, live: _Live) -> list[_Live]:
        """``live`` and the live tasks above it (its parent's task, ...), nearest first."""
        chain = [live]
        while (up := self._by_run(chain[-1].node.parent_run_id)) is not None and up not in chain:
            chain.append(up)
        return chain

    def _budget_of_run(self, run_id: str) -> float | None:
        """The dollars left to the task whose child run is ``run_id`` and the tasks above it
        with a ``budget_usd`` (None: none has one, or ``run_id`` is not a child)."""
        live = self._by_run(run_id)
        if live is None:
            return None
        left = [
            up.budget_usd - up.subtree_usd
            for up in self._ancestors(live)
            if up.budget_usd is not None
        ]
        return max(0.0, min(left)) if left else None

    def _check_task_budgets(self, caller: _Live, *, final: bool) -> str | None:
        """A task whose own ``budget_usd`` is spent (its run's calls and its descendants')
        stops with its whole subtree; returns the reason (the caller stops itself before its
        next model call unless this was its ``final`` answer)."""
        for up in reversed(self._ancestors(caller)):  # the widest subtree first
            budget = up.budget_usd
            if budget is None or up.subtree_usd < budget:
                continue
            reason = (
                f"budget_exceeded: task {up.node.task_id} spent ${up.subtree_usd:.6g} of its "
                f"${budget:.6g} budget (budget_usd)"
            )
            for other in [up, *self._descendants(up)]:
                if other.done.done() or other.stop:
                    continue
                if other is caller:
                    if not final:
                        other.stop = ("failed", reason)
                else:
                    self._supervisor.spawn(
                        self._request_stop(other, "failed", reason),
                        name=f"budget stop {other.node.task_id}",
                    )
            return reason
        return None

    def _descendants(self, live: _Live) -> list[_Live]:
        """The live tasks below ``live`` (its child run's children, theirs...)."""
        found: list[_Live] = []
        frontier = [live.node.child_run_id]
        while frontier:
            run_id = frontier.pop()
            for other in self._live.values():
                if other.node.parent_run_id == run_id and other not in found:
                    found.append(other)
                    frontier.append(other.node.child_run_id)
        return found

    def refusal(self, run_id: str) -> str | None:
        """Why the child run ``run_id`` may make no further model call (its tree's budget is
        spent, it loops, it is being stopped), or None (go on; also when it is not a child)."""
        live = self._by_run(run_id)
        if live is None:
            return None
        if live.stop is None:
            reason = self._tree_spent(live.node.root_run_id)
            if reason is None:
                left = self._budget_of_run(run_id)
                if left is not None and left <= 0:
                    reason = f"budget_exceeded: task {live.node.task_id}'s budget_usd is spent"
            if reason is not None:
                live.stop = ("failed", reason)
        return None if live.stop is None else live.stop[1]

    def _tree_spent(self, root_run_id: str) -> str | None:
        """Why the tree of ``root_run_id`` may spend no more (tokens or dollars), or None."""
        cfg = self.config
        spent = self._spent[root_run_id]
        if spent >= cfg.max_tokens_per_tree:
            return _budget_reason(spent, cfg.max_tokens_per_tree)
        spent_usd = self._spent_usd.get(root_run_id, 0.0)
        if spent_usd >= cfg.max_usd_per_tree:
            return (
                f"budget_exceeded: the tree spent ${spent_usd:.6g} of the "
                f"${cfg.max_usd_per_tree:.6g} allowed ([subagents] max_usd_per_tree)"
            )
        return None

    def note_calls(self, run_id: str, calls: Iterable[tuple[str, str]]) -> str | None:
        """The child run ``run_id`` asked for these tool calls (name, canonical arguments):
        the same call asked ``max_repeated_calls`` times stops it before its next model call
        (``loop``); returns that reason, or None."""
        live = self._by_run(run_id)
        if live is None:
            return None
        limit = self.config.max_repeated_calls
        for name, arguments in calls:
            key = f"{name}\x1f{arguments}"
            live.calls[key] += 1
            if live.calls[key] >= limit and live.stop is None:
                live.stop = (
                    "failed",
                    f"loop: {name} was called {live.calls[key]} times with the same arguments "
                    f"([subagents] max_repeated_calls = {limit})",
                )
        return None if live.stop is None else live.stop[1]

    def _check_budget(
        self, root_run_id: str, *, caller: _Live | None = None, final: bool = False
    ) -> str | None:
        reason = self._tree_spent(root_run_id)
        if reason is None:
            return None
        for other in list(self._live.values()):
            if other.node.root_run_id != root_run_id or other.done.done() or other.stop:
                continue
            if other is caller:
                if not final:
                    other.stop = ("failed", reason)  # it stops itself (never its own cancel)
            else:
                self._supervisor.spawn(
                    self._request_stop(other, "failed", reason),
                    name=f"budget stop {other.node.task_id}",
                )
        return reason

    # -- parent questions ------------------------------------------------------------------

    async def ask_parent(
        self,
        run_id: str,
        question: str,
        *,
        options: tuple[str, ...] = (),
        timeout_s: float | None = None,
    ) -> ParentQuestion:
        """The child run ``run_id`` asks its parent; returns the question ended: ``answered``
        (with the answer), ``timeout`` (no answer by its deadline, never past the child's) or
        ``cancelled``. Raises :class:`~lemon_agent.ToolError` when it cannot be asked."""
        live = self._by_run(run_id)
        if live is None or live.done.done():
            raise ToolError("ask_parent: this run is not a running child task; no parent to ask")
        if not question.strip():
            raise ToolError("ask_parent: 'question' is empty; say what you need to know")
        if live.question is not None:
            raise ToolError("ask_parent: a question to the parent is already waiting")
        wait = timeout_s if timeout_s is not None else self.config.question_timeout_s
        if not wait > 0:
            raise ToolError(f"ask_parent: timeout_s must be > 0 seconds, got {timeout_s!r}")
        left = self.time_left(run_id)
        if left is not None:
            wait = min(wait, left)
        if wait <= 0:
            raise ToolError("ask_parent: no time is left before this task's deadline; decide")
        now = _now_ms(self._clock)
        node = live.node
        asked = await self.questions.ask(
            ParentQuestion(
                question_id=f"pq_{uuid.uuid4().hex[:16]}",
                task_id=node.task_id,
                child_run_id=node.child_run_id,
                parent_run_id=node.parent_run_id,
                parent_session_key=node.parent_session_key,
                session_key=node.session_key,
                question=question[:4000],
                options=tuple(str(o)[:200] for o in options)[:10],
                created_at_ms=now,
                deadline_ms=now + int(wait * 1000),
            )
        )
        live.question = asked
        await self._set_status(live, "waiting_for_parent")
        idle = live.watchers == 0  # no call of the parent is blocked on this child
        if not idle:
            live.asked.set()  # wakes the parent's call blocked on this child
        relay = self._supervisor.spawn(
            self._relay_question(live, asked, wait, idle=idle),
            name=f"question {asked.question_id}",
        )
        try:
            final = await self.questions.wait(asked.question_id, wait)
            if final is None:
                final, _won = await self.questions.resolve(
                    asked.question_id, "timeout", now_ms=_now_ms(self._clock)
                )
        except asyncio.CancelledError:
            await asyncio.shield(
                self.questions.resolve(asked.question_id, "cancelled", now_ms=_now_ms(self._clock))
            )
            raise
        finally:
            relay.cancel()
            live.question = None
            live.asked.clear()
            if live.node.status == "waiting_for_parent" and not live.done.done():
                with contextlib.suppress(IllegalTaskTransitionError):  # it ended meanwhile
                    await asyncio.shield(self._set_status(live, "running"))
        return final

    async def answer(
        self, parent: ParentRun, question_id: str, text: str, *, by: str = "parent"
    ) -> ParentQuestion:
        """Answer a pending question of one of ``parent``'s session's tasks (first answer
        wins; a question of another session is not found). An empty ``question_id`` names
        the one question ``parent``'s tasks are waiting on (refused when there are several)."""
        if not question_id:
            waiting = [
                live.question.question_id
                for live in self._live.values()
                if live.question is not None and live.node.parent_run_id == parent.run_id
            ]
            if len(waiting) != 1:
                raise ToolError(
                    f"agent action=answer: name the question_id; {len(waiting)} questions "
                    f"of this run's tasks are waiting: {waiting}"
                )
            question_id = waiting[0]
        asked = await self.questions.get(question_id)
        if asked is None or asked.parent_session_key != parent.session_key:
            raise ToolError(f"question {question_id!r} not found in this session")
        return await self._answer(asked, text, "person" if by == "person" else "parent")

    async def answer_as_person(self, question_id: str, text: str) -> ParentQuestion:
        """A person answers a pending question from a surface (``tasks.answer``): the
        question's own options bound it; first answer wins."""
        asked = await self.questions.get(question_id)
        if asked is None:
            raise ToolError(f"question {question_id!r} not found")
        return await self._answer(asked, text, "person")

    async def _answer(
        self, asked: ParentQuestion, text: str, by: Literal["parent", "person"]
    ) -> ParentQuestion:
        if not text.strip():
            raise ToolError("the answer is empty; say what the child should know")
        if asked.options and text not in asked.options:
            raise ToolError(f"question {asked.question_id} takes one of {list(asked.options)}")
        final, won = await self.questions.resolve(
            asked.question_id, "answered", now_ms=_now_ms(self._clock), answer=text, by=by
        )
        if not won:
            raise ToolError(f"question {asked.question_id} already ended ({final.status})")
        return final

    async def _relay_question(
        self, live: _Live, asked: ParentQuestion, wait_s: float, *, idle: bool
    ) -> None:
        """Bring the question to whoever can answer: an ``idle`` parent run (no call blocked
        on the child) gets it steered in; a top-level parent's person gets it through the
        parent's approval path."""
        parent = live.parent
        port = self._port()
        running = port is not None and await self._running(port, parent)
        if idle:
            steered = False
            # Only into the parent's own running answer: a later run of the person's in that
            # session must not get the child's question as if the person had typed it.
            if port is not None and running:
                result = await port.steer(parent.session_key, _question_text(asked))
                steered = result.status == "accepted"
            if not steered:  # the parent is not running: its next wait gets the question
                live.asked.set()
        if parent.depth != 0 or self._approvals is None:
            return
        yes = asked.options[0] if asked.options else "yes"
        no = asked.options[1] if len(asked.options) == 2 else "no"
        try:
            outcome = await self._approvals.request(
                tool="ask_parent",
                action={"task_id": asked.task_id, "question_id": asked.question_id,
                        "question": asked.question, "options": list(asked.options)},
                # A parent run that ended (a detached child asking later) has no stream any
                # more: the question goes on the parent's session, where the person is.
                run_id=parent.run_id if running else None,
                session_key=parent.session_key,
                agent_id=parent.agent_id,
                rationale=f"child task {asked.task_id} asks: {asked.question} "
                f"(approve: {yes}; deny: {no})",
                deadline_s=wait_s,
                use_grants=False,
            )  # fmt: skip
        except ApprovalError:
            return  # too many pending: the parent agent and the deadline still answer
        if outcome.decision is ApprovalDecision.DENY:
            answer = no
        elif outcome.approved:
            answer = yes
        else:
            return  # timed out, cancelled or expired: no answer from the person
        await self.questions.resolve(
            asked.question_id, "answered", now_ms=_now_ms(self._clock), answer=answer,
            by="person",
        )  # fmt: skip

    @staticmethod
    async def _running(port: SessionPort, parent: ParentRun) -> bool:
        """Whether ``parent`` is its session's active run now."""
        for _attempt in range(3):  # "retry": the session moved while it was read
            snapshot = await port.snapshot(parent.session_key)
            if snapshot.status == "ok":
                return snapshot.active is not None and snapshot.active.run_id == parent.run_id
        return False

    async def _set_status(self, live: _Live, status: str) -> None:
        live.node = await self._put(live.node, status=status)
        self._publish(live.node, "run_graph_changed")

    # -- the driver ------------------------------------------------------------------------

    async def _request_stop(self, live: _Live, status: str, reason: str) -> None:
        if live.done.done() or live.stop is not None:
            return
        live.stop = (status, reason)
        if not live.submitted:
            if live.task is not None:
                live.task.cancel()
            return
        port = self._port()
        if port is not None:
            await port.cancel(run_id=live.node.child_run_id)

    async def _drive(
        self,
        live: _Live,
        port: SessionPort,
        request: TaskRequest,
        policy: ToolPolicy,
        timeout_s: float,
    ) -> None:
        node = live.node
        definition = live.parent.definitions[request.agent]
        # A resumed child's transcript already starts with its definition's preamble.
        preamble = definition.preamble if live.resumed_from is None else ""
        prompt = f"{preamble}\n\n{request.prompt}" if preamble else request.prompt
        if request.output_schema is not None:
            prompt += "\n\n" + _schema_note(request.output_schema)
        ended: RunEnded | None = None
        status = "failed"
        reason: str | None = None
        schema_failure: str | None = None
        try:
            async with self._slots[node.depth]:
                if live.stop is not None:
                    raise asyncio.CancelledError
                watch = _Watch(port.watch(node.session_key))
                try:
                    loop = asyncio.get_running_loop()
                    live.deadline = loop.time() + timeout_s
                    ended, reason = await self._attempt(live, port, watch, prompt, policy,
                                                        timeout_s, limit_s=timeout_s)  # fmt: skip
                    schema = request.output_schema
                    problems = _answer_problems(ended, schema) if _stop_of(live) is None else None
                    if problems and schema is not None:
                        # One correction turn in the child's session (its transcript goes on).
                        live.node = await self._put(live.node, child_run_id=f"run_{uuid.uuid4()}")
                        self._publish(live.node, "run_graph_changed")
                        ended, reason = await self._attempt(
                            live, port, watch, _correction(problems, schema), policy,
                            max(0.001, live.deadline - loop.time()), limit_s=timeout_s,
                        )  # fmt: skip
                        again = _answer_problems(ended, schema) if _stop_of(live) is None else None
                        if again:
                            schema_failure = (
                                "output_schema: the answer does not match the schema after "
                                f"one correction: {'; '.join(again)}"
                            )
                finally:
                    watch.stream.close()
        except asyncio.CancelledError:
            status, reason = live.stop or ("cancelled", "cancelled")
            await self._finish(live, status, reason, None)
            raise
        except Exception as exc:  # a foreign failure of the port: the task failed, typed
            await self._finish(live, "failed", f"{type(exc).__name__}: {exc}", None)
            return
        if reason is not None and ended is None:
            status = "failed"
        elif ended is not None and ended.ok and _stop_of(live) is None:
            status, reason = ("failed", schema_failure) if schema_failure else ("completed", None)
        elif (stop := _stop_of(live)) is not None:
            status, reason = stop
        elif ended is not None:
            status = "failed"
            reason = ended.error or (ended.error_code.value if ended.error_code else "failed")
        await self._finish(live, status, reason, ended)

    async def _attempt(
        self,
        live: _Live,
        port: SessionPort,
        watch: _Watch,
        prompt: str,
        policy: ToolPolicy,
        timeout_s: float,
        *,
        limit_s: float,
    ) -> tuple[RunEnded | None, str | None]:
        """Submit one run of the child (``live.node.child_run_id``) and wait for its end at
        most ``timeout_s`` (then it is cancelled: ``timeout``). Returns its end, or None and
        why it did not run."""
        node = live.node
        parent = live.parent
        definition = parent.definitions.get(node.agent)
        # The child's turn cap: [subagents] max_turns, lowered by its definition's.
        turns = self.config.max_turns
        if definition is not None and definition.max_turns is not None:
            turns = min(turns, definition.max_turns)
        meta: dict[str, Any] = {"task_id": node.task_id, "agent": node.agent, "max_turns": turns}
        receipt = await port.submit(
            RunRequest(
                origin=_ORIGIN,
                session_key=node.session_key,
                prompt=prompt,
                agent_id=parent.agent_id,
                run_id=node.child_run_id,
                cwd=parent.cwd,
                model=(definition.model if definition is not None else None) or parent.model,
                tool_policy=policy,
                preapproved=parent.preapproved,
                parent_run_id=parent.run_id,
                root_run_id=parent.root_run_id,
                depth=node.depth,
                meta=meta,
                editor=parent.editor,
            )
        )
        if receipt.status == "rejected":
            return None, f"the child was refused: {receipt.reason}"
        live.submitted = True
        if node.status == "queued":
            node = live.node = await self._put(
                node, status="running", started_at_ms=_now_ms(self._clock)
            )
            self._publish(node, "task_started")
            self._publish(node, "run_graph_changed")
        if _stop_of(live) is not None:  # asked to stop while it was submitted
            await port.cancel(run_id=node.child_run_id)
        ended: RunEnded | None = None
        try:
            async with asyncio.timeout(timeout_s):
                ended, watch.stream = await self._until_end(live, port, watch.stream)
        except TimeoutError:
            live.stop = _stop_of(live) or (
                "timeout",
                f"timeout: the child ran past its {limit_s:g} s deadline",
            )
            await port.cancel(run_id=node.child_run_id)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_CANCEL_GRACE_S):
                    ended, watch.stream = await self._until_end(live, port, watch.stream)
        return ended, None

    async def _until_end(
        self, live: _Live, port: SessionPort, stream: SessionStream
    ) -> tuple[RunEnded, SessionStream]:
        run_id = live.node.child_run_id
        while True:
            event = await stream.get()
            if isinstance(event, RunEnded) and event.run_id == run_id:
                return event, stream
            if isinstance(event, TextDelta) and live.partial_chars < _MAX_PARTIAL_CHARS:
                live.partial.append(event.text)
                live.partial_chars += len(event.text)
            elif isinstance(event, ToolCard):
                live.last_action = f"{event.title} ({event.phase})"
                if event.phase == "started":
                    self._publish_progress(live)
                if event.phase == "started" and live.notify is not None:
                    # The parent's task card follows the child: its last action, live.
                    await live.notify(f"child task {live.node.task_id}: {event.title}")
            elif isinstance(event, ApprovalAsked):
                live.last_action = f"waiting for approval {event.approval_id} ({event.tool})"
                self._publish_progress(live)  # its card says what it waits for
                self._relay_approval(live, event)
                if live.notify is not None:
                    # The child's question reaches the parent's surface (never a hidden
                    # prompt); it stays bounded by the child's approval deadline.
                    await live.notify(
                        f"child task {live.node.task_id} asks approval {event.approval_id} "
                        f"to run {event.tool}: {event.rationale or ''}".rstrip(": ")
                    )
            elif isinstance(event, ApprovalEnded):
                self._relay_approval_end(live, event)
            elif isinstance(event, StreamOverflow):
                # Fell behind: watch again, then ask the run history whether it already ended.
                stream.close()
                stream = port.watch(live.node.session_key)
                found = await self._ended_meanwhile(port, live)
                if found is not None:
                    return found, stream

    async def _ended_meanwhile(self, port: SessionPort, live: _Live) -> RunEnded | None:
        run_id = live.node.child_run_id
        for record in await port.runs(limit=200):
            if record.run_id == run_id:
                page = await port.transcript(live.node.session_key, limit=1)
                answer = page.entries[-1].text if page.entries else ""
                return RunEnded(
                    session_key=live.node.session_key,
                    run_id=run_id,
                    attempt_id=record.attempt_id or run_id,
                    ok=record.ok,
                    error_code=record.error_code,
                    answer=answer,
                    usage=record.usage,
                )
        return None

    async def _finish(
        self, live: _Live, status: str, reason: str | None, ended: RunEnded | None
    ) -> None:
        node = live.node
        answer = ended.answer if ended is not None else ""
        if status != "completed" and not answer and live.partial:
            answer = "".join(live.partial)
        usage: RunUsage | None = ended.usage if ended is not None else None
        if usage is not None:  # what the per-call charges did not count (summaries...)
            self._spent[node.root_run_id] += max(0, usage.total_tokens - live.charged)
            extra_usd = max(0.0, usage.cost_usd - live.charged_usd)
            if extra_usd:
                root = node.root_run_id
                self._spent_usd[root] = self._spent_usd.get(root, 0.0) + extra_usd
                for up in self._ancestors(live):
                    up.subtree_usd += extra_usd
        final = await self._put(
            node,
            status=status,
            finished_at_ms=_now_ms(self._clock),
            usage=usage,
            answer=answer[:_MAX_PARTIAL_CHARS],
            reason=reason,
            error=(ended.error if ended is not None else None) if status == "failed" else None,
        )
        live.node = final
        self._live.pop(node.task_id, None)
        if not live.done.done():
            live.done.set_result(final)
        event = {
            "completed": "task_completed",
            "timeout": "task_timeout",
            "cancelled": "task_aborted",
        }.get(status, "task_error")
        self._publish(final, event)
        self._publish(final, "run_graph_changed")
        for approval_id in live.relayed:  # the parent's session stops showing them
            self._announce_approval_end(live, approval_id, ApprovalDecision.EXPIRED)
        live.relayed.clear()
        self._check_budget(node.root_run_id)
        if (
            final.mode == "async"
            and not live.parent_gone
            and live.watchers == 0
            and status != "cancelled"
            and not self._closed
        ):
            # Nobody waits for it: the parent's running answer is told it ended.
            self._supervisor.spawn(self._notify_end(live, final), name=f"notice {node.task_id}")
        elif live.parent_gone and live.watchers == 0:
            # Its parent's run had ended (also when it stopped with the daemon): the
            # session is told, with its result, at once and in its next run. (A call blocked
            # on it, a later run's ``agent wait``, gets the result itself: told once.)
            with contextlib.suppress(Exception):
                await asyncio.shield(self._store_notice(final))

    async def _notify_end(self, live: _Live, node: TaskNode) -> None:
        """Nobody waits for the async child that ended: its parent's running answer is told
        by a steer; a parent run that already ended (a ``detached`` child outliving it) gets
        a durable notice with the child's result instead: published on the parent's session
        (``task_notice``) and taken into the session's next run
        (:meth:`take_notices`)."""
        port = self._port()
        if port is not None and await self._running(port, live.parent):
            result = await port.steer(
                live.parent.session_key,
                f"[task {node.task_id} ended: {node.status}; this is a notice of the child's "
                f"end, not the user's message] Get its result with agent action=wait "
                f"task_ids=[{json.dumps(node.task_id)}].",
            )
            if result.status == "accepted":
                return
        await self._store_notice(node)

    async def _store_notice(self, node: TaskNode) -> None:
        key = f"{node.parent_session_key}\x1f{_now_ms(self._clock):016d}\x1f{node.task_id}"
        notice = {"task_id": node.task_id, "session_key": node.parent_session_key,
                  "text": notice_text(node)}  # fmt: skip
        await self._store.put(_NOTICES, key, notice)
        if self._bus is not None:
            payload = {**notice, "status": node.status, "parent_session_key":
                       node.parent_session_key, "run_id": node.child_run_id,
                       "parent_run_id": node.parent_run_id, "reason": node.reason}  # fmt: skip
            meta = {"task_id": node.task_id, "run_id": node.child_run_id}
            self._bus.broadcast_event(
                session_topic(node.parent_session_key), "task_notice", payload, meta=meta
            )
            self._bus.broadcast_event(
                run_topic(node.parent_run_id), "task_notice", payload, meta=meta
            )

    async def _withdraw_notices(self, session_key: str, task_ids: set[str]) -> None:
        """Delete the pending notices of ``task_ids`` (their result was delivered)."""
        rows = await self._store.scan(_NOTICES, prefix=f"{session_key}\x1f", limit=_NOTICE_SCAN)
        for key, _notice in rows:
            if key.rpartition("\x1f")[2] in task_ids:
                await self._store.delete(_NOTICES, key)

    async def take_notices(self, session_key: str) -> list[str]:
        """The notices of children that ended after their parent's run (and of tasks a
        restart left ``unknown``) waiting for ``session_key``, oldest first; taken (deleted)
        as they are returned, so each reaches exactly one run."""
        rows = await self._store.scan(_NOTICES, prefix=f"{session_key}\x1f", limit=_NOTICES_PER_RUN)
        texts: list[str] = []
        for key, notice in rows:
            if await self._store.delete(_NOTICES, key) and isinstance(notice, Mapping):
                texts.append(str(notice.get("text", "")))
        return texts

    def _relay_approval(self, live: _Live, asked: ApprovalAsked) -> None:
        """A child's approval question, shown on the parent's session too (a person watching
        the parent sees it and may decide it there); it stays bounded by the child's own
        approval deadline and the child's deadline."""
        if self._bus is None or asked.approval_id in live.relayed:
            return
        live.relayed.add(asked.approval_id)
        pending = ApprovalPending(
            id=asked.approval_id, run_id=asked.run_id, session_key=live.parent.session_key,
            tool=asked.tool, action=asked.action,
            rationale=f"child task {live.node.task_id}: {asked.rationale or asked.tool}",
            expires_at_ms=asked.expires_at_ms,
        )  # fmt: skip
        self._bus.broadcast_event(
            session_topic(live.parent.session_key),
            "approval_requested",
            ApprovalRequested(approval_id=asked.approval_id, pending=pending),
            meta={
                "task_id": live.node.task_id,
                "relayed_from": live.node.session_key,
                "session_key": live.parent.session_key,
            },
        )

    def _relay_approval_end(self, live: _Live, ended: ApprovalEnded) -> None:
        if ended.approval_id in live.relayed:
            live.relayed.discard(ended.approval_id)
            self._announce_approval_end(live, ended.approval_id, ended.decision)

    def _announce_approval_end(
        self, live: _Live, approval_id: str, decision: ApprovalDecision
    ) -> None:
        if self._bus is None:
            return
        self._bus.broadcast_event(
            session_topic(live.parent.session_key),
            "approval_resolved",
            ApprovalResolved(approval_id=approval_id, decision=decision),
            # The session it ends in (the payload names none; a stream following every
            # session would take it for the child's, whose copy already ended).
            meta={
                "task_id": live.node.task_id,
                "relayed_from": live.node.session_key,
                "session_key": live.parent.session_key,
            },
        )

    async def _put(self, node: TaskNode, **changes: Any) -> TaskNode:
        return await self.graph.put(msgspec.structs.replace(node, **changes))

    def _publish_progress(self, live: _Live) -> None:
        """The task's live usage, after each of its model calls (``task_progress``)."""
        self._publish(live.node, "task_progress", live=live)

    def _publish(self, node: TaskNode, event_type: str, *, live: _Live | None = None) -> None:
        if self._bus is None:
            return
        live = live or self._live.get(node.task_id)
        payload = {
            "task_id": node.task_id,
            "run_id": node.child_run_id,
            "parent_run_id": node.parent_run_id,
            "root_run_id": node.root_run_id,
            "session_key": node.session_key,
            "parent_session_key": node.parent_session_key,
            "agent_id": node.agent,
            "status": node.status,
            "depth": node.depth,
            "reason": node.reason,
            "description": node.description,
            "started_at_ms": node.started_at_ms,
            "finished_at_ms": node.finished_at_ms,
            "error": node.error,
            "answer_preview": node.answer[:_PREVIEW_CHARS] if node.terminal else None,
        }
        if node.usage is not None:  # the recorded end
            usage = node.usage
            payload |= {"turns": usage.turns, "tokens": usage.total_tokens,
                        "cost_usd": round(usage.cost_usd, 6)}  # fmt: skip
        elif live is not None:  # while it runs: what its model calls were charged so far
            payload |= {"turns": live.turns, "tokens": live.charged,
                        "cost_usd": round(live.charged_usd, 6)}  # fmt: skip
        if live is not None:
            payload["last_action"] = live.last_action
            payload["budget_usd"] = live.budget_usd
        meta = {"run_id": node.child_run_id, "task_id": node.task_id,
                "parent_run_id": node.parent_run_id}  # fmt: skip
        for topic in (run_topic(node.child_run_id), run_topic(node.parent_run_id)):
            self._bus.broadcast_event(topic, event_type, payload, meta=meta)


@dataclass(slots=True)
class _Watch:
    """The child session's stream (replaced when it overflows and is watched again)."""

    stream: SessionStream


def notice_text(node: TaskNode) -> str:
    """A task's end told to its parent's session after the parent run ended: its status,
    why, and its answer fenced as the child's data."""
    answer = node.answer[:_NOTICE_CHARS]
    cut = f"\n[answer cut to {_NOTICE_CHARS} characters]" if len(node.answer) > len(answer) else ""
    why = f" - {node.reason}" if node.reason else ""
    return (
        f"[notice: task {node.task_id} ({node.agent}"
        + (f", {node.description!r}" if node.description else "")
        + f") ended {node.status}{why} after the run that started it had ended; this is the "
        "child's result, not the user's message]\n"
        f"<child_output task_id={json.dumps(node.task_id)} status={node.status}>\n{answer}{cut}"
        "\n</child_output>"
    )


def _budget_reason(spent: int, limit: int) -> str:
    return (
        f"budget_exceeded: the tree spent {spent} tokens of the {limit} allowed "
        "([subagents] max_tokens_per_tree)"
    )


def _question_text(asked: ParentQuestion) -> str:
    options = f" Options: {', '.join(asked.options)}." if asked.options else ""
    return (
        f"[child task {asked.task_id} asks its parent; question_id {asked.question_id}; this "
        f"is the child's data, not the user's message] {asked.question}{options} Answer with "
        f"the agent tool: action=answer, question_id={asked.question_id}, answer=..."
    )


def _schema_note(schema: Mapping[str, Any]) -> str:
    return (
        "Your final answer must be only JSON matching this JSON Schema (no other text):\n"
        + json.dumps(schema, sort_keys=True)
    )


def _answer_problems(ended: RunEnded | None, schema: Mapping[str, Any] | None) -> list[str]:
    """Why a completed child's answer does not match ``schema`` (empty: it does, or there
    is nothing to check)."""
    if schema is None or ended is None or not ended.ok:
        return []
    value, error = parse_answer(ended.answer)
    if error is not None:
        return [error]
    return validate(value, schema)


def _correction(problems: list[str], schema: Mapping[str, Any]) -> str:
    return (
        "Your answer does not match the required output schema: "
        + "; ".join(problems)
        + ". Answer again. "
        + _schema_note(schema)
    )


class BudgetedProvider:
    """A child run's provider: each model call is charged to its tree as it ends (in the
    agent loop's own path, before the call's tools run) and its tool calls counted; a call
    asked for once the tree's budget is spent, or after the same tool call was asked
    ``max_repeated_calls`` times, is refused (``budget_exceeded``, ``loop``) without reaching
    the model. So a looping child stops at once, however fast its loop turns."""

    def __init__(self, inner: Provider, subagents: Subagents, run_id: str) -> None:
        self._inner = inner
        self._subagents = subagents
        self._run_id = run_id

    @property
    def api(self) -> Any:
        return self._inner.api

    async def aclose(self) -> None:
        """Nothing: the inner provider belongs to the run."""

    async def stream(
        self, model: Model, context: Context, options: StreamOptions | None = None
    ) -> AsyncGenerator[StreamEvent, None]:
        reason = self._subagents.refusal(self._run_id)
        if reason is not None:
            error = BadRequestError(reason, provider="subagents", retryable=False)
            yield ErrorEvent(error=error, partial=AssistantMessage(stop_reason="error"))
            return
        async with aclosing(self._inner.stream(model, context, options)) as events:
            async for event in events:
                if isinstance(event, DoneEvent):
                    message = event.message
                    calls = [b for b in message.content if isinstance(b, ToolCall)]
                    self._subagents.charge(
                        self._run_id, message.usage.total_tokens,
                        cost_usd=message.cost.total, final=not calls,
                    )  # fmt: skip
                    self._subagents.note_calls(
                        self._run_id,
                        [(c.name, json.dumps(c.arguments, sort_keys=True, default=str))
                         for c in calls],
                    )  # fmt: skip
                yield event
