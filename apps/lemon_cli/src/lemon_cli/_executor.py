"""A built-in fallback executor: the lemon_agent loop with the coding tools, and steering.

Used when the ``lemon.executor`` entry point group has no ready executor (see
:mod:`lemon_cli._boot`), or when ``Runtime(settings={"executor": "built-in"})`` asks for it.
Its prepared run implements ``SteerableExecution`` (``steer(text)`` into the live agent run).
It keeps each
native session's conversation in memory (at most ``max_sessions``, least recently used
dropped) and its text transcript in the store (table ``cli_transcripts``), so a resumed
session continues the same conversation, also in a later process.

Tool policy: ``deny`` refuses a tool, ``require_approval`` asks
before each call through :class:`ExecApprovals` (default: write, edit and bash ask).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from coding_agent import Workspace, coding_tools
from lemon_agent import (
    Agent,
    AgentConfig,
    MessageUpdateEvent,
    Tool,
    ToolContext,
    ToolError,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolRegistry,
    ToolResult,
)
from lemon_ai import AssistantMessage, Message, Provider, TextContent, TextDeltaEvent, UserMessage
from lemon_core.approvals import ExecApprovals
from lemon_core.config import Config
from lemon_core.execution import (
    ExecutionJob,
    ExecutionResult,
    ExecutionSink,
    ResumeToken,
    ToolPolicy,
)
from lemon_core.store import Store

__all__ = ["DEFAULT_TOOL_POLICY", "TRANSCRIPTS_TABLE", "AgentExecutor"]

#: Read-only tools run; write, edit and bash ask first.
DEFAULT_TOOL_POLICY: Final = ToolPolicy(require_approval=frozenset({"write", "edit", "bash"}))
TRANSCRIPTS_TABLE: Final = "cli_transcripts"
_MAX_TRANSCRIPT: Final = 400  # entries kept per session (oldest dropped)
_PREVIEW: Final = 200

SYSTEM_PROMPT: Final = (
    "You are Lemon, a coding assistant working in the user's directory. Use the tools to read "
    "and change files and run commands; be brief."
)


def _preview(value: object, limit: int = _PREVIEW) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class AgentExecutor:
    """Runs a job through :class:`lemon_agent.Agent` with the coding tools."""

    def __init__(
        self,
        *,
        config: Config,
        home: Path,
        store: Store | None,
        approvals: ExecApprovals | None,
        environ: Mapping[str, str] | None = None,
        max_sessions: int = 64,
    ) -> None:
        self._config = config
        self._home = home
        self._store = store
        self._approvals = approvals
        self._environ = environ
        self._max_sessions = max_sessions
        self._sessions: OrderedDict[str, tuple[Message, ...]] = OrderedDict()

    async def prepare(self, job: ExecutionJob) -> _PreparedRun:
        from lemon_cli._models import model_ref, resolve_model

        ref = model_ref(self._config, _str_or_none(job.meta.get("model")))
        model, provider = resolve_model(self._config, ref, self._home, self._environ)
        session_id = job.resume.value if job.resume is not None else job.run_id
        history = await self._history(session_id)
        policy = job.tool_policy if job.tool_policy is not None else DEFAULT_TOOL_POLICY
        tools = ToolRegistry(self._tools(job, policy))
        agent = Agent(
            AgentConfig(model=model, provider=provider, system_prompt=SYSTEM_PROMPT, tools=tools),
            messages=history,
        )
        return _PreparedRun(self, job, agent, provider, session_id)

    def statistics(self) -> dict[str, int]:
        return {"sessions_in_memory": len(self._sessions)}

    # -- internals ---------------------------------------------------------------------------

    async def _history(self, session_id: str) -> tuple[Message, ...]:
        cached = self._sessions.get(session_id)
        if cached is not None:
            self._sessions.move_to_end(session_id)
            return cached
        if self._store is None:
            return ()
        stored = await self._store.get(TRANSCRIPTS_TABLE, session_id)
        messages: list[Message] = []
        for entry in stored or ():
            if entry.get("role") == "user":
                messages.append(UserMessage(content=str(entry.get("text", ""))))
            elif entry.get("role") == "assistant":
                text = str(entry.get("text", ""))
                messages.append(AssistantMessage(content=(TextContent(text=text),)))
        return tuple(messages)

    async def _remember(self, session_id: str, messages: tuple[Message, ...]) -> None:
        self._sessions[session_id] = messages
        self._sessions.move_to_end(session_id)
        while len(self._sessions) > self._max_sessions:
            self._sessions.popitem(last=False)
        if self._store is None:
            return
        transcript: list[dict[str, str]] = []
        for message in messages:
            if isinstance(message, UserMessage):
                transcript.append({"role": "user", "text": message.content})
            elif isinstance(message, AssistantMessage) and message.text:
                transcript.append({"role": "assistant", "text": message.text})
        await self._store.put(TRANSCRIPTS_TABLE, session_id, transcript[-_MAX_TRANSCRIPT:])

    def _tools(self, job: ExecutionJob, policy: ToolPolicy) -> list[Tool]:
        workspace = Workspace(cwd=Path(job.cwd))
        out: list[Tool] = []
        for tool in coding_tools(workspace):
            if tool.name in policy.deny or (
                policy.allow is not None and tool.name not in policy.allow
            ):
                continue
            if tool.name in policy.require_approval:
                tool = replace(tool, execute=self._gated(tool, job))
            out.append(tool)
        return out

    def _gated(self, tool: Tool, job: ExecutionJob) -> Any:
        inner = tool.execute
        approvals = self._approvals

        async def execute(ctx: ToolContext) -> ToolResult | str:
            if approvals is None:
                raise ToolError(f"{tool.name} needs an approval and nobody can give one here")
            outcome = await approvals.request(
                tool=tool.name,
                run_id=job.run_id,
                session_key=job.session_key,
                tool_call_id=ctx.tool_call_id,
                action={"arguments": dict(ctx.arguments)},
            )
            if not outcome.approved:
                raise ToolError(
                    f"the user did not approve {tool.name} ({outcome.decision.value}); "
                    "do not retry it"
                )
            return await inner(ctx)

        return execute


class _PreparedRun:
    def __init__(
        self,
        owner: AgentExecutor,
        job: ExecutionJob,
        agent: Agent,
        provider: Provider,
        session_id: str,
    ) -> None:
        self._owner = owner
        self._job = job
        self._agent = agent
        self._provider = provider
        self._session_id = session_id
        self._live = False

    def steer(self, text: str) -> bool:
        """Offer ``text`` to the running agent (SteerableExecution); False unless it runs."""
        if not self._live or not self._agent.running or not text.strip():
            return False
        try:
            self._agent.steer(text)
        except Exception:  # e.g. the agent's steering queue is full
            return False
        return True

    async def execute(self, sink: ExecutionSink) -> ExecutionResult:
        job = self._job
        token = ResumeToken.native(self._session_id)
        sink.started(resume=token)
        self._live = True
        try:
            async with self._agent.start(job.prompt, run_id=job.run_id) as run:
                async for event in run:
                    if isinstance(event, MessageUpdateEvent):
                        if isinstance(event.event, TextDeltaEvent) and event.event.delta:
                            sink.delta(event.event.delta)
                    elif isinstance(event, ToolExecutionStartEvent):
                        sink.action(
                            id=event.tool_call_id,
                            kind="tool",
                            title=f"{event.name} {_preview(event.arguments, 80)}",
                            detail={"name": event.name, "arguments": event.arguments},
                            phase="started",
                        )
                    elif isinstance(event, ToolExecutionEndEvent):
                        sink.action(
                            id=event.tool_call_id,
                            kind="tool",
                            title=event.name,
                            detail={"name": event.name},
                            phase="completed",
                            ok=not event.result.is_error,
                            message=_preview(event.result.content),
                        )
                result = await run.result()
        finally:
            self._live = False
            await self._provider.aclose()
        await self._owner._remember(self._session_id, self._agent.messages)
        final = result.final
        answer = final.text if final is not None else ""
        ok = result.outcome == "completed"
        error = None
        if not ok:
            error = (
                str(result.error)
                if result.error is not None
                else (result.abort_reason or result.outcome)
            )
        usage = {
            "input_tokens": result.usage.input_tokens,
            "output_tokens": result.usage.output_tokens,
        }
        return ExecutionResult(ok=ok, answer=answer, error=error, resume=token, usage=usage)


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
