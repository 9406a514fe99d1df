"""The native executor: runs a coding session for the gateway (``lemon.executor`` entry point).

:meth:`CodingExecutor.prepare` only builds the execution (nothing to release if it fails);
:meth:`CodingExecution.execute`:

1. opens the session: a new transcript, or the one named by the native resume token. A
   missing or corrupt transcript fails the run with a clear error on an *explicit* resume; on an
   *automatic* resume (``job.meta["resume_mode"] == "auto"``, set by whoever looked the token up
   in chat state) it starts a fresh session and reports a ``note`` action saying why;
2. reports the native resume token (engine ``"lemon"``, value = the session id) through
   ``sink.started``, and awaits ``sink.session_bound()`` when the sink records it
   (:class:`~lemon_core.execution.SessionBindingSink`: the gateway maps the session key to it);
   before the model is asked anything the prompt is appended to the transcript, so a crash
   mid-answer leaves the prompt in the session;
3. runs the lemon_agent loop with the coding tools gated by the run's tool policy (approvals via
   :class:`~lemon_core.ExecApprovals`) and the system prompt built from the workspace;
4. maps agent events to run events: text deltas to ``sink.delta``; tool executions to
   ``engine_action`` (kind ``command`` for bash, ``file_change`` for write/edit, ``tool``
   otherwise; phases started / updated / completed); approvals to ``approval`` actions;
5. appends every new message to the transcript at the end of each turn (durable before the
   next turn starts and before the completion is returned), and returns an ``ExecutionResult``
   with the answer, the resume token and usage.

Steering (:meth:`CodingExecution.steer`) puts a message into the running agent loop's steering
queue; it is injected before the next model call and persisted there. A steer that arrives after
the loop's last drain still gets answered: the execution runs the agent once more with it.

Cancellation (the gateway cancels the task awaiting ``execute``) aborts the agent run (the bash
process group is killed), keeps what was said in the transcript, expires the run's pending
approvals and re-raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from coding_agent._sections import FileAccessConfig
from coding_agent.access import FileAccess
from coding_agent.compaction import (
    CompactionInfo,
    CompactionSettings,
    Compactor,
    run_limits,
    tool_result_cap,
)
from coding_agent.environment import tool_environment_for
from coding_agent.errors import (
    CodingAgentUsageError,
    CompactionError,
    CorruptTranscriptError,
    TranscriptError,
)
from coding_agent.policy import DEFAULT_TOOL_POLICY, ApprovalHooks, GateContext, check_gate
from coding_agent.prompt import PromptLimits, build_system_prompt
from coding_agent.session import SessionStore, Transcript
from coding_agent.tools import TodoList, coding_tools
from coding_agent.transcript_mirror import TranscriptMirror
from coding_agent.workspace import CodingLimits, Workspace
from lemon_agent import (
    Agent,
    AgentConfig,
    AgentEndEvent,
    AgentErrorEvent,
    AgentEvent,
    MessageUpdateEvent,
    QueueFullError,
    Tool,
    ToolContext,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    ToolRegistry,
    ToolResult,
    TurnEndEvent,
    TurnStartEvent,
)
from lemon_ai import (
    Cost,
    ImageContent,
    InvalidImageError,
    LemonAiError,
    Message,
    Model,
    Provider,
    RetryPolicy,
    TextDeltaEvent,
    UnknownModelError,
    Usage,
    UserMessage,
    check_images,
    decode_image,
    default_catalogue,
    offline_model,
    provider_for,
)
from lemon_core import ExecApprovals
from lemon_core.config import Config, ConfigError, lemon_home, load_config
from lemon_core.events import ApprovalDecision, ApprovalPending, ErrorCode, RunUsage
from lemon_core.execution import (
    ActionKind,
    ExecutionJob,
    ExecutionResult,
    ExecutionSink,
    ResumeToken,
    SessionBindingSink,
    ToolPolicy,
)
from lemon_core.home import Home
from lemon_skills import SkillCatalog, SkillsError, SkillsSettings, SkillSummary, read_skill_tool

__all__ = [
    "CodingExecution",
    "CodingExecutor",
    "ExecutorSettings",
    "ExecutorStatistics",
    "resolve_model",
]

_ACTION_KIND: Final[Mapping[str, ActionKind]] = {
    "bash": ActionKind.COMMAND,
    "write": ActionKind.FILE_CHANGE,
    "edit": ActionKind.FILE_CHANGE,
}
_MAX_ACTION_TEXT: Final = 2000
_DEFAULT_BASE_URL: Final[Mapping[str, str]] = {
    "openai_completions": "https://api.openai.com/v1",
    "anthropic_messages": "https://api.anthropic.com",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class _RunTools:
    """The tools of one run (its workspace and todo list) and its gate."""

    tools: Mapping[str, Tool]
    gate: GateContext


#: The current run's tools, set in the run's task before the agent starts (the agent's tasks
#: inherit it); the registry the agent sees is built once per executor and dispatches here.
_RUN_TOOLS: contextvars.ContextVar[_RunTools] = contextvars.ContextVar("coding_run_tools")


def _dispatcher(template: Tool) -> Tool:
    async def execute(ctx: ToolContext) -> ToolResult | str:
        run = _RUN_TOOLS.get()
        await check_gate(ctx, run.gate)
        return await run.tools[ctx.name].execute(ctx)

    return Tool(
        name=template.name,
        description=template.description,
        parameters=template.parameters,
        execute=execute,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutorSettings:
    """Defaults and bounds of coding runs."""

    approval_timeout_s: float | None = 300.0
    """How long a tool waits for an approval decision (``None``: no deadline)."""
    default_policy: ToolPolicy = DEFAULT_TOOL_POLICY
    """The policy of a run whose command, profile and context set none."""
    limits: CodingLimits = field(
        default_factory=lambda: CodingLimits(max_output_chars=200_000, bash_output_bytes=200_000)
    )
    """The tools' bounds; a run lowers the output bounds to fit its model's window
    (``compaction.tool_result_cap``)."""
    compaction: CompactionSettings = field(default_factory=CompactionSettings)
    """Automatic compaction and the tool result cap relative to the context window."""
    prompt_limits: PromptLimits = field(default_factory=PromptLimits)
    max_transcript_bytes: int = 32 * 1024 * 1024
    max_turns: int = 50
    steering_capacity: int = 64
    """Steering messages a run holds before the loop takes them (a full queue: ``steer`` ->
    False, nothing queued)."""
    cancel_grace_s: float = 5.0
    """How long a cancelled run may take to abort cooperatively before it is cancelled."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutorStatistics:
    """Counters of an executor since it was built."""

    runs_started: int
    runs_running: int
    runs_ok: int
    runs_failed: int
    runs_cancelled: int
    sessions_created: int
    sessions_resumed: int
    resumes_started_fresh: int
    """Automatic resumes whose transcript was missing or corrupt (a new session was started)."""
    compactions: int = 0
    """Compactions made by runs (automatic) and by :meth:`CodingExecutor.compact`."""
    compaction_retries: int = 0
    """Model requests retried once after a ``context_overflow`` answer and a compaction."""
    steers_accepted: int
    """Steering messages taken into a running agent loop (``CodingExecution.steer`` -> True)."""
    steers_refused: int
    """Steers refused: not started, finishing or finished, cancelled, queue full, empty text."""
    steers_dropped: int
    """Accepted steers never injected because the run then failed, hit its turn limit or was
    cancelled (they went down with the run)."""
    steer_continuations: int
    """Extra agent runs started for a steer that arrived after the loop's last drain."""
    transcripts_repaired: int = 0
    """Resumed transcripts whose torn lines were moved to a side file (the session went on)."""


def resolve_model(
    config: Config,
    override: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    retry: RetryPolicy | None = None,
) -> tuple[Model, Provider]:
    """The model and provider for a run: ``override`` (``"<provider>:<model>"``), else
    ``[defaults] model``, else the offline model.

    A provider configured in ``[providers.<name>]`` is reached with its ``kind`` and
    ``base_url`` and the key from its ``api_key_env``; the catalogue still supplies the context
    window and prices when it knows the model. Raises ``UnknownModelError`` for a reference
    neither the configuration nor the catalogue knows.
    """
    env = os.environ if environ is None else environ
    ref = override or config.defaults.model
    if not ref:
        model = offline_model()
        return model, provider_for(model)
    name, _, model_id = ref.partition(":")
    configured = config.providers.get(name)
    if configured is not None and configured.kind == "offline":
        model = offline_model()
        return model, provider_for(model)
    try:
        model = default_catalogue().resolve(ref)
    except UnknownModelError:
        if configured is None or not model_id:
            raise
        model = Model(
            provider=name,
            id=model_id,
            name=model_id,
            api=configured.kind,
            base_url=configured.base_url or _DEFAULT_BASE_URL[configured.kind],
        )
    key: str | None = None
    if configured is not None:
        model = replace(model, api=configured.kind, base_url=configured.base_url or model.base_url)
        if configured.api_key_env:
            key = env.get(configured.api_key_env) or None
    return model, provider_for(model, api_key=key, environ=env, retry=retry)


def _decode_images(raw: tuple[Mapping[str, Any], ...]) -> tuple[ImageContent, ...]:
    """The job's image mappings (``{"type": "image", "data": <base64>, "mime_type": ...}``)
    checked and decoded (lemon_ai's bounds); raises ``InvalidImageError`` saying which and why."""
    images: list[ImageContent] = []
    for number, item in enumerate(raw, start=1):
        label = "the image" if len(raw) == 1 else f"image {number}"
        kind = item.get("type", "image")
        data = item.get("data")
        mime_type = item.get("mime_type", item.get("media_type"))
        if kind != "image" or not isinstance(data, str) or not data:
            raise InvalidImageError(
                f"{label} is not an image attachment: expected "
                "{'type': 'image', 'data': <base64>, 'mime_type': 'image/png'}"
            )
        if mime_type is not None and not isinstance(mime_type, str):
            raise InvalidImageError(f"{label} has a mime_type that is not a string")
        images.append(decode_image(data, mime_type, label=label))
    result = tuple(images)
    check_images(result)
    return result


def _agent_id(job: ExecutionJob) -> str:
    if job.agent_id != "default":
        return job.agent_id
    parts = job.session_key.split(":")
    if len(parts) >= 2 and parts[0] == "agent" and parts[1]:
        return parts[1]
    return "default"


def _usable_skills(catalog: SkillCatalog) -> list[SkillSummary]:
    """The skills to list in the prompt; none when the skills directory cannot be read (a
    corrupt lockfile, an unwritable home): the run goes on without them."""
    try:
        return catalog.enabled()
    except (SkillsError, OSError):
        return []


def _clip(text: str) -> str:
    if len(text) <= _MAX_ACTION_TEXT:
        return text
    return text[:_MAX_ACTION_TEXT] + f"... [{len(text) - _MAX_ACTION_TEXT} more characters]"


class CodingExecutor:
    """The gateway's native executor (zero-argument construction for the entry point).

    ``home`` defaults to ``$LEMON_HOME`` (``~/.lemon``); ``model`` / ``provider`` override the
    configured model (tests, benchmarks; an injected provider is not closed by the executor);
    ``approvals`` is the approval channel (without it, tools that need approval are refused with
    an error the model sees); ``retry`` is handed to providers the executor builds.
    """

    def __init__(
        self,
        *,
        home: Path | None = None,
        model: Model | None = None,
        provider: Provider | None = None,
        approvals: ExecApprovals | None = None,
        settings: ExecutorSettings | None = None,
        retry: RetryPolicy | None = None,
        environ: Mapping[str, str] | None = None,
        transcript_mirror: TranscriptMirror | None = None,
    ) -> None:
        if (model is None) != (provider is None):
            raise CodingAgentUsageError("CodingExecutor: pass model and provider together")
        self._home = home
        self._transcript_mirror = transcript_mirror
        self._model = model
        self._provider = provider
        self.approvals = approvals
        self.settings = settings or ExecutorSettings()
        self._retry = retry
        self._environ = environ
        self._registry: ToolRegistry | None = None
        self._counts = dict.fromkeys(
            (
                "started", "ok", "failed", "cancelled", "created", "resumed", "fresh",
                "steers_accepted", "steers_refused", "steers_dropped", "steer_continuations",
                "repaired",
            ),
            0,
        )  # fmt: skip
        self._counts.update(compactions=0, compaction_retries=0)
        self._busy: Counter[str] = Counter()  # session id -> runs using its transcript

    def statistics(self) -> ExecutorStatistics:
        c = self._counts
        return ExecutorStatistics(
            runs_started=c["started"],
            runs_running=c["started"] - c["ok"] - c["failed"] - c["cancelled"],
            runs_ok=c["ok"],
            runs_failed=c["failed"],
            runs_cancelled=c["cancelled"],
            sessions_created=c["created"],
            sessions_resumed=c["resumed"],
            resumes_started_fresh=c["fresh"],
            compactions=c["compactions"],
            compaction_retries=c["compaction_retries"],
            steers_accepted=c["steers_accepted"],
            steers_refused=c["steers_refused"],
            steers_dropped=c["steers_dropped"],
            steer_continuations=c["steer_continuations"],
            transcripts_repaired=c["repaired"],
        )

    def tool_registry(self, workspace: Workspace) -> ToolRegistry:
        """The registry every run of this executor uses (schemas checked once): each tool
        dispatches to the current run's own tools after the run's policy and approvals."""
        if self._registry is None:
            templates = [*coding_tools(workspace), read_skill_tool(self.skills())]
            self._registry = ToolRegistry(_dispatcher(tool) for tool in templates)
        return self._registry

    @property
    def home(self) -> Path:
        if self._home is not None:
            return self._home
        return lemon_home(self._environ)

    def skills(self) -> SkillCatalog:
        """The skills of ``<home>/skills`` as runs see them (listed in the prompt, read with
        ``read_skill``)."""
        return SkillCatalog(SkillsSettings(home=self.home))

    def sessions(self) -> SessionStore:
        """Where transcripts live: ``<home>/agent/sessions``."""
        return SessionStore(
            Home(root=self.home).sessions,
            max_transcript_bytes=self.settings.max_transcript_bytes,
            mirror=self._transcript_mirror,  # with a shared store: transcripts shared too
        )

    async def prepare(self, job: ExecutionJob) -> CodingExecution:
        """Check the job's working directory and build the execution (nothing to release)."""
        if not await asyncio.to_thread(os.path.isdir, job.cwd):
            raise CodingAgentUsageError(
                f"run {job.run_id}: working directory {job.cwd} is missing or not a directory"
            )
        return CodingExecution(self, job)

    async def compact(
        self,
        session_id: str,
        *,
        cwd: str | None = None,
        model: str | None = None,
        instructions: str | None = None,
    ) -> CompactionInfo:
        """Compact session ``session_id`` now (``/compact``, ``lemon chat --compact``).

        Everything before the newest user message is replaced by a summary the model writes
        (the model given to the executor, else ``model`` = ``"<provider>:<model>"``, else the
        configured default, as for a run; ``cwd`` is where the configuration is looked up,
        default the current directory; ``instructions``: what the summary should focus on, as
        in ``/compact keep the API decisions``). The transcript gets a compaction entry; the
        original lines stay. ``compacted=False`` (with ``note``) when there is nothing older to
        summarise. Raises :class:`TranscriptError` (missing or corrupt session),
        :class:`CodingAgentUsageError` (a run of this executor is using the session) or
        :class:`CompactionError` (``code``: ``config_invalid``, ``model_unavailable``, or the
        summarisation request's error kind).
        """
        if self._busy[session_id]:
            raise CodingAgentUsageError(
                f"session {session_id} is in use by a running run; compact it after the run ends"
            )
        transcript, messages = await self.sessions().load(session_id)
        owned = False
        if self._model is not None and self._provider is not None:
            chosen, provider = self._model, self._provider
        else:
            try:
                config = (
                    await asyncio.to_thread(
                        load_config,
                        environ=self._environ,
                        cwd=Path(cwd) if cwd else Path.cwd(),
                        home=self._home,
                    )
                ).config
                chosen, provider = resolve_model(
                    config, model, environ=self._environ, retry=self._retry
                )
            except ConfigError as exc:
                raise CompactionError(f"config_invalid: {exc}", code="config_invalid") from exc
            except LemonAiError as exc:
                raise CompactionError(
                    f"model_unavailable: {type(exc).__name__}: {exc}", code="model_unavailable"
                ) from exc
            owned = True
        self._busy[session_id] += 1
        try:
            compactor = Compactor(
                model=chosen,
                provider=provider,
                transcript=transcript,
                settings=self.settings.compaction,
            )
            info = await compactor.compact(messages, reason="manual", instructions=instructions)
        finally:
            self._busy[session_id] -= 1
            if not self._busy[session_id]:
                del self._busy[session_id]
            if owned:
                await asyncio.shield(provider.aclose())
        self._counts["compactions"] += compactor.compactions
        return info


class CodingExecution:
    """One prepared coding run; :meth:`steer` talks to it while it runs.

    Loop-only: call :meth:`steer` from the event loop that runs :meth:`execute`.
    """

    def __init__(self, executor: CodingExecutor, job: ExecutionJob) -> None:
        self._executor = executor
        self._job = job
        self._agent: Agent | None = None
        # The texts of the latest accepted steers (bounded like the agent's queue): the ones
        # the loop has not taken are the last ``steering_queued`` of them.
        self._accepted: deque[str] = deque(maxlen=executor.settings.steering_capacity)
        self._accepting = False
        self._finished = False

    # -- steering --------------------------------------------------------------------------

    def steer(self, text: str) -> bool:
        """Offer ``text`` to the running agent loop as a steering message.

        True: the text is in the agent's steering queue; it is injected as a user message
        before the next model call (after the current tool batch) and written to the
        transcript at that point. A steer accepted while the model is answering its last turn
        is not lost: the loop takes it at its next drain, or, when it arrives after the loop's
        last drain, the execution runs the agent once more with it (the decision and the end
        of steering happen together, with nothing in between).

        False (nothing queued, never raises): the run has not started its agent loop yet, is
        finishing or finished, was cancelled, is failing, the steering queue is full
        (``AgentConfig.steering_capacity``), or ``text`` is empty.
        """
        counts = self._executor._counts
        agent = self._agent
        if not self._accepting or agent is None or not text.strip():
            counts["steers_refused"] += 1
            return False
        try:
            agent.steer(text)
        except QueueFullError:
            counts["steers_refused"] += 1
            return False
        self._accepted.append(text)
        counts["steers_accepted"] += 1
        return True

    @property
    def steerable(self) -> bool:
        """Whether :meth:`steer` would currently accept a message (queue space aside)."""
        return self._accepting and self._agent is not None

    @property
    def finished(self) -> bool:
        """Whether the agent loop has ended (a later :meth:`steer` returns False)."""
        return self._finished

    # -- session ---------------------------------------------------------------------------

    async def _open_session(self) -> tuple[Transcript, list[Message], str | None]:
        job = self._job
        store = self._executor.sessions()
        counts = self._executor._counts
        if job.resume is None:
            counts["created"] += 1
            return await store.create(cwd=job.cwd), [], None
        automatic = job.resume_mode == "auto"
        try:
            transcript, messages = await store.load(job.resume.value)
        except TranscriptError as exc:
            if not automatic:
                raise
            notice = (
                f"Could not continue session {job.resume.value} ({exc}); started a new session."
            )
            counts["created"] += 1
            counts["fresh"] += 1
            return await store.create(cwd=job.cwd), [], notice
        counts["resumed"] += 1
        if transcript.notice is not None:
            counts["repaired"] += 1
        return transcript, messages, transcript.notice

    # -- model and policy ------------------------------------------------------------------

    def _load_config(self) -> Config:
        ex = self._executor
        return load_config(environ=ex._environ, cwd=Path(self._job.cwd), home=ex._home).config

    def _model(self, config: Config) -> tuple[Model, Provider, bool]:
        ex = self._executor
        if ex._model is not None and ex._provider is not None:
            return ex._model, ex._provider, False
        model, provider = resolve_model(
            config,
            self._job.model,
            environ=ex._environ,
            retry=ex._retry,
        )
        return model, provider, True

    def _policy(self, config: Config, agent_id: str) -> ToolPolicy:
        """The agent's profile policy, else the executor default, as the base; narrowed by
        the command's policy (a request never widens it), its ``preapproved`` questions
        skipped (never a deny lifted), and narrowed by the execution context's policy."""
        job = self._job
        policy: ToolPolicy | None = None
        profile = config.profiles.get(agent_id)
        configured = profile.tool_policy if profile is not None else None
        if configured is not None:
            policy = ToolPolicy(
                allow=frozenset(configured.allow) or None,
                deny=frozenset(configured.deny),
                require_approval=frozenset(configured.require_approval),
            )
        if policy is None:
            policy = self._executor.settings.default_policy
        policy = policy.for_run(job.tool_policy, job.preapproved)
        if job.context is not None:
            policy = policy.intersect(job.context.tool_policy)
        return policy

    # -- the run ---------------------------------------------------------------------------

    async def execute(self, sink: ExecutionSink) -> ExecutionResult:
        """Run to the end (see the module docstring), streaming through ``sink``."""
        counts = self._executor._counts
        counts["started"] += 1
        try:
            result = await self._execute(sink)
        except BaseException:
            counts["cancelled"] += 1
            raise
        counts["ok" if result.ok else "failed"] += 1
        return result

    async def _execute(self, sink: ExecutionSink) -> ExecutionResult:
        job = self._job
        try:  # decoding megabytes of base64 stays off the loop; most runs carry no image
            images = await asyncio.to_thread(_decode_images, job.images) if job.images else ()
        except InvalidImageError as exc:  # checked before anything is opened or sent
            return ExecutionResult(
                ok=False, error=f"bad_request: {exc}", error_code=ErrorCode.BAD_REQUEST
            )
        try:
            transcript, history, notice = await self._open_session()
        except TranscriptError as exc:
            code = "corrupt_transcript" if isinstance(exc, CorruptTranscriptError) else (
                "session_not_found"
            )  # fmt: skip
            return ExecutionResult(
                ok=False,
                error=f"{code}: {exc}",
                error_code=ErrorCode.TRANSCRIPT_CORRUPT
                if isinstance(exc, CorruptTranscriptError)
                else ErrorCode.SESSION_NOT_FOUND,
            )
        resume = ResumeToken.native(transcript.session_id)
        sink.started(resume=resume)
        if isinstance(sink, SessionBindingSink):
            # The session key points at this transcript before the model is asked anything:
            # a crash from here on leaves the run's prompt in the session.
            await sink.session_bound()
        if notice is not None:
            sink.action(
                id="session_notice",
                kind=ActionKind.NOTE,
                title=notice,
                phase="completed",
                ok=False,
                level="warning",
            )
        try:
            config = await asyncio.to_thread(self._load_config)
        except ConfigError as exc:
            return ExecutionResult(
                ok=False,
                error=f"config_invalid: {exc}",
                error_code=ErrorCode.CONFIG_INVALID,
                resume=resume,
            )
        try:
            model, provider, owned = self._model(config)
        except LemonAiError as exc:  # an unknown provider or model: a clear failed run
            return ExecutionResult(
                ok=False,
                error=f"model_unavailable: {type(exc).__name__}: {exc}",
                error_code=ErrorCode.MODEL_UNAVAILABLE,
                resume=resume,
            )
        busy = self._executor._busy
        busy[transcript.session_id] += 1
        try:
            return await self._run(
                sink, transcript, history, config, model, provider, resume, images
            )
        finally:
            busy[transcript.session_id] -= 1
            if not busy[transcript.session_id]:
                del busy[transcript.session_id]
            if self._executor.approvals is not None:
                self._executor.approvals.expire_owner(job.run_id)
            if owned:
                await asyncio.shield(provider.aclose())

    async def _run(
        self,
        sink: ExecutionSink,
        transcript: Transcript,
        history: list[Message],
        config: Config,
        model: Model,
        provider: Provider,
        resume: ResumeToken,
        images: tuple[ImageContent, ...] = (),
    ) -> ExecutionResult:
        job = self._job
        ex = self._executor
        settings = ex.settings
        if images and model.image_input is False:
            sink.action(
                id="images_not_sent",
                kind=ActionKind.NOTE,
                title=(
                    f"{model.ref} does not accept image input: {len(images)} image(s) not "
                    "sent (the model was told); choose a model that takes images to send them"
                ),
                phase="completed",
                ok=False,
                level="warning",
            )
        # The tools' processes get the daemon's environment less its secrets (reads secrets.env).
        env = await asyncio.to_thread(
            tool_environment_for, config, home=ex.home, environ=ex._environ
        )
        workspace = Workspace(
            cwd=Path(job.cwd),
            limits=run_limits(settings.limits, model, settings.compaction),
            access=FileAccess.from_config(config.section(FileAccessConfig), home=ex.home),
            env=env,
        )
        agent_id = _agent_id(job)

        def approval_requested(tool_call_id: str, pending: ApprovalPending) -> None:
            sink.action(
                id=pending.id,
                kind=ActionKind.APPROVAL,
                title=f"approve {pending.rationale or pending.tool}?",
                detail={"approval_id": pending.id, "tool": pending.tool,
                        "tool_call_id": tool_call_id, "action": pending.action},
                phase="started",
            )  # fmt: skip

        def approval_resolved(tool_call_id: str, approval_id: str, d: ApprovalDecision) -> None:
            sink.action(
                id=approval_id,
                kind=ActionKind.APPROVAL,
                title=f"approval {d.value}",
                detail={"approval_id": approval_id, "decision": d.value},
                phase="completed",
                ok=d.value.startswith("approve"),
            )

        gate = GateContext(
            policy=self._policy(config, agent_id),
            workspace=workspace,
            approvals=ex.approvals,
            run_id=job.run_id,
            session_id=transcript.session_id,
            session_key=job.session_key,
            agent_id=agent_id,
            approval_timeout_s=settings.approval_timeout_s,
            hooks=ApprovalHooks(requested=approval_requested, resolved=approval_resolved),
            preapproved=job.preapproved,
        )
        todos = TodoList(settings.limits.max_todos)
        catalog = ex.skills()
        run_tools = {t.name: t for t in coding_tools(workspace, todos=todos)}
        skill_tool = read_skill_tool(catalog)
        run_tools[skill_tool.name] = skill_tool
        _RUN_TOOLS.set(_RunTools(tools=run_tools, gate=gate))
        tools = ex.tool_registry(workspace)
        skills = await asyncio.to_thread(_usable_skills, catalog)
        system_prompt = await asyncio.to_thread(
            build_system_prompt,
            cwd=workspace.cwd,
            home=ex.home,
            tool_names=tools.names(),
            limits=settings.prompt_limits,
            skills=skills,
        )
        compactor = Compactor(
            model=model,
            provider=provider,
            transcript=transcript,
            settings=settings.compaction,
            sink=sink,
            flush=lambda: persist(),
        )
        agent_config = AgentConfig(
            model=model,
            provider=compactor.provider,  # compacts before a request that would overflow
            system_prompt=system_prompt,
            tools=tools,
            max_turns=settings.max_turns,
            max_tool_result_chars=tool_result_cap(model, settings.compaction),
            steering_capacity=settings.steering_capacity,
        )
        # The prompt goes in as the conversation's last message (images attached) and is
        # written to the transcript before the model is asked: a crash mid-answer leaves it in
        # the session. The agent continues from it (it starts with no prompt of its own).
        asked = UserMessage(content=job.prompt, images=images)
        await transcript.append([asked])
        history = [*history, asked]
        persisted = len(history)
        prompt: str | None = None
        agent = Agent(agent_config, messages=history)
        persisting = asyncio.Lock()  # the turn's end and a compaction may both append

        async def persist() -> None:
            nonlocal persisted
            async with persisting:
                messages = agent.messages
                await transcript.append(messages[persisted:])
                persisted = len(messages)

        counts = ex._counts
        error: str | None = None
        error_code: ErrorCode | None = None
        outcome: str = "completed"
        usage = Usage()
        cost = Cost()
        turns = 0
        answer = ""
        abort_reason: str | None = None
        self._agent = agent
        try:
            while True:
                run = agent.start(prompt, run_id=job.run_id)
                self._accepting = True
                end: AgentEndEvent | None = None
                try:
                    async with run:
                        try:
                            async for event in run:
                                if isinstance(event, TurnEndEvent):
                                    await persist()
                                elif isinstance(event, TurnStartEvent):
                                    turns += 1
                                elif isinstance(event, AgentErrorEvent):
                                    self._accepting = False  # the run is failing
                                    error = f"{event.kind}: {event.message}"
                                    error_code = _error_code(event.kind)
                                elif isinstance(event, AgentEndEvent):
                                    end = event
                                else:
                                    _forward(event, sink)
                        except asyncio.CancelledError:
                            # The run ends: no more steering, its pending approvals expire,
                            # then the agent aborts cooperatively (partial answer kept, bash
                            # process group killed) for at most cancel_grace_s before leaving
                            # the block cancels it outright.
                            self._accepting = False
                            if ex.approvals is not None:
                                ex.approvals.expire_owner(job.run_id)
                            run.abort("cancelled")
                            with contextlib.suppress(TimeoutError):
                                await asyncio.wait_for(
                                    asyncio.shield(run.result()), settings.cancel_grace_s
                                )
                            raise
                        result = await run.result()
                except asyncio.CancelledError:
                    self._accepting = False
                    counts["steers_dropped"] += agent.statistics().steering_queued
                    await asyncio.shield(persist())
                    raise
                await persist()
                usage = usage + result.usage
                cost = cost + result.cost
                answer = result.text
                abort_reason = result.abort_reason
                outcome = end.outcome if end is not None else result.outcome
                if outcome == "max_turns":
                    error = (
                        f"max_turns: the run reached its limit of {settings.max_turns} model "
                        "calls (ExecutorSettings.max_turns) and was stopped"
                    )
                # The decision point, with no await between the check and closing: a steer
                # accepted after the loop's last drain (while the final answer was being
                # finished or persisted) is still queued here and gets one more run.
                queued = agent.statistics().steering_queued
                if outcome == "completed" and queued:
                    if turns < settings.max_turns:
                        # A fresh agent on the same conversation whose own turn limit is what
                        # is left of the execution's, holding the steers the loop never took
                        # (the most recent ``queued`` accepted ones, in order).
                        counts["steer_continuations"] += 1
                        late = list(self._accepted)[-queued:]
                        agent = Agent(
                            replace(agent_config, max_turns=settings.max_turns - turns),
                            messages=agent.messages,
                        )
                        for text in late:
                            agent.steer(text)
                        self._agent = agent
                        prompt = None
                        continue
                    outcome = "max_turns"
                    error = (
                        f"max_turns: the run reached its limit of {settings.max_turns} model "
                        f"calls (ExecutorSettings.max_turns) with {queued} steering message(s) "
                        "not yet answered"
                    )
                self._accepting = False
                counts["steers_dropped"] += queued
                break
        finally:
            counts["compactions"] += compactor.compactions
            counts["compaction_retries"] += compactor.retries
            usage = usage + compactor.usage  # the summarisation requests are part of the run
            cost = cost + compactor.cost
            self._accepting = False
            self._finished = True
        run_usage = RunUsage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            cost_usd=cost.total,
            model=model.ref,
            turns=turns,
        )
        if outcome == "completed":
            return ExecutionResult(ok=True, answer=answer, resume=resume, usage=run_usage)
        if outcome == "aborted":
            error = f"aborted: {abort_reason or 'aborted'}"
            error_code = ErrorCode.CANCELLED
        elif outcome == "max_turns":
            error_code = ErrorCode.MAX_TURNS
        return ExecutionResult(
            ok=False,
            answer=answer,
            error=error or outcome,
            error_code=error_code or ErrorCode.EXECUTOR_FAILED,
            resume=resume,
            usage=run_usage,
        )


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


def _error_code(kind: str) -> ErrorCode:
    """The typed code of an agent error kind (lemon_ai's ErrorKind values, or max_turns)."""
    return _ERROR_CODES.get(kind, ErrorCode.EXECUTOR_FAILED)


def _forward(event: AgentEvent, sink: ExecutionSink) -> None:
    """Map one agent event to run events (text deltas and tool actions)."""
    if isinstance(event, MessageUpdateEvent):
        inner = event.event
        if isinstance(inner, TextDeltaEvent) and inner.delta:
            sink.delta(inner.delta)
        return
    if isinstance(event, ToolExecutionStartEvent):
        args = event.arguments if isinstance(event.arguments, Mapping) else {}
        sink.action(
            id=event.tool_call_id,
            kind=_ACTION_KIND.get(event.name, ActionKind.TOOL),
            title=_title(event.name, args),
            detail={"tool": event.name, "arguments": dict(args)},
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
        sink.action(
            id=event.tool_call_id,
            kind=_ACTION_KIND.get(event.name, ActionKind.TOOL),
            title=event.name,
            detail={"tool": event.name, "duration_s": round(event.duration_s, 6)},
            phase="completed",
            ok=not result.is_error,
            message=_clip(result.content),
        )


def _title(name: str, args: Mapping[str, Any]) -> str:
    if name == "bash":
        return f"$ {_clip(str(args.get('command', '')))}"
    path = args.get("path")
    if isinstance(path, str):
        return f"{name} {path}"
    return name
