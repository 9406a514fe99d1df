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
import os
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from coding_agent._run import CodingRun, RunSettings
from coding_agent.compaction import (
    CompactionInfo,
    CompactionSettings,
    Compactor,
)
from coding_agent.errors import (
    CodingAgentUsageError,
    CompactionError,
    CorruptTranscriptError,
    TranscriptError,
)
from coding_agent.policy import DEFAULT_TOOL_POLICY
from coding_agent.prompt import PromptLimits
from coding_agent.session import SessionStore, Transcript
from coding_agent.subagents import Subagents
from coding_agent.transcript_mirror import TranscriptMirror
from coding_agent.workspace import CodingLimits
from lemon_ai import (
    AuthError,
    ImageContent,
    InvalidImageError,
    LemonAiError,
    Message,
    Model,
    Provider,
    RetryPolicy,
    UnknownModelError,
    api_key_variable,
    check_images,
    decode_image,
    default_catalogue,
    missing_key,
    offline_model,
    provider_for,
)
from lemon_browser import Browsers
from lemon_core import ExecApprovals
from lemon_core.config import Config, ConfigError, lemon_home, load_config
from lemon_core.cron import CronJobs
from lemon_core.events import ErrorCode
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
from lemon_core.mcp import McpHub
from lemon_memory import GoalStore, MemoryStore
from lemon_skills import SkillCatalog, SkillsSettings

__all__ = [
    "CodingExecution",
    "CodingExecutor",
    "ExecutorSettings",
    "ExecutorStatistics",
    "check_model",
    "known_providers",
    "model_for",
    "resolve_model",
]

_DEFAULT_BASE_URL: Final[Mapping[str, str]] = {
    "openai_completions": "https://api.openai.com/v1",
    "anthropic_messages": "https://api.anthropic.com",
}


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
    neither the configuration nor the catalogue knows (naming the built-in and configured
    providers), and ``AuthError`` naming the variable for a hosted model without its key
    (before anything connects).
    """
    env = os.environ if environ is None else environ
    model, key, variable = model_for(config, override, environ=env)
    if model.api == "offline":
        return model, provider_for(model)
    return model, provider_for(model, api_key=key, environ=env, retry=retry, key_variable=variable)


def model_for(
    config: Config, override: str | None = None, *, environ: Mapping[str, str]
) -> tuple[Model, str | None, str | None]:
    """What :func:`resolve_model` resolves, without building the provider: the model, the key
    of its configured ``api_key_env`` (``None`` when unset or not configured) and that
    variable's name (``None``: ``<PROVIDER>_API_KEY``)."""
    ref = override or config.defaults.model
    if not ref:
        return offline_model(), None, None
    name, _, model_id = ref.partition(":")
    configured = config.providers.get(name)
    if configured is not None and configured.kind == "offline":
        # the reference is kept (``local:main`` stays what usage and the picker name)
        model = (
            replace(offline_model(), provider=name, id=model_id) if model_id else offline_model()
        )
        return model, None, None
    catalogue = default_catalogue()
    try:
        model = catalogue.resolve(ref)
    except UnknownModelError:
        if configured is not None and model_id:
            model = Model(
                provider=name,
                id=model_id,
                name=model_id,
                api=configured.kind,
                base_url=configured.base_url or _DEFAULT_BASE_URL[configured.kind],
            )
        elif name and model_id:
            raise UnknownModelError(
                f"unknown provider {name!r} in model reference {ref!r}; known providers: "
                f"{known_providers(config)}. Add [providers.{name}] to the config (kind, "
                "base_url, models) or use one of those"
            ) from None
        else:
            raise
    key: str | None = None
    variable: str | None = None
    if configured is not None:
        moved = bool(configured.base_url) and configured.base_url != model.base_url
        model = replace(
            model,
            api=configured.kind,
            base_url=configured.base_url or model.base_url,
            requires_key=model.requires_key and not moved,
        )
        if configured.api_key_env:
            variable = configured.api_key_env
            key = environ.get(variable) or None
    return model, key, variable


def check_model(
    config: Config, override: str | None = None, *, environ: Mapping[str, str]
) -> Model:
    """The model a run on ``override`` would use, checked as the run checks it, without
    building a provider or connecting: raises ``UnknownModelError`` (naming the known
    providers) or ``AuthError`` (a hosted model whose key variable is not set)."""
    model, key, variable = model_for(config, override, environ=environ)
    if model.requires_key and not (
        key or environ.get(variable or api_key_variable(model.provider))
    ):
        raise AuthError(missing_key(model, variable), provider=model.provider, retryable=False)
    return model


def known_providers(config: Config) -> str:
    """The providers a model reference may name, for messages: the built-in ones, then the
    configured ones."""
    builtin = default_catalogue().providers()
    configured = sorted(set(config.providers) - set(builtin))
    text = "built-in " + ", ".join(builtin)
    return text + ("; configured " + ", ".join(configured) if configured else "")


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


class CodingExecutor:
    """The gateway's native executor (zero-argument construction for the entry point).

    ``home`` defaults to ``$LEMON_HOME`` (``~/.lemon``); ``model`` / ``provider`` override the
    configured model (tests, benchmarks; an injected provider is not closed by the executor);
    ``approvals`` is the approval channel (without it, tools that need approval are refused with
    an error the model sees); ``retry`` is handed to providers the executor builds;
    ``browsers`` (a started :class:`lemon_browser.Browsers`, owned by the caller) lets runs
    offer the ``browser`` tool when ``[web] browser`` is on; ``cron`` (looked up per run:
    lemon_automation's ``CRON_JOBS``) gives runs the ``cron`` tool over their agent's jobs.
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
        mcp: Callable[[], McpHub | None] | None = None,
        subagents: Subagents | None = None,
        memory: Callable[[], MemoryStore | None] | None = None,
        goals: Callable[[], GoalStore | None] | None = None,
        browsers: Browsers | None = None,
        cron: Callable[[], CronJobs | None] | None = None,
    ) -> None:
        if (model is None) != (provider is None):
            raise CodingAgentUsageError("CodingExecutor: pass model and provider together")
        self._home = home
        self._transcript_mirror = transcript_mirror
        self._mcp = mcp  # the runtime's MCP hub, looked up per run
        self.subagents = subagents
        self._memory = memory
        self._goals = goals
        self._browsers = browsers  # the browser tool's Chromium (owned by whoever made it)
        self._cron = cron  # the runtime's cron jobs (the cron tool), looked up per run
        self._model = model
        self._provider = provider
        self.approvals = approvals
        self.settings = settings or ExecutorSettings()
        self._retry = retry
        self._environ = environ
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
        self._run_state: CodingRun | None = None  # set when the run proper starts

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
        run = self._run_state
        if run is None:
            self._executor._counts["steers_refused"] += 1
            return False
        return run.steer(text)

    @property
    def steerable(self) -> bool:
        """Whether :meth:`steer` would currently accept a message (queue space aside)."""
        return self._run_state is not None and self._run_state.steerable

    @property
    def finished(self) -> bool:
        """Whether the agent loop has ended (a later :meth:`steer` returns False)."""
        return self._run_state is not None and self._run_state.finished

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
        except AuthError as exc:  # a hosted model without its key: named, nothing connected
            return ExecutionResult(
                ok=False,
                error=f"provider_auth: {exc}",
                error_code=ErrorCode.PROVIDER_AUTH,
                resume=resume,
            )
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
            if self._executor.subagents is not None:  # its async children end with it
                await asyncio.shield(self._executor.subagents.parent_ended(job.run_id))
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
        """The run proper: a :class:`CodingRun` of its own (tools, gate, persistence)."""
        ex = self._executor
        settings = ex.settings
        agent_id = _agent_id(self._job)
        run = CodingRun(
            job=self._job,
            settings=RunSettings(
                limits=settings.limits,
                compaction=settings.compaction,
                prompt_limits=settings.prompt_limits,
                max_turns=settings.max_turns,
                steering_capacity=settings.steering_capacity,
                cancel_grace_s=settings.cancel_grace_s,
                approval_timeout_s=settings.approval_timeout_s,
                approvals=ex.approvals,
                home=ex.home,
                environ=ex._environ,
                skills=ex.skills(),
                mcp=ex._mcp() if ex._mcp is not None else None,
                subagents=ex.subagents,
                memory=None if ex._memory is None else ex._memory(),
                goals=None if ex._goals is None else ex._goals(),
                browsers=ex._browsers,
                cron=None if ex._cron is None else ex._cron(),
            ),
            counts=ex._counts,
            sink=sink,
            transcript=transcript,
            history=history,
            config=config,
            model=model,
            provider=provider,
            policy=self._policy(config, agent_id),
            agent_id=agent_id,
            resume=resume,
            images=images,
        )
        self._run_state = run
        await run.prepare()
        return await run.run()
