"""The agent and its runs: the loop that alternates model calls and tool batches.

One run: ``agent_start``; then turns until the model stops calling tools. A turn builds the
context (system prompt, the whole conversation, the tool specs), streams one model response, runs
the requested tool calls in parallel (at most ``max_tool_concurrency`` at once, results appended
in the order the model made the calls), and ends. Between turns the steering queue is drained
into the conversation; when the model stops, queued follow-ups start another turn.

Guarantees:

* every tool call in the conversation gets exactly one result (an aborted or failed tool gets an
  error result), so the conversation stays valid for the next model call;
* a tool never crashes the run: unknown tool, malformed or schema-violating arguments, a raised
  exception all become error results the model sees;
* abort is cooperative and bounded: checked before each model call and tool batch, it cancels an
  in-flight model stream at once and cancels tools that have not stopped ``abort_grace`` seconds
  after the signal;
* ``agent_end`` is always the last event, and the event stream is then closed;
* a response cut by the output-token limit inside a tool call (the call is ``truncated``) never
  runs a tool and never loops: the first time the same request is sent again with a doubled
  ``max_tokens`` (up to the model's catalogue maximum, at most once per run), otherwise the
  model is told its call was cut and asked to work in smaller pieces; more than
  ``max_truncated_retries`` such responses in a row stop the run with
  :class:`TruncatedToolCallError`. Each case emits ``tool_call_truncated``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, TypeVar

from lemon_agent.abort import AbortSignal
from lemon_agent.config import AgentConfig, AgentResult
from lemon_agent.errors import (
    AbortedError,
    AgentBusyError,
    AgentUsageError,
    QueueFullError,
    ToolError,
    TruncatedToolCallError,
)
from lemon_agent.events import (
    AgentEndEvent,
    AgentErrorEvent,
    AgentEvent,
    AgentStartEvent,
    CanceledEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    RunOutcome,
    ToolCallTruncatedEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TruncationAction,
    TurnEndEvent,
    TurnStartEvent,
)
from lemon_agent.stream import EventStream, EventStreamStatistics
from lemon_agent.tools import ToolContext, ToolResult
from lemon_ai import (
    AssistantContent,
    AssistantMessage,
    Context,
    Cost,
    DoneEvent,
    ErrorEvent,
    Message,
    ProtocolError,
    ProviderError,
    StartEvent,
    StreamOptions,
    TextContent,
    TextDeltaEvent,
    ThinkingContent,
    ThinkingDeltaEvent,
    ToolCall,
    ToolCallEndEvent,
    ToolResultMessage,
    Usage,
    UserMessage,
)

__all__ = ["Agent", "AgentRun", "AgentStatistics"]

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentStatistics:
    running: bool
    messages: int
    steering_queued: int
    steering_capacity: int
    follow_ups_queued: int
    follow_up_capacity: int
    events: EventStreamStatistics | None


def _cancel(task: asyncio.Task[Any]) -> None:
    task.cancel()


class _Partial:
    """What the model streamed so far, kept outside the streaming task so an abort keeps it."""

    __slots__ = ("calls", "text", "thinking")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.thinking: list[str] = []
        self.calls: list[ToolCall] = []

    def message(self, config: AgentConfig, reason: str) -> AssistantMessage:
        content: list[AssistantContent] = []
        if self.thinking:
            content.append(ThinkingContent(thinking="".join(self.thinking)))
        if self.text:
            content.append(TextContent(text="".join(self.text)))
        return AssistantMessage(
            content=tuple(content),
            stop_reason="aborted",
            model=config.model.id,
            provider=config.model.provider,
            error_message=reason,
        )


def _without_tool_calls(message: AssistantMessage) -> AssistantMessage:
    content = tuple(block for block in message.content if not isinstance(block, ToolCall))
    return AssistantMessage(
        content=content,
        stop_reason=message.stop_reason,
        usage=message.usage,
        cost=message.cost,
        model=message.model,
        provider=message.provider,
        error_message=message.error_message,
    )


def _smaller_pieces(tool: str, budget: int) -> str:
    """What the model is told after its tool call was cut by the output limit."""
    return (
        f"Your last response was cut off by the output limit ({budget} tokens) while you were "
        f"still writing the arguments of a call to the {tool!r} tool, so that call was not run. "
        "Do the work in smaller pieces: split it into several tool calls whose arguments are "
        "short (for example, write a large file in parts and add the rest with further edits)."
    )


class Agent:
    """A conversation with a model and tools; runs one :class:`AgentRun` at a time.

    The conversation (``messages``) persists across runs and grows with them; bounding it over
    many runs (compaction) is the caller's business. ``steer`` and ``follow_up`` may be called at
    any time; queued messages are taken by the current run (or the next one).
    """

    def __init__(self, config: AgentConfig, *, messages: Sequence[Message] = ()) -> None:
        self._config = config
        self._messages: list[Message] = list(messages)
        self._steering: deque[UserMessage] = deque()
        self._follow_ups: deque[UserMessage] = deque()
        self._run: AgentRun | None = None

    @property
    def config(self) -> AgentConfig:
        return self._config

    @property
    def messages(self) -> tuple[Message, ...]:
        """The conversation so far."""
        return tuple(self._messages)

    @property
    def running(self) -> bool:
        return self._run is not None and not self._run.done

    def steer(self, text: str) -> None:
        """Queue a message injected before the next model call (after the current tool batch)."""
        if len(self._steering) >= self._config.steering_capacity:
            raise QueueFullError(
                f"steering queue is full ({self._config.steering_capacity} messages); wait for the "
                "run to take them or abort it"
            )
        self._steering.append(UserMessage(content=text))

    def follow_up(self, text: str) -> None:
        """Queue a message that starts another turn when the model would otherwise stop."""
        if len(self._follow_ups) >= self._config.follow_up_capacity:
            raise QueueFullError(
                f"follow-up queue is full ({self._config.follow_up_capacity} messages); wait for "
                "the run to take them"
            )
        self._follow_ups.append(UserMessage(content=text))

    def abort(self, reason: str = "aborted") -> None:
        """Abort the current run, if any."""
        if self._run is not None:
            self._run.abort(reason)

    def start(self, prompt: str | None = None, *, run_id: str | None = None) -> AgentRun:
        """Start a run with ``prompt`` (or with only the queued messages).

        Use the run as an async context manager (leaving it cancels an unfinished run) and
        iterate it for events, or ``await run.result()``. Raises :class:`AgentBusyError` if a run
        is active.
        """
        if self.running:
            raise AgentBusyError("the agent is already running; abort it or wait for its result")
        last = self._messages[-1] if self._messages else None
        resumable = isinstance(last, UserMessage | ToolResultMessage)
        if prompt is None and not self._steering and not self._follow_ups and not resumable:
            raise AgentUsageError(
                "nothing to run: give a prompt, queue a steering or follow-up message, or "
                "continue a conversation that ends with a user message or tool result"
            )
        run = AgentRun(self, prompt, run_id or f"run_{uuid.uuid4().hex}")
        self._run = run
        run._start()
        return run

    async def prompt(self, prompt: str | None = None) -> AgentResult:
        """Run ``prompt`` to the end, discarding events; return the result."""
        async with self.start(prompt) as run:
            async for _ in run:
                pass
            return await run.result()

    def statistics(self) -> AgentStatistics:
        """A snapshot of queue depths and the current run's event stream."""
        return AgentStatistics(
            running=self.running,
            messages=len(self._messages),
            steering_queued=len(self._steering),
            steering_capacity=self._config.steering_capacity,
            follow_ups_queued=len(self._follow_ups),
            follow_up_capacity=self._config.follow_up_capacity,
            events=self._run.events.statistics() if self._run is not None else None,
        )


class AgentRun:
    """One run of an agent: owns its task, its abort signal and its bounded event stream."""

    def __init__(self, agent: Agent, prompt: str | None, run_id: str) -> None:
        self._agent = agent
        self._config = agent.config
        self._prompt = prompt
        self.run_id = run_id
        self.signal = AbortSignal()
        self.events = EventStream(
            capacity=self._config.event_capacity, policy=self._config.overflow
        )
        self._task: asyncio.Task[AgentResult] | None = None
        self._added: list[Message] = []
        self._usage = Usage()
        self._cost = Cost()
        self._turns = 0
        self._options: StreamOptions = self._config.options
        self._budget_raised = False
        self._truncations = 0  # responses in a row cut inside a tool call

    # -- ownership ------------------------------------------------------------------------------

    def _start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._main(), name=self.run_id)

    @property
    def done(self) -> bool:
        return self._task is not None and self._task.done()

    def abort(self, reason: str = "aborted") -> None:
        """Abort cooperatively (see :class:`AbortSignal`)."""
        self.signal.abort(reason)

    async def result(self) -> AgentResult:
        """Wait for the run to end and return its result (never raises for run failures)."""
        assert self._task is not None
        return await asyncio.shield(self._task)

    def __aiter__(self) -> EventStream:
        return self.events.__aiter__()

    async def __aenter__(self) -> AgentRun:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._task is not None
        if not self._task.done():
            self.abort("run context exited")
            self.events.close()  # nobody reads any more: never block the run on its stream
            self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise

    # -- the loop -------------------------------------------------------------------------------

    async def _emit(self, event: AgentEvent) -> None:
        await self.events.publish(event)

    async def _append(self, message: Message) -> None:
        self._agent._messages.append(message)
        self._added.append(message)
        await self._emit(MessageStartEvent(message=message))
        await self._emit(MessageEndEvent(message=message))

    async def _main(self) -> AgentResult:
        outcome: RunOutcome = "completed"
        error: BaseException | None = None
        try:
            await self._emit(AgentStartEvent(run_id=self.run_id))
            outcome, error = await self._loop()
        except AbortedError as exc:
            outcome = "aborted"
            await self._emit(CanceledEvent(reason=exc.reason))
        except Exception as exc:  # a bug in a provider or here: report it, never crash
            outcome, error = "error", exc
            await self._emit(
                AgentErrorEvent(kind="internal", message=f"{type(exc).__name__}: {exc}", error=exc)
            )
        finally:
            if self._agent._run is self:
                self._agent._run = None
        result = AgentResult(
            run_id=self.run_id,
            outcome=outcome,
            messages=tuple(self._added),
            usage=self._usage,
            cost=self._cost,
            turns=self._turns,
            error=error,
            abort_reason=self.signal.reason if outcome == "aborted" else None,
        )
        await self._emit(
            AgentEndEvent(
                run_id=self.run_id,
                outcome=outcome,
                messages=result.messages,
                usage=self._usage,
                cost=self._cost,
            )
        )
        self.events.close()
        return result

    def _drain(self, queue: deque[UserMessage]) -> list[UserMessage]:
        items = list(queue)
        queue.clear()
        return items

    async def _loop(self) -> tuple[RunOutcome, BaseException | None]:
        agent, config = self._agent, self._config
        pending: list[UserMessage] = []
        if self._prompt is not None:
            pending.append(UserMessage(content=self._prompt))
        pending += self._drain(agent._steering)
        if not pending:
            pending += self._drain(agent._follow_ups)
        while True:
            for message in pending:
                await self._append(message)
            pending = []
            if self._turns >= config.max_turns:
                limit = (
                    f"the run reached its limit of {config.max_turns} model calls "
                    "(AgentConfig.max_turns) and was stopped"
                )
                await self._emit(AgentErrorEvent(kind="max_turns", message=limit))
                return "max_turns", None
            self.signal.raise_if_aborted()
            self._turns += 1
            turn = self._turns
            await self._emit(TurnStartEvent(turn=turn))
            assistant, failure = await self._model_turn(turn)
            if failure is not None:
                await self._emit(TurnEndEvent(turn=turn, message=assistant, tool_results=()))
                await self._emit(
                    AgentErrorEvent(kind=failure.kind.value, message=str(failure), error=failure)
                )
                return "error", failure
            cut = assistant.truncated_tool_call
            if cut is not None:
                stop = await self._truncated(turn, assistant, cut)
                await self._emit(TurnEndEvent(turn=turn, message=assistant, tool_results=()))
                if stop is not None:
                    await self._emit(AgentErrorEvent(kind=stop.kind, message=str(stop), error=stop))
                    return "error", stop
                pending = self._drain(agent._steering)
                continue
            self._truncations = 0
            calls = assistant.tool_calls
            results: tuple[ToolResultMessage, ...] = ()
            if calls:
                results = await self._tool_batch(turn, assistant, calls)
            await self._emit(TurnEndEvent(turn=turn, message=assistant, tool_results=results))
            pending = self._drain(agent._steering)
            if pending or calls:
                continue
            pending = self._drain(agent._follow_ups)
            if not pending:
                return "completed", None

    async def _truncated(
        self, turn: int, assistant: AssistantMessage, cut: ToolCall
    ) -> TruncatedToolCallError | None:
        """Decide what follows a response cut inside a tool call; the error if the run stops."""
        config = self._config
        self._truncations += 1
        ceiling = config.model.max_tokens
        budget = self._options.max_tokens or ceiling

        def event(action: TruncationAction, raised: int | None = None) -> ToolCallTruncatedEvent:
            return ToolCallTruncatedEvent(
                turn=turn,
                tool_call_id=cut.id,
                tool_name=cut.name,
                max_tokens=budget,
                attempt=self._truncations,
                action=action,
                next_max_tokens=raised,
            )

        if self._truncations > config.max_truncated_retries:
            await self._emit(event("stop"))
            return TruncatedToolCallError(
                tool_name=cut.name, max_tokens=budget, attempts=self._truncations
            )
        if not self._budget_raised and budget < ceiling:
            # The cut response is not kept: the same request goes out again with more room.
            raised = min(budget * 2, ceiling)
            self._budget_raised = True
            self._options = replace(self._options, max_tokens=raised)
            await self._emit(event("raise_budget", raised))
            return None
        await self._emit(event("ask_smaller"))
        kept = _without_tool_calls(assistant)
        if kept.content:
            self._agent._messages.append(kept)
            self._added.append(kept)
        await self._append(UserMessage(content=_smaller_pieces(cut.name, budget)))
        return None

    async def _abortable(
        self, coro: Coroutine[Any, Any, T], on_abort: Callable[[asyncio.Task[T]], None]
    ) -> tuple[bool, T | None]:
        """Run ``coro`` as a task that ``on_abort`` may cancel; (aborted?, result)."""
        task = asyncio.get_running_loop().create_task(coro)
        remove = self.signal.add_callback(lambda: on_abort(task))
        try:
            return False, await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                task.cancel()  # we are being cancelled ourselves: take the child down too
                raise
            if not task.cancelled():
                raise
            return True, None
        finally:
            remove()

    async def _model_turn(self, turn: int) -> tuple[AssistantMessage, ProviderError | None]:
        config = self._config
        context = Context(
            system_prompt=config.system_prompt,
            messages=tuple(self._agent._messages),
            tools=config.tools.specs(),
        )
        partial = _Partial()
        empty = AssistantMessage(model=config.model.id, provider=config.model.provider)
        await self._emit(MessageStartEvent(message=empty))
        aborted, outcome = await self._abortable(self._consume(turn, context, partial), _cancel)
        if aborted or outcome is None:
            reason = self.signal.reason or "aborted"
            message = partial.message(config, reason)
            await self._record(message, turn, keep=bool(message.content))
            await self._emit(TurnEndEvent(turn=turn, message=message, tool_results=()))
            raise AbortedError(reason)
        message, failure = outcome
        if failure is not None:
            message = _without_tool_calls(message)  # calls without results would be invalid
            await self._record(message, turn)
            return message, failure
        await self._record(message, turn)
        return message, None

    async def _record(self, message: AssistantMessage, turn: int, *, keep: bool = True) -> None:
        keep = keep and message.truncated_tool_call is None  # _truncated decides what is kept
        if keep:
            self._agent._messages.append(message)
            self._added.append(message)
        self._usage = self._usage + message.usage
        self._cost = self._cost + message.cost
        await self._emit(MessageEndEvent(message=message))

    async def _consume(
        self, turn: int, context: Context, partial: _Partial
    ) -> tuple[AssistantMessage, ProviderError | None]:
        config = self._config
        emit = self.events.publish
        async with aclosing(config.provider.stream(config.model, context, self._options)) as s:
            async for event in s:
                if isinstance(event, TextDeltaEvent):
                    partial.text.append(event.delta)
                elif isinstance(event, DoneEvent):
                    return event.message, None
                elif isinstance(event, ErrorEvent):
                    return event.partial, event.error
                elif isinstance(event, StartEvent):
                    continue
                elif isinstance(event, ThinkingDeltaEvent):
                    partial.thinking.append(event.delta)
                elif isinstance(event, ToolCallEndEvent):
                    partial.calls.append(event.tool_call)
                await emit(MessageUpdateEvent(turn=turn, event=event))
        failure = ProtocolError("the provider's stream ended without a done or error event")
        return partial.message(config, str(failure)), failure

    async def _tool_batch(
        self, turn: int, assistant: AssistantMessage, calls: tuple[ToolCall, ...]
    ) -> tuple[ToolResultMessage, ...]:
        self.signal.raise_if_aborted()
        results: list[ToolResultMessage | None] = [None] * len(calls)
        started: set[int] = set()
        grace: list[asyncio.TimerHandle] = []
        loop = asyncio.get_running_loop()

        def on_abort(task: asyncio.Task[None]) -> None:
            grace.append(loop.call_later(self._config.abort_grace, task.cancel))

        try:
            aborted, _ = await self._abortable(self._run_calls(calls, results, started), on_abort)
        finally:
            for handle in grace:
                handle.cancel()
        reason = self.signal.reason or "aborted"
        final: list[ToolResultMessage] = []
        for position, call in enumerate(calls):
            result = results[position]
            if result is None:
                result = ToolResultMessage(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    content=f"Tool call was not completed: the run was aborted ({reason}).",
                    is_error=True,
                )
                if position in started:
                    await self._emit(
                        ToolExecutionEndEvent(
                            tool_call_id=call.id, name=call.name, result=result, duration_s=0.0
                        )
                    )
            final.append(result)
        for result in final:
            await self._append(result)
        if aborted or self.signal.aborted:
            await self._emit(TurnEndEvent(turn=turn, message=assistant, tool_results=tuple(final)))
            raise AbortedError(reason)
        return tuple(final)

    async def _run_calls(
        self,
        calls: tuple[ToolCall, ...],
        results: list[ToolResultMessage | None],
        started: set[int],
    ) -> None:
        limit = asyncio.Semaphore(self._config.max_tool_concurrency)

        async def one(position: int, call: ToolCall) -> None:
            async with limit:
                if self.signal.aborted:
                    return
                started.add(position)
                await self._emit(
                    ToolExecutionStartEvent(
                        tool_call_id=call.id, name=call.name, arguments=dict(call.arguments)
                    )
                )
                begin = time.perf_counter()
                result = await self._execute(call)
                results[position] = result
                await self._emit(
                    ToolExecutionEndEvent(
                        tool_call_id=call.id,
                        name=call.name,
                        result=result,
                        duration_s=time.perf_counter() - begin,
                    )
                )

        async with asyncio.TaskGroup() as group:
            for position, call in enumerate(calls):
                group.create_task(one(position, call))

    async def _execute(self, call: ToolCall) -> ToolResultMessage:
        registry = self._config.tools

        def error(text: str) -> ToolResultMessage:
            return ToolResultMessage(
                tool_call_id=call.id, tool_name=call.name, content=text, is_error=True
            )

        tool = registry.get(call.name)
        if tool is None:
            available = ", ".join(registry.names()) or "none"
            return error(f"Unknown tool {call.name!r}. Available tools: {available}.")
        if call.parse_error is not None:
            return error(
                f"Invalid arguments for tool {call.name!r}: {call.parse_error}. Send a JSON "
                "object that matches the tool's parameters schema."
            )
        problem = registry.validate(call.name, call.arguments)
        if problem is not None:
            return error(f"Invalid arguments for tool {call.name!r}: {problem}")

        async def update(text: str) -> None:
            await self._emit(
                ToolExecutionUpdateEvent(tool_call_id=call.id, name=call.name, update=text)
            )

        context = ToolContext(
            tool_call_id=call.id,
            name=call.name,
            arguments=call.arguments,
            signal=self.signal,
            update=update,
        )
        try:
            outcome = await tool.execute(context)
        except ToolError as exc:
            return error(str(exc) or type(exc).__name__)
        except AbortedError as exc:
            return error(f"Tool {call.name!r} stopped: the run was aborted ({exc.reason}).")
        except Exception as exc:  # a tool bug goes back to the model, never crashes the run
            return error(f"Tool {call.name!r} failed: {type(exc).__name__}: {exc}")
        result = outcome if isinstance(outcome, ToolResult) else ToolResult(content=str(outcome))
        content = result.content
        limit = self._config.max_tool_result_chars
        if len(content) > limit:
            content = (
                content[:limit] + f"\n[... truncated: {len(result.content) - limit} more "
                f"characters of {len(result.content)}]"
            )
        return ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=content,
            is_error=result.is_error,
            images=result.images,
        )
