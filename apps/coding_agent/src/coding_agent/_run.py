"""One coding run: its tools, approval gate, agent loop, persistence and counters.

:class:`CodingRun` is built by :class:`~coding_agent.executor.CodingExecution` once the session
is open, the configuration loaded and the model chosen, and lives for that run only. Everything
the run touches is its own: the workspace (cwd, the bounds fitted to its model, file access, the
tools' environment), the todo list, the gate (policy, approvals, the hooks reporting approval
actions) and the tool registry the agent sees (each tool checked against the gate, then executed
in this run's workspace). Two runs of one executor, in two workspaces or on two models, share
nothing but the executor's counters.

Each step is a method: :meth:`CodingRun.prepare` (workspace, gate, tools, prompt, compactor,
the prompt written to the transcript), :meth:`CodingRun.run` (the agent loop, once more for a
late steer), :meth:`CodingRun.persist` (new messages to the transcript),
:meth:`CodingRun.steer`, and the result.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from coding_agent._sections import FileAccessConfig
from coding_agent.access import FileAccess
from coding_agent.agent_definitions import cached_agent_definitions
from coding_agent.compaction import CompactionSettings, Compactor, run_limits, tool_result_cap
from coding_agent.environment import tool_environment_for
from coding_agent.policy import ApprovalHooks, GateContext, RunTaint, gate_tools
from coding_agent.prompt import PromptLimits, build_system_prompt
from coding_agent.session import Transcript
from coding_agent.subagents import BudgetedProvider, ParentRun, Subagents
from coding_agent.tools import TodoList, coding_tools
from coding_agent.tools.cron import cron_tool
from coding_agent.tools.mcp import mcp_policy, mcp_tools
from coding_agent.tools.task import agent_tool, ask_parent_tool, task_tool
from coding_agent.tools.web import web_tools
from coding_agent.workspace import CodingLimits, Workspace
from lemon_agent import (
    Agent,
    AgentConfig,
    AgentEndEvent,
    AgentErrorEvent,
    AgentEvent,
    AgentResult,
    AgentRun,
    MessageUpdateEvent,
    QueueFullError,
    Tool,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    ToolRegistry,
    TurnEndEvent,
    TurnStartEvent,
)
from lemon_ai import (
    AssistantMessage,
    Cost,
    ImageContent,
    Message,
    Model,
    Provider,
    TextDeltaEvent,
    ToolCall,
    Usage,
    UserMessage,
)
from lemon_browser import Browsers
from lemon_core import ExecApprovals
from lemon_core.config import Config, read_secrets
from lemon_core.cron import CronJobs
from lemon_core.events import ApprovalDecision, ApprovalPending, ErrorCode, RunUsage
from lemon_core.execution import (
    ActionKind,
    ExecutionJob,
    ExecutionResult,
    ExecutionSink,
    ResumeToken,
    ToolPolicy,
)
from lemon_core.mcp import McpHub
from lemon_memory import GoalStore, MemoryContext, MemoryStore
from lemon_skills import SkillCatalog, SkillsError, SkillSummary, memory_tools, read_skill_tool

__all__ = ["CodingRun", "RunSettings"]

_ACTION_KIND: Final[Mapping[str, ActionKind]] = {
    "bash": ActionKind.COMMAND,
    "write": ActionKind.FILE_CHANGE,
    "edit": ActionKind.FILE_CHANGE,
    "task": ActionKind.SUBAGENT,
    "web_fetch": ActionKind.FETCH,
    "web_search": ActionKind.WEB_SEARCH,
    "browser": ActionKind.FETCH,
}
_WEB_TOOLS: Final = frozenset({"web_fetch", "web_search", "browser"})
_MAX_ACTION_TEXT: Final = 2000
_ERROR_CODES: Final[Mapping[str, ErrorCode]] = {
    "auth": ErrorCode.PROVIDER_AUTH,
    "rate_limit": ErrorCode.RATE_LIMITED,
    "context_overflow": ErrorCode.CONTEXT_OVERFLOW,
    "bad_request": ErrorCode.BAD_REQUEST,
    "server": ErrorCode.PROVIDER_ERROR,
    "protocol": ErrorCode.PROVIDER_ERROR,
    "connection": ErrorCode.CONNECTION,
    "max_turns": ErrorCode.MAX_TURNS,
}


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSettings:
    """What a run takes from its executor (the executor's settings, home and channels)."""

    limits: CodingLimits
    compaction: CompactionSettings
    prompt_limits: PromptLimits
    max_turns: int
    steering_capacity: int
    cancel_grace_s: float
    approval_timeout_s: float | None
    approvals: ExecApprovals | None
    home: Path
    environ: Mapping[str, str] | None
    skills: SkillCatalog
    mcp: McpHub | None = None
    """The runtime's MCP hub (none: the run has no MCP tools)."""
    subagents: Subagents | None = None
    """Delegation (the ``task`` tool), when the daemon offers it."""
    memory: MemoryStore | None = None
    """The runtime's memory store (lemon_memory's MEMORY_STORE): the run gets remember,
    recall and forget over its own scopes; ``None``: no memory tools."""
    goals: GoalStore | None = None
    """The runtime's goals: an active goal of the run's session goes into its system prompt,
    fenced as data; a paused or cleared one does not."""
    browsers: Browsers | None = None
    """The browser tool's Chromium, when the executor has one ([web] browser)."""
    cron: CronJobs | None = None
    """The runtime's cron jobs (lemon_automation's CRON_JOBS, while its scheduler runs): the
    run gets the ``cron`` tool over its own agent's jobs; ``None``: no cron tool."""


class CodingRun:
    """One run of a coding execution (loop-only; built and driven by ``CodingExecution``).

    ``counts`` are the executor's counters (this run adds its steers, continuations and
    compactions to them).
    """

    def __init__(
        self,
        *,
        job: ExecutionJob,
        settings: RunSettings,
        counts: MutableMapping[str, int],
        sink: ExecutionSink,
        transcript: Transcript,
        history: list[Message],
        config: Config,
        model: Model,
        provider: Provider,
        policy: ToolPolicy,
        agent_id: str,
        resume: ResumeToken,
        images: tuple[ImageContent, ...] = (),
    ) -> None:
        self._job = job
        self._settings = settings
        self._counts = counts
        self._sink = sink
        self._transcript = transcript
        self._history = history
        self._config = config
        self._model = model
        self._provider = provider
        self._policy = policy
        self._agent_id = agent_id
        self._resume = resume
        self._images = images
        # Built by prepare():
        self.workspace: Workspace | None = None
        self.gate: GateContext | None = None
        self.tools: ToolRegistry | None = None
        self.taint = RunTaint()  # marked when web content reaches the model
        self.web_cards: dict[str, dict[str, Any]] = {}  # web tool call id -> its card details
        self.mcp_origins: dict[str, dict[str, str]] = {}  # MCP tool name -> server and tool
        self._compactor: Compactor | None = None
        self._agent_config: AgentConfig | None = None
        # The agent loop and its steering state:
        self._agent: Agent | None = None
        self._persisted = 0
        self._persisting = asyncio.Lock()  # the turn's end and a compaction may both append
        # The texts of the latest accepted steers (bounded like the agent's queue): the ones
        # the loop has not taken are the last ``steering_queued`` of them.
        self._accepted: deque[str] = deque(maxlen=settings.steering_capacity)
        self._accepting = False
        self.finished = False
        # What the run has produced:
        self._usage = Usage()
        self._context_tokens = 0
        self._cost = Cost()
        self._turns = 0
        self._answer = ""
        self._abort_reason: str | None = None
        self._outcome = "completed"
        self._error: str | None = None
        self._error_code: ErrorCode | None = None

    # -- steering --------------------------------------------------------------------------

    @property
    def steerable(self) -> bool:
        return self._accepting and self._agent is not None

    def steer(self, text: str) -> bool:
        """See :meth:`CodingExecution.steer`."""
        agent = self._agent
        if not self._accepting or agent is None or not text.strip():
            self._counts["steers_refused"] += 1
            return False
        try:
            agent.steer(text)
        except QueueFullError:
            self._counts["steers_refused"] += 1
            return False
        self._accepted.append(text)
        self._counts["steers_accepted"] += 1
        return True

    # -- preparation -----------------------------------------------------------------------

    async def prepare(self) -> None:
        """Workspace, gate, tools, system prompt, compactor; the prompt into the transcript."""
        s = self._settings
        self._note_images_not_sent()
        # The tools' processes get the daemon's environment less its secrets (reads secrets.env).
        env = await asyncio.to_thread(
            tool_environment_for, self._config, home=s.home, environ=s.environ
        )
        workspace = Workspace(
            cwd=Path(self._job.cwd),
            limits=run_limits(s.limits, self._model, s.compaction),
            access=FileAccess.from_config(self._config.section(FileAccessConfig), home=s.home),
            env=env,
        )
        self.workspace = workspace
        # MCP servers' tools, under the approval policy (a server down is a note, never a stop):
        # the configured ones, and the session's own from the request (an editor's, over ACP).
        extra, mcp_approvals, mcp_note, self.mcp_origins = await mcp_tools(
            s.mcp,
            self._config,
            workspace.cwd,
            session_key=self._job.session_key,
            servers=self._job.mcp_servers,
        )
        self._policy = mcp_policy(self._policy, mcp_approvals, self._job.preapproved)
        if mcp_note:
            self._note("mcp_unavailable", f"MCP servers not available: {mcp_note}")
        self.gate = self._gate(workspace)
        known = await asyncio.to_thread(_known_secrets, s.home, s.environ)
        self.tools = self._tool_registry(workspace, self.gate, extra, known)
        skills = await asyncio.to_thread(_usable_skills, s.skills)
        system_prompt = await asyncio.to_thread(
            build_system_prompt,
            cwd=workspace.cwd,
            home=s.home,
            tool_names=self.tools.names(),
            limits=s.prompt_limits,
            skills=skills,
        )
        if s.goals is not None:
            block = await s.goals.prompt_block(self._job.session_key)
            if block is not None:
                system_prompt = f"{system_prompt}\n\n{block}"
        self._compactor = Compactor(
            model=self._model,
            provider=self._provider,
            transcript=self._transcript,
            settings=s.compaction,
            sink=self._sink,
            flush=self.persist,
        )
        # Compacts before a request that would overflow; a child's calls are also charged.
        provider: Provider = self._compactor.provider
        if s.subagents is not None and self._depth() > 0:
            provider = BudgetedProvider(provider, s.subagents, self._job.run_id)
        self._agent_config = AgentConfig(
            model=self._model,
            provider=provider,
            system_prompt=system_prompt,
            tools=self.tools,
            max_turns=self._max_turns(),
            max_tool_result_chars=tool_result_cap(self._model, s.compaction),
            steering_capacity=s.steering_capacity,
        )
        # The prompt goes in as the conversation's last message (images attached) and is
        # written to the transcript before the model is asked: a crash mid-answer leaves it in
        # the session. The agent continues from it (it starts with no prompt of its own).
        retried = _retried_prompt(self._history, self._job)
        if retried is not None:
            # A retry of a run that failed with no answer: its prompt is already the
            # transcript's last message (then, at most, the failed attempt's empty error
            # reply). It is recorded once; the model is asked from it again.
            history = retried
        else:
            prompt = self._job.prompt
            if s.subagents is not None:
                # Children that ended after the run that started them (and tasks a restart
                # left unknown): told here, before the person's message, once each.
                notices = await s.subagents.take_notices(self._job.session_key)
                if notices:
                    prompt = "\n\n".join([*notices, prompt])
            asked = UserMessage(content=prompt, images=self._images)
            await self._transcript.append([asked])
            history = [*self._history, asked]
        self._persisted = len(history)
        self._agent = Agent(self._agent_config, messages=history)

    def _note(self, id: str, title: str) -> None:
        self._sink.action(
            id=id, kind=ActionKind.NOTE, title=title, phase="completed", ok=False, level="warning"
        )

    def _note_images_not_sent(self) -> None:
        images = self._images
        if images and self._model.image_input is False:
            self._sink.action(
                id="images_not_sent",
                kind=ActionKind.NOTE,
                title=(
                    f"{self._model.ref} does not accept image input: {len(images)} image(s) not "
                    "sent (the model was told); choose a model that takes images to send them"
                ),
                phase="completed",
                ok=False,
                level="warning",
            )

    def _gate(self, workspace: Workspace) -> GateContext:
        job = self._job
        approval_timeout_s = self._settings.approval_timeout_s
        subagents = self._settings.subagents
        left = subagents.time_left(job.run_id) if subagents is not None else None
        if left is not None:  # a child's approval never outlives its deadline (then: denied)
            approval_timeout_s = min(left, approval_timeout_s or left)
        return GateContext(
            policy=self._policy,
            workspace=workspace,
            approvals=self._settings.approvals,
            run_id=job.run_id,
            session_id=self._transcript.session_id,
            session_key=job.session_key,
            agent_id=self._agent_id,
            approval_timeout_s=approval_timeout_s,
            hooks=ApprovalHooks(
                requested=self._approval_requested, resolved=self._approval_resolved
            ),
            preapproved=job.preapproved,
            taint=self.taint,
        )

    def _tool_registry(
        self,
        workspace: Workspace,
        gate: GateContext,
        extra: list[Tool] | None = None,
        known_secrets: tuple[str, ...] = (),
    ) -> ToolRegistry:
        """This run's tools (its workspace, its todo list, the skills, memory over this run's
        scopes, then ``extra``: the MCP servers'), each checked against this run's gate before
        it runs."""
        todos = TodoList(self._settings.limits.max_todos)
        tools = [
            *coding_tools(workspace, todos=todos, editor=self._job.editor),
            read_skill_tool(self._settings.skills),
        ]
        store = self._settings.memory
        if store is not None:
            context = MemoryContext.for_run(
                agent_id=self._agent_id, session_key=self._job.session_key, cwd=str(workspace.cwd)
            )
            tools += memory_tools(store, context, known_secrets=lambda: known_secrets)
        if self._settings.cron is not None:
            tools.append(cron_tool(self._settings.cron, self._agent_id))
        tools += extra or []
        subagents = self._settings.subagents
        if subagents is not None and subagents.offers_task(self._depth()):
            parent = self._parent_run()
            tools += [task_tool(subagents, parent), agent_tool(subagents, parent)]
        if subagents is not None and self._depth() > 0:  # a child may ask its parent
            tools.append(ask_parent_tool(subagents, self._job.run_id))
        tools += web_tools(
            config=self._config, taint=self.taint, session_id=self._transcript.session_id,
            home=self._settings.home, environ=self._settings.environ,
            max_chars=workspace.limits.max_output_chars, cards=self.web_cards,
            browsers=self._settings.browsers,
        )  # fmt: skip
        return gate_tools(ToolRegistry(tools), gate)

    def _depth(self) -> int:
        context = self._job.context
        return context.depth if context is not None else 0

    def _max_turns(self) -> int:
        """The executor's turn limit; a child's agent definition may only lower it
        (``meta["max_turns"]``)."""
        limit = self._settings.max_turns
        asked = self._job.meta.get("max_turns") if self._depth() > 0 else None
        if isinstance(asked, int) and not isinstance(asked, bool) and 0 < asked < limit:
            return asked
        return limit

    def _parent_run(self) -> ParentRun:
        """This run as the parent of the children its ``task`` tool starts."""
        job = self._job
        context = job.context
        return ParentRun(
            run_id=job.run_id,
            session_key=job.session_key,
            root_run_id=context.root_run_id if context is not None else job.run_id,
            depth=self._depth(),
            policy=self._policy,
            cwd=job.cwd,
            agent_id=job.agent_id,
            preapproved=job.preapproved,
            model=job.model,
            context_window=self._model.context_window,
            definitions=cached_agent_definitions(self._settings.home, Path(job.cwd)).definitions,
            editor=job.editor,
        )

    def _approval_requested(self, tool_call_id: str, pending: ApprovalPending) -> None:
        self._sink.action(
            id=pending.id,
            kind=ActionKind.APPROVAL,
            title=f"approve {pending.rationale or pending.tool}?",
            detail={"approval_id": pending.id, "tool": pending.tool,
                    "tool_call_id": tool_call_id, "action": pending.action},
            phase="started",
        )  # fmt: skip

    def _approval_resolved(self, tool_call_id: str, approval_id: str, d: ApprovalDecision) -> None:
        self._sink.action(
            id=approval_id,
            kind=ActionKind.APPROVAL,
            title=f"approval {d.value}",
            detail={"approval_id": approval_id, "decision": d.value},
            phase="completed",
            ok=d.value.startswith("approve"),
        )

    # -- persistence -----------------------------------------------------------------------

    async def persist(self) -> None:
        """Append the agent's messages not yet in the transcript."""
        async with self._persisting:
            agent = self._agent
            assert agent is not None
            messages = agent.messages
            await self._transcript.append(messages[self._persisted :])
            self._persisted = len(messages)

    # -- the agent loop --------------------------------------------------------------------

    async def run(self) -> ExecutionResult:
        """Run the agent (once more for each steer that arrived after its last drain) and
        return the result. Call :meth:`prepare` first."""
        compactor = self._compactor
        assert compactor is not None
        prompt: str | None = None
        try:
            while True:
                agent = self._agent
                assert agent is not None
                result, end = await self._drive(agent.start(prompt, run_id=self._job.run_id))
                await self.persist()
                self._record(result, end)
                if not self._continue_for_late_steers():
                    break
        finally:
            self._counts["compactions"] += compactor.compactions
            self._counts["compaction_retries"] += compactor.retries
            self._usage = self._usage + compactor.usage  # the summaries are part of the run
            self._cost = self._cost + compactor.cost
            self._accepting = False
            self.finished = True
        return self._result()

    async def _drive(self, run: AgentRun) -> tuple[AgentResult, AgentEndEvent | None]:
        """One agent run to its end: events forwarded, each turn persisted."""
        agent = self._agent
        assert agent is not None
        self._accepting = True
        end: AgentEndEvent | None = None
        try:
            async with run:
                try:
                    async for event in run:
                        if isinstance(event, AgentEndEvent):
                            end = event
                        else:
                            await self._on_event(event)
                except asyncio.CancelledError:
                    await self._abort(run)
                    raise
                return await run.result(), end
        except asyncio.CancelledError:
            self._accepting = False
            self._counts["steers_dropped"] += agent.statistics().steering_queued
            await asyncio.shield(self.persist())
            raise

    async def _on_event(self, event: AgentEvent) -> None:
        if isinstance(event, TurnEndEvent):
            used = event.message.usage
            prompt = used.input_tokens + used.cache_read_tokens + used.cache_write_tokens
            if prompt > 0:
                self._context_tokens = prompt  # the latest model call's context
            await self.persist()
        elif isinstance(event, TurnStartEvent):
            self._turns += 1
        elif isinstance(event, AgentErrorEvent):
            self._accepting = False  # the run is failing
            self._error = f"{event.kind}: {event.message}"
            self._error_code = _error_code(event.kind)
        else:
            _forward(event, self._sink, self.web_cards, self.mcp_origins)

    async def _abort(self, run: AgentRun) -> None:
        """The run ends: no more steering, its pending approvals expire, then the agent aborts
        cooperatively (partial answer kept, bash process group killed) for at most
        ``cancel_grace_s`` before leaving the block cancels it outright."""
        self._accepting = False
        approvals = self._settings.approvals
        if approvals is not None:
            approvals.expire_owner(self._job.run_id)
        run.abort("cancelled")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(run.result()), self._settings.cancel_grace_s)

    def _record(self, result: AgentResult, end: AgentEndEvent | None) -> None:
        self._usage = self._usage + result.usage
        self._cost = self._cost + result.cost
        self._answer = result.text
        self._abort_reason = result.abort_reason
        self._outcome = end.outcome if end is not None else result.outcome
        if self._outcome == "max_turns":
            self._error = (
                f"max_turns: the run reached its limit of {self._max_turns()} model "
                "calls (ExecutorSettings.max_turns, or its agent definition's) and was stopped"
            )

    def _continue_for_late_steers(self) -> bool:
        """The decision point, with no await between the check and closing: a steer accepted
        after the loop's last drain (while the final answer was being finished or persisted)
        is still queued here and gets one more run. True: a fresh agent is ready."""
        agent = self._agent
        config = self._agent_config
        assert agent is not None
        assert config is not None
        max_turns = self._max_turns()
        queued = agent.statistics().steering_queued
        if self._outcome == "completed" and queued:
            if self._turns < max_turns:
                # A fresh agent on the same conversation whose own turn limit is what is left
                # of the execution's, holding the steers the loop never took (the most recent
                # ``queued`` accepted ones, in order).
                self._counts["steer_continuations"] += 1
                late = list(self._accepted)[-queued:]
                fresh = Agent(
                    replace(config, max_turns=max_turns - self._turns), messages=agent.messages
                )
                for text in late:
                    fresh.steer(text)
                self._agent = fresh
                return True
            self._outcome = "max_turns"
            self._error = (
                f"max_turns: the run reached its limit of {max_turns} model calls "
                f"(ExecutorSettings.max_turns) with {queued} steering message(s) not yet answered"
            )
        self._accepting = False
        self._counts["steers_dropped"] += queued
        return False

    # -- the result ------------------------------------------------------------------------

    def _result(self) -> ExecutionResult:
        usage, cost = self._usage, self._cost
        run_usage = RunUsage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            cost_usd=cost.total,
            model=self._model.ref,
            turns=self._turns,
            context_tokens=self._context_tokens,
        )
        outcome, error, error_code = self._outcome, self._error, self._error_code
        if outcome == "completed":
            return ExecutionResult(
                ok=True, answer=self._answer, resume=self._resume, usage=run_usage
            )
        if outcome == "aborted":
            error = f"aborted: {self._abort_reason or 'aborted'}"
            error_code = ErrorCode.CANCELLED
        elif outcome == "max_turns":
            error_code = ErrorCode.MAX_TURNS
        return ExecutionResult(
            ok=False,
            answer=self._answer,
            error=error or outcome,
            error_code=error_code or ErrorCode.EXECUTOR_FAILED,
            resume=self._resume,
            usage=run_usage,
        )


def _retried_prompt(history: list[Message], job: ExecutionJob) -> list[Message] | None:
    """For a retry attempt (``job.retry_of``) whose prompt the failed attempt already wrote:
    the conversation to continue from, ending with that prompt (the failed attempt's empty
    error reply left out); None otherwise (the prompt is appended as usual)."""
    if job.retry_of is None or not history:
        return None
    messages = list(history)
    last = messages[-1]
    if (
        isinstance(last, AssistantMessage)
        and last.stop_reason in ("error", "aborted")
        and not last.text.strip()
        and not any(isinstance(b, ToolCall) for b in last.content)
    ):
        messages.pop()
    if messages and isinstance(messages[-1], UserMessage):
        content = messages[-1].content
        # (the first attempt may have put task notices before the prompt)
        if content == job.prompt or (
            content.startswith("[notice: task ") and content.endswith("\n\n" + job.prompt)
        ):
            return messages
    return None


def _known_secrets(home: Path, environ: Mapping[str, str] | None) -> tuple[str, ...]:
    """The secret values memory must never store: secrets.env's values and the environment's
    API keys and tokens (8 characters or more)."""
    values = list(read_secrets(home).values())
    for name, value in (environ or {}).items():
        if name.endswith(("_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD")):
            values.append(value)
    return tuple(dict.fromkeys(v for v in values if len(v) >= 8))


def _usable_skills(catalog: SkillCatalog) -> list[SkillSummary]:
    """The skills to list in the prompt; none when the skills directory cannot be read (a
    corrupt lockfile, an unwritable home): the run goes on without them."""
    try:
        return catalog.enabled()
    except (SkillsError, OSError):
        return []


def _error_code(kind: str) -> ErrorCode:
    """The typed code of an agent error kind (lemon_ai's ErrorKind values, or max_turns)."""
    return _ERROR_CODES.get(kind, ErrorCode.EXECUTOR_FAILED)


def _clip(text: str) -> str:
    if len(text) <= _MAX_ACTION_TEXT:
        return text
    return text[:_MAX_ACTION_TEXT] + f"... [{len(text) - _MAX_ACTION_TEXT} more characters]"


def _forward(
    event: AgentEvent,
    sink: ExecutionSink,
    cards: dict[str, dict[str, Any]] | None = None,
    mcp: Mapping[str, Mapping[str, str]] | None = None,
) -> None:
    """Map one agent event to run events (text deltas and tool actions); ``cards`` are the web
    tools' card details by tool call id (taken when the call's action completes); ``mcp`` names
    each MCP tool's server and tool (the card's ``detail["mcp"]``: which server it came from)."""
    cards = {} if cards is None else cards
    origin = mcp.get(getattr(event, "name", ""), None) if mcp else None
    if isinstance(event, MessageUpdateEvent):
        inner = event.event
        if isinstance(inner, TextDeltaEvent) and inner.delta:
            sink.delta(inner.delta)
        return
    if isinstance(event, ToolExecutionStartEvent):
        args = event.arguments if isinstance(event.arguments, Mapping) else {}
        started: dict[str, Any] = {"tool": event.name, "arguments": dict(args)}
        if origin is not None:
            started["mcp"] = dict(origin)
        sink.action(
            id=event.tool_call_id,
            kind=_ACTION_KIND.get(event.name, ActionKind.TOOL),
            title=_title(event.name, args),
            detail=started,
            phase="started",
        )
    elif isinstance(event, ToolExecutionUpdateEvent):
        sink.action(
            id=event.tool_call_id,
            kind=_ACTION_KIND.get(event.name, ActionKind.TOOL),
            title=event.name,
            phase="updated",
            message=_clip(event.update),
        )
    elif isinstance(event, ToolExecutionEndEvent):
        result = event.result
        detail: dict[str, Any] = {"tool": event.name, "duration_s": round(event.duration_s, 6)}
        card = cards.pop(event.tool_call_id, None) if event.name in _WEB_TOOLS else None
        if card is not None:  # the card: URL, status, size, time, flags
            detail["web"] = card
        if origin is not None:
            detail["mcp"] = dict(origin)
        sink.action(
            id=event.tool_call_id,
            kind=_ACTION_KIND.get(event.name, ActionKind.TOOL),
            title=event.name,
            detail=detail,
            phase="completed",
            ok=not result.is_error,
            message=_clip(result.content),
        )


def _title(name: str, args: Mapping[str, Any]) -> str:
    if name == "bash":
        return f"$ {_clip(str(args.get('command', '')))}"
    if name == "web_fetch":
        return f"fetch {_clip(str(args.get('url', '')))}"
    if name == "web_search":
        return f"search {_clip(str(args.get('query', '')))}"
    if name == "browser":
        return f"browser {args.get('action', '')} {_clip(str(args.get('url', '')))}".rstrip()
    path = args.get("path")
    if isinstance(path, str):
        return f"{name} {path}"
    return name
