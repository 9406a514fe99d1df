"""ExecutionCommand and RunRequest: what the router accepts and what it hands the gateway.

Neither carries nor validates a runner identity: there is one native executor, and
``engine="lemon"`` is run provenance written by the gateway, not a request field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, get_args

from lemon_core.execution._context import ExecutionContext
from lemon_core.execution._editor import EditorHandle
from lemon_core.execution._mcp_server import McpServerSpec, check_mcp_servers
from lemon_core.execution._policy import ToolPolicy, check_preapproved
from lemon_core.execution._resume import NATIVE_ENGINE, ResumeToken
from lemon_core.execution.errors import ExecutionContractError, require_text

__all__ = [
    "ConversationKey",
    "ExecutionCommand",
    "Lane",
    "QueueMode",
    "ResumeMode",
    "RunRequest",
]


class ConversationKey(tuple[str, ...]):
    """The router-chosen serialisation key: ``("session", <session key>)``, or
    ``("resume", "lemon", <native session id>)`` when a native resume token resolved.

    A tuple (hashable, compared as its parts), so the gateway treats it as an opaque value and
    any non-empty tuple of non-empty strings is accepted where a key is expected. ``str(key)``
    is the colon-joined form (``session:agent:a:main``, ``resume:lemon:abc``).
    """

    __slots__ = ()

    def __new__(cls, parts: Iterable[str]) -> ConversationKey:
        key = super().__new__(cls, tuple(parts))
        if not is_conversation_key(key):
            raise ExecutionContractError(
                "a conversation key is a non-empty tuple of non-empty strings such as "
                f"('session', session_key), got {tuple(key)!r}"
            )
        return key

    @classmethod
    def for_session(cls, session_key: str) -> ConversationKey:
        return cls(("session", session_key))

    @classmethod
    def for_resume(cls, native_session_id: str) -> ConversationKey:
        return cls(("resume", NATIVE_ENGINE, native_session_id))

    @property
    def kind(self) -> str:
        """``session`` or ``resume`` (the first part)."""
        return self[0]

    @property
    def value(self) -> str:
        """The session key, or the native session id (the last part)."""
        return self[-1]

    def __str__(self) -> str:
        return ":".join(self)

    def __repr__(self) -> str:
        return f"ConversationKey({tuple(self)!r})"


Lane = Literal["main", "subagent", "background_exec"]
_LANES: Final = frozenset(get_args(Lane))

QueueMode = Literal["collect", "followup", "steer", "steer_backlog", "redirect", "interrupt"]
_QUEUE_MODES: Final = frozenset(get_args(QueueMode))
#: How a command's resume token was chosen: asked for by the caller (``explicit``: a missing
#: or corrupt transcript fails the run) or looked up from chat state (``auto``: the executor
#: starts fresh with a notice instead).
ResumeMode = Literal["explicit", "auto"]
_RESUME_MODES: Final = frozenset(get_args(ResumeMode))

_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})


def _frozen_meta(owner: object, meta: object) -> None:
    if not isinstance(meta, Mapping):
        raise ExecutionContractError(
            f"{type(owner).__name__}.meta must be a mapping, got {type(meta).__name__}"
        )
    if not isinstance(meta, MappingProxyType):
        object.__setattr__(owner, "meta", MappingProxyType(dict(meta)))


def _require_str(owner: object, name: str, *, allow_empty: bool = False) -> None:
    require_text(type(owner).__name__, name, getattr(owner, name), allow_empty=allow_empty)


def _check_images(owner: ExecutionCommand | RunRequest) -> None:
    """``images`` must be a sequence (not a string) of mappings; stored as a tuple."""
    images: object = owner.images
    where = f"{type(owner).__name__}.images"
    if not isinstance(images, tuple):
        if isinstance(images, str | bytes | Mapping) or not isinstance(images, Iterable):
            raise ExecutionContractError(
                f"{where} must be a sequence of image mappings such as "
                f"[{{'type': 'image', 'data': ..., 'mime_type': 'image/png'}}], got {images!r}"
            )
        images = tuple(images)
        object.__setattr__(owner, "images", images)
    for index, image in enumerate(images):
        if not isinstance(image, Mapping):
            raise ExecutionContractError(
                f"{where}[{index}] must be a mapping describing one image, got {image!r}"
            )


def _check_lineage(owner: RunRequest) -> None:
    for name in ("parent_run_id", "root_run_id"):
        if getattr(owner, name) is not None:
            _require_str(owner, name)
    depth: object = owner.depth
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
        raise ExecutionContractError(f"RunRequest.depth must be an integer >= 0, got {depth!r}")
    if (owner.parent_run_id is None) != (depth == 0):
        raise ExecutionContractError(
            "RunRequest lineage: a request with a parent_run_id has depth >= 1 and one "
            f"without has depth 0, got parent_run_id={owner.parent_run_id!r} depth={depth!r}"
        )


def is_conversation_key(value: object) -> bool:
    """True for a non-empty tuple of non-empty strings."""
    return (
        isinstance(value, tuple)
        and len(value) > 0
        and all(isinstance(part, str) and part for part in value)
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionCommand:
    """A pre-resolved, engine-less command the router hands to the EngineRuntime.

    ``conversation_key`` is chosen by the router and is required for submission; it may
    be ``None`` here only so the gateway's boundary can reject it with a clear error.
    """

    run_id: str
    session_key: str
    prompt: str
    conversation_key: tuple[str, ...] | None = None
    images: tuple[Mapping[str, Any], ...] = ()
    cwd: str | None = None
    resume: ResumeToken | None = None
    lane: Lane = "main"
    tool_policy: ToolPolicy | None = None
    preapproved: frozenset[str] = frozenset()
    context: ExecutionContext | None = None
    origin: str | None = None
    agent_id: str = "default"
    model: str | None = None
    resume_mode: ResumeMode = "explicit"
    retry_of: str | None = None
    merged_run_ids: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    mcp_servers: tuple[McpServerSpec, ...] = ()
    """The session's MCP servers from the request (see :attr:`RunRequest.mcp_servers`)."""
    editor: EditorHandle | None = None
    """The session's editor file system and terminal (see :attr:`RunRequest.editor`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "mcp_servers", check_mcp_servers(self.mcp_servers))
        _check_editor(self)
        _require_str(self, "run_id")
        _require_str(self, "agent_id")
        for name in ("origin", "model", "retry_of"):
            if getattr(self, name) is not None:
                _require_str(self, name)
        if self.resume_mode not in _RESUME_MODES:
            raise ExecutionContractError(
                f"ExecutionCommand.resume_mode must be one of {sorted(_RESUME_MODES)}, "
                f"got {self.resume_mode!r}"
            )
        merged: object = self.merged_run_ids
        if not isinstance(merged, tuple):
            if isinstance(merged, str) or not isinstance(merged, Iterable):
                raise ExecutionContractError(
                    f"ExecutionCommand.merged_run_ids must be a sequence of run ids, got {merged!r}"
                )
            object.__setattr__(self, "merged_run_ids", tuple(merged))
        for run_id in self.merged_run_ids:
            require_text("ExecutionCommand", "merged_run_ids[]", run_id)
        _require_str(self, "session_key")
        _require_str(self, "prompt", allow_empty=True)
        if self.conversation_key is not None and not is_conversation_key(self.conversation_key):
            raise ExecutionContractError(
                "ExecutionCommand.conversation_key must be a non-empty tuple of non-empty "
                f"strings such as ('session', session_key), got {self.conversation_key!r}"
            )
        if self.lane not in _LANES:
            raise ExecutionContractError(
                f"ExecutionCommand.lane must be one of {sorted(_LANES)}, got {self.lane!r}"
            )
        resume: object = self.resume
        if resume is not None and not isinstance(resume, ResumeToken):
            raise ExecutionContractError(
                f"ExecutionCommand.resume must be a ResumeToken or None, got {self.resume!r}"
            )
        policy: object = self.tool_policy
        if policy is not None and not isinstance(policy, ToolPolicy):
            object.__setattr__(self, "tool_policy", ToolPolicy.from_mapping(policy))
        object.__setattr__(self, "preapproved", check_preapproved(self.preapproved))
        if self.cwd is not None:
            _require_str(self, "cwd")
        _check_images(self)
        _frozen_meta(self, self.meta)


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRequest:
    """A request to run a prompt in a session, submitted to the router (RouterBridge).

    ``run_id`` is optional: ingress that needs a stable id (webhooks) supplies one.
    ``model`` (``"<provider>:<model>"``, non-blank) overrides the configured default for this
    run; ``images`` are mappings describing attached images, handed on to the executor.
    ``tool_policy`` only narrows the daemon's policy (see :meth:`ToolPolicy.for_run`);
    ``preapproved`` names the tools (or ``"*"``) whose approval question this run skips: a
    grant the submitting surface must authorise, which never lifts a deny.
    """

    origin: str
    session_key: str
    prompt: str
    agent_id: str = "default"
    queue_mode: QueueMode = "collect"
    model: str | None = None
    images: tuple[Mapping[str, Any], ...] = ()
    run_id: str | None = None
    cwd: str | None = None
    resume: ResumeToken | None = None
    tool_policy: ToolPolicy | None = None
    preapproved: frozenset[str] = frozenset()
    meta: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    parent_run_id: str | None = None
    """Lineage of a delegated run: the run whose ``task`` tool submitted this one (``None``:
    a top-level run). The router binds it into the run's :class:`ExecutionContext` and runs
    it on the ``subagent`` lane."""
    root_run_id: str | None = None
    """The top-level run of the tree (``None``: ``parent_run_id``, or this run itself)."""
    depth: int = 0
    """How deep in the tree this run is (0: top-level; a child of a top-level run is 1)."""
    mcp_servers: tuple[McpServerSpec, ...] = ()
    """MCP servers the submitting client gave for this session (ACP's ``mcpServers``): the
    run's MCP hub starts them for this session only. A grant the submitting surface must
    authorise (a stdio server is a command the daemon runs)."""
    editor: EditorHandle | None = None
    """The submitting editor's file system and terminal (ACP's ``fs`` / ``terminal`` client
    capabilities, served by the ACP agent on loopback): the run's read/write/edit and bash
    tools use what it offers instead of the disk and local processes."""

    def __post_init__(self) -> None:
        _require_str(self, "origin")
        _require_str(self, "session_key")
        _require_str(self, "prompt", allow_empty=True)
        _require_str(self, "agent_id")
        if self.queue_mode not in _QUEUE_MODES:
            raise ExecutionContractError(
                f"RunRequest.queue_mode must be one of {sorted(_QUEUE_MODES)}, "
                f"got {self.queue_mode!r}"
            )
        if self.model is not None:
            _require_str(self, "model")
        _check_images(self)
        if self.run_id is not None:
            _require_str(self, "run_id")
        policy: object = self.tool_policy
        if policy is not None and not isinstance(policy, ToolPolicy):
            object.__setattr__(self, "tool_policy", ToolPolicy.from_mapping(policy))
        object.__setattr__(self, "preapproved", check_preapproved(self.preapproved))
        _frozen_meta(self, self.meta)
        _check_lineage(self)
        object.__setattr__(self, "mcp_servers", check_mcp_servers(self.mcp_servers))
        _check_editor(self)


def _check_editor(owner: ExecutionCommand | RunRequest) -> None:
    editor: object = owner.editor
    if editor is not None and not isinstance(editor, EditorHandle):
        raise ExecutionContractError(
            f"{type(owner).__name__}.editor must be an EditorHandle or None, got {editor!r}"
        )
