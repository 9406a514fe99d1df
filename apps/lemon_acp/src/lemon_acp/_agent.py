"""The ACP agent: ACP v1's methods over one :class:`~lemon_core.sessions.SessionPort`.

A client of the session port like the terminal UI (the daemon's WebSocket port, or an
in-process runtime's with ``LEMON_DAEMON=0``): it never reaches the router, the gateway or the
executor. Sessions are Lemon sessions, ``acp:<uuid>`` (or any key ``session/load`` names), so
they show in ``lemon sessions list`` and resume after the editor and the daemon restart.

A ``session/prompt`` while one runs in the same session is queued by the session's rules: it
is submitted ``followup`` (its own run, after the running one; never merged into it), its
updates stream once it runs, and it answers when its run ends. ``session/cancel`` cancels every
run of the session's prompts through the port, the running one and the queued ones (tools
stop), answers a pending permission question ``cancelled`` (a deny), and each prompt returns
``cancelled``. Every approval the run asks goes to the editor as
``session/request_permission`` naming the tool call already announced with ``tool_call``;
no answer within ``permission_timeout_s``, or a cancelled question, is a deny.

MCP servers given in ``session/new`` / ``session/load`` are checked and kept per session
(:attr:`AcpSession.mcp_servers`) and carried on each of its run requests
(``RunRequest.mcp_servers``): the daemon's MCP hub starts them for this session only and the
agent offers their tools (each call asks, as a session server's tools do).

When the editor offers its file system (``fs.readTextFile`` / ``fs.writeTextFile``) or its
terminal (``terminal``), each run request also carries an editor handle
(``RunRequest.editor``) naming this agent's loopback bridge (:mod:`lemon_acp._editor`): the
run's read/write/edit and bash tools then ask the editor (``fs/*``, ``terminal/*``) instead of
the disk and local processes, after the approvals they need.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from lemon_acp._content import (
    check_mcp_servers,
    prompt_of,
    replay_updates,
    tool_call_of,
    tool_kind,
    tool_name_of,
)
from lemon_acp._editor import EditorBridge, editor_offers
from lemon_acp._rpc import AfterAnswer, FrameReader, FrameWriter, RpcConnection
from lemon_acp.errors import RpcError
from lemon_core.capabilities import ModelInfo
from lemon_core.events import ApprovalDecision, RunUsage
from lemon_core.execution import EditorHandle, McpServerSpec, RunRequest, ToolPolicy
from lemon_core.sessions import (
    ApprovalAsked,
    ApprovalEnded,
    InvalidSessionKeyError,
    QueueNotice,
    RunEnded,
    RunPhaseNotice,
    SessionPort,
    StreamOverflow,
    TextDelta,
    ToolCard,
    approval_arguments,
    approval_command,
    check_session_key,
)

__all__ = [
    "MODES",
    "PROGRESS_CHARS",
    "PROTOCOL_VERSION",
    "AcpAgent",
    "AcpSession",
    "ModelSource",
    "SkillSource",
    "Turn",
]

ModelSource = Callable[[], Awaitable[Sequence[ModelInfo]]]
"""The models a session may pick (the daemon's ``models.list``, or the runtime's catalogue)."""
SkillSource = Callable[[], Awaitable[Sequence[tuple[str, str]]]]
"""The enabled skills as ``(name, description)`` (offered as ``/name`` commands)."""

log = logging.getLogger("lemon_acp")

PROTOCOL_VERSION: Final = 1
ModeId = Literal["default", "accept-edits", "plan"]
MODES: Final[tuple[dict[str, str], ...]] = (
    {
        "id": "default",
        "name": "Default",
        "description": "Ask before running tools that need approval",
    },
    {
        "id": "accept-edits",
        "name": "Accept edits",
        "description": "Allow file writes and edits without asking",
    },
    {"id": "plan", "name": "Plan", "description": "Read-only: no writes, edits or commands"},
)
_MODE_IDS: Final = frozenset(m["id"] for m in MODES)
_EDIT_TOOLS: Final = frozenset({"write", "edit"})
_PLAN_DENY: Final = frozenset({"write", "edit", "bash"})
_ORIGIN: Final = "acp"
#: The slash commands the editor offers (``available_commands_update``), skills after them.
_COMMANDS: Final = (
    {"name": "compact", "description": "Summarise the older part of this session's history"},
)
#: At most this many models in the model select (available ones first, then the session's).
_MAX_MODEL_OPTIONS: Final = 100
_MAX_SKILL_COMMANDS: Final = 100
#: A running tool's progress (``tool_call_update`` content while in progress) keeps at most
#: this many of its last characters: each update carries all of it (content replaces).
PROGRESS_CHARS: Final = 8192
_PERMISSION_OPTIONS: Final = (
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject_always", "name": "Always reject", "kind": "reject_always"},
)
#: ACP's permission option -> our decision (always-reject is a deny: we keep no deny list).
_DECISIONS: Final[Mapping[str, ApprovalDecision]] = {
    "allow_once": ApprovalDecision.APPROVE_ONCE,
    "allow_always": ApprovalDecision.APPROVE_SESSION,
    "reject_once": ApprovalDecision.DENY,
    "reject_always": ApprovalDecision.DENY,
}


@dataclass(kw_only=True, slots=True)
class Turn:
    """One ``session/prompt``: its run (once submitted) and its announced tool calls."""

    run_id: str | None = None
    cancelled: bool = False
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The announced tool calls by id: ``tool``, ``args``, ``open``, ``update``."""


@dataclass(kw_only=True, slots=True)
class AcpSession:
    """One editor session: its Lemon session key, workspace, mode and MCP servers, and the
    prompts in flight (the running one first, then the queued ones)."""

    key: str
    cwd: str
    mode: ModeId = "default"
    mcp_servers: tuple[McpServerSpec, ...] = ()
    model: str | None = None
    """The session's own model (``provider:model``; ``None``: the daemon's default)."""
    cost_usd: float = 0.0
    """The cost of the turns run through this agent (``usage_update``'s cumulative cost)."""
    turns: list[Turn] = field(default_factory=list)
    permission: asyncio.Future[Any] | None = field(default=None, repr=False)


class AcpAgent:
    """See the module docstring."""

    def __init__(
        self,
        port: SessionPort,
        *,
        version: str = "0.1.0",
        agent_id: str = "default",
        permission_timeout_s: float = 300.0,
        attach: str | None = None,
        models: ModelSource | None = None,
        skills: SkillSource | None = None,
        editor: bool = True,
        editor_refusal: str | None = None,
    ) -> None:
        """``editor``: serve the editor's file system and terminal to the runs when it offers
        them (the runs must reach this process's loopback: an in-process runtime, or a daemon
        on this machine). ``editor_refusal`` (with ``editor`` false): why the runs cannot
        reach the editor; an ``initialize`` whose client offers ``fs`` or ``terminal`` is then
        refused with it (-32603), rather than the daemon's own tools silently standing in."""
        self._port = port
        self._model_source = models
        self._skill_source = skills
        self._models: tuple[ModelInfo, ...] = ()
        self._skills: dict[str, str] = {}
        self._version = version
        self._agent_id = agent_id
        self._permission_timeout_s = permission_timeout_s
        self._attach = attach
        self._sessions: dict[str, AcpSession] = {}
        self._client_capabilities: dict[str, Any] = {}
        self._rpc: RpcConnection | None = None
        self._serve_editor = editor
        self._editor_refusal = None if editor else editor_refusal
        self._bridge: EditorBridge | None = None

    async def serve(self, reader: FrameReader, writer: FrameWriter) -> None:
        """Answer the editor until its input ends."""
        rpc = self._rpc = RpcConnection(
            reader, writer, requests=self._request, notifications=self._notification
        )
        if self._serve_editor:
            self._bridge = EditorBridge(rpc.request)
            await self._bridge.start()
        try:
            await rpc.serve()
        finally:
            if self._bridge is not None:
                await self._bridge.close()

    @property
    def sessions(self) -> Mapping[str, AcpSession]:
        return self._sessions

    # -- dispatch -------------------------------------------------------------------------------

    async def _request(self, method: str, params: dict[str, Any]) -> Any:
        handlers = {
            "initialize": self._initialize,
            "authenticate": self._authenticate,
            "session/new": self._new,
            "session/load": self._load,
            "session/prompt": self._prompt,
            "session/set_mode": self._set_mode,
            "session/set_config_option": self._set_config_option,
            "session/set_model": self._set_model,
        }
        handler = handlers.get(method)
        if handler is None:
            raise LookupError(method)
        return await handler(params)

    async def _notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "session/cancel":
            await self._cancel(params)
        else:
            log.debug("ignored notification %s", method)

    async def _update(self, session: AcpSession, update: dict[str, Any]) -> None:
        assert self._rpc is not None
        await self._rpc.notify("session/update", {"sessionId": session.key, "update": update})

    # -- methods --------------------------------------------------------------------------------

    async def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        version = params.get("protocolVersion")
        if not isinstance(version, int) or isinstance(version, bool):
            raise RpcError.bad_params("protocolVersion", "must be an integer (ACP's major version)")
        capabilities = params.get("clientCapabilities")
        self._client_capabilities = capabilities if isinstance(capabilities, dict) else {}
        if self._editor_refusal is not None and any(editor_offers(self._client_capabilities)):
            log.error("%s", self._editor_refusal)
            raise RpcError(-32603, self._editor_refusal, {"field": "clientCapabilities"})
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": True, "sse": False},
            },
            "authMethods": [],
            "agentInfo": {"name": "lemon", "title": "Lemon", "version": self._version},
        }

    async def _authenticate(self, params: dict[str, Any]) -> dict[str, Any]:
        # The connection to the daemon is authenticated already (this home's local token).
        return {}

    def _modes(self, session: AcpSession) -> dict[str, Any]:
        return {"currentModeId": session.mode, "availableModes": [dict(m) for m in MODES]}

    def _config_options(self, session: AcpSession) -> list[dict[str, Any]]:
        """The session's config options (ACP's successor of ``modes``): the mode and, when
        the models are known, the model, each a select."""
        options: list[dict[str, Any]] = [
            {
                "type": "select",
                "id": "mode",
                "name": "Mode",
                "category": "mode",
                "currentValue": session.mode,
                "options": [
                    {"value": m["id"], "name": m["name"], "description": m["description"]}
                    for m in MODES
                ],
            }
        ]
        choices = self._model_choices(session)
        if choices:
            current = session.model or next((m.ref for m in self._models if m.default), None)
            if current is not None and all(c["value"] != current for c in choices):
                choices.insert(0, {"value": current, "name": current})  # e.g. no key for it
            options.append(
                {
                    "type": "select",
                    "id": "model",
                    "name": "Model",
                    "category": "model",
                    "currentValue": current or choices[0]["value"],
                    "options": choices,
                }
            )
        return options

    def _model_choices(self, session: AcpSession) -> list[dict[str, str]]:
        """The models offered: the available ones (default first), and the session's own
        even when it is not available; at most ``_MAX_MODEL_OPTIONS``."""
        usable = sorted(
            (m for m in self._models if not m.unavailable or m.ref == session.model),
            key=lambda m: (not m.default, m.ref != session.model, m.ref),
        )[:_MAX_MODEL_OPTIONS]
        choices = [
            {
                "value": m.ref,
                "name": m.name or m.ref,
                "description": m.ref
                + (f", {m.context_window // 1000}k context" if m.context_window else "")
                + (f" (unavailable: {m.unavailable})" if m.unavailable else ""),
            }
            for m in usable
        ]
        if session.model and all(c["value"] != session.model for c in choices):
            choices.insert(0, {"value": session.model, "name": session.model})
        return choices

    async def _refresh_catalogue(self) -> None:
        """The models and skills, read again for each new or loaded session (each source
        says what it could not read and answers what it has: the CLI's log their failures)."""
        if self._model_source is not None:
            self._models = tuple(await self._model_source())
        if self._skill_source is not None:
            skills = await self._skill_source()
            reserved = {c["name"] for c in _COMMANDS}
            self._skills = {
                name: description
                for name, description in list(skills)[:_MAX_SKILL_COMMANDS]
                if name not in reserved and name and " " not in name
            }

    def _cwd(self, params: Mapping[str, Any]) -> str:
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise RpcError.bad_params("cwd", "must be an absolute path (the session's workspace)")
        if not os.path.isdir(cwd):
            raise RpcError.bad_params("cwd", f"{cwd} is not a directory")
        return os.path.realpath(cwd)

    async def _new(self, params: dict[str, Any]) -> AfterAnswer:
        cwd = self._cwd(params)
        servers = check_mcp_servers(params.get("mcpServers"))
        key = self._attach or f"acp:{uuid.uuid4()}"
        self._attach = None
        session = AcpSession(key=key, cwd=cwd, mcp_servers=servers)
        settings = await self._port.patch(
            key, workspace=cwd, label=f"ACP {os.path.basename(cwd) or cwd}"
        )
        session.model = settings.model
        await self._refresh_catalogue()
        self._sessions[key] = session
        return AfterAnswer(
            {
                "sessionId": key,
                "modes": self._modes(session),
                "configOptions": self._config_options(session),
            },
            lambda: self._commands(session),
        )

    async def _commands(self, session: AcpSession) -> None:
        commands: list[dict[str, Any]] = [dict(c) for c in _COMMANDS]
        commands += [
            {
                "name": name,
                "description": f"Skill: {description}" if description else "Skill",
                "input": {"hint": "what to do with the skill (optional)"},
            }
            for name, description in sorted(self._skills.items())
        ]
        await self._update(
            session,
            {"sessionUpdate": "available_commands_update", "availableCommands": commands},
        )

    async def _load(self, params: dict[str, Any]) -> AfterAnswer:
        key = params.get("sessionId")
        if not isinstance(key, str):
            raise RpcError.bad_params("sessionId", "must be a string")
        try:
            check_session_key(key)
        except InvalidSessionKeyError as exc:
            raise RpcError.bad_params("sessionId", str(exc)) from None
        cwd = self._cwd(params)
        servers = check_mcp_servers(params.get("mcpServers"))
        entries = await self._history(key)
        settings = await self._port.settings(key)
        if not entries and settings.updated_at_ms == 0:
            raise RpcError.bad_params("sessionId", f"unknown session {key!r}")
        session = self._sessions.get(key) or AcpSession(key=key, cwd=cwd)
        session.cwd, session.mcp_servers, session.model = cwd, servers, settings.model
        await self._refresh_catalogue()
        self._sessions[key] = session
        for update in replay_updates(entries):
            await self._update(session, update)
        return AfterAnswer(
            {"modes": self._modes(session), "configOptions": self._config_options(session)},
            lambda: self._commands(session),
        )

    async def _history(self, key: str) -> tuple[Any, ...]:
        pages: list[tuple[Any, ...]] = []
        before: int | None = None
        while True:
            page = await self._port.transcript(key, limit=200, before=before)
            pages.append(page.entries)
            if not page.more or not page.entries:
                break
            before = page.entries[0].index
        return tuple(entry for entries in reversed(pages) for entry in entries)

    def _session(self, params: Mapping[str, Any]) -> AcpSession:
        key = params.get("sessionId")
        if not isinstance(key, str):
            raise RpcError.bad_params("sessionId", "must be a string")
        session = self._sessions.get(key)
        if session is None:
            raise RpcError.bad_params(
                "sessionId", f"unknown session {key!r} (session/new or session/load it first)"
            )
        return session

    async def _set_mode(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._session(params)
        mode = params.get("modeId")
        if mode == "default" or mode == "accept-edits" or mode == "plan":
            session.mode = mode
        else:
            raise RpcError.bad_params("modeId", f"must be one of {', '.join(sorted(_MODE_IDS))}")
        await self._update(session, {"sessionUpdate": "current_mode_update", "currentModeId": mode})
        return {}

    async def _set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        """``session/set_config_option``: ``mode`` (the same as ``session/set_mode``) or
        ``model`` (one of the select's values: the session's own model)."""
        session = self._session(params)
        config_id = params.get("configId")
        value = params.get("value")
        offered = {o["id"]: o for o in self._config_options(session)}
        if config_id not in offered:
            raise RpcError.bad_params("configId", f"must be one of {', '.join(offered)}")
        if config_id == "model":
            values = [c["value"] for c in offered["model"]["options"]]
            if value not in values:
                raise RpcError.bad_params("value", "not one of the model select's values")
            await self._set_model({"sessionId": session.key, "modelId": value})
        else:
            if value not in _MODE_IDS:
                raise RpcError.bad_params("value", f"must be one of {', '.join(sorted(_MODE_IDS))}")
            await self._set_mode({"sessionId": session.key, "modeId": value})
        return {"configOptions": self._config_options(session)}

    async def _set_model(self, params: dict[str, Any]) -> dict[str, Any]:
        """``session/set_model`` (unstable in ACP v1): ``provider:model``, the session's own."""
        session = self._session(params)
        model = params.get("modelId")
        if not isinstance(model, str) or ":" not in model.strip(":"):
            raise RpcError.bad_params("modelId", "must be provider:model, e.g. openai:gpt-4o")
        settings = await self._port.patch(session.key, model=model)
        session.model = settings.model or model
        return {}

    async def _cancel(self, params: dict[str, Any]) -> None:
        key = params.get("sessionId")
        session = self._sessions.get(key) if isinstance(key, str) else None
        if session is None or not session.turns:
            return
        turns = list(session.turns)
        for turn in turns:
            turn.cancelled = True
        if session.permission is not None and not session.permission.done():
            session.permission.set_result({"outcome": {"outcome": "cancelled"}})
        for turn in turns:
            if turn.run_id is not None:
                await self._port.cancel(run_id=turn.run_id)
        if self._bridge is not None:  # the editor's terminals the runs hold: killed, released
            await self._bridge.end_terminals(session.key)

    # -- prompt ---------------------------------------------------------------------------------

    def _run_request(
        self, session: AcpSession, text: str, images: tuple[Mapping[str, Any], ...]
    ) -> RunRequest:
        preapproved: frozenset[str] = frozenset()
        policy = None
        if session.mode == "accept-edits":
            preapproved = _EDIT_TOOLS
        elif session.mode == "plan":
            policy = ToolPolicy(deny=_PLAN_DENY)
        return RunRequest(
            origin=_ORIGIN,
            session_key=session.key,
            prompt=text,
            agent_id=self._agent_id,
            queue_mode="followup",
            images=images,
            cwd=session.cwd,
            tool_policy=policy,
            preapproved=preapproved,
            mcp_servers=session.mcp_servers,
            editor=self._editor_handle(session),
        )

    def _editor_handle(self, session: AcpSession) -> EditorHandle | None:
        if self._bridge is None:
            return None
        read, write, terminal = editor_offers(self._client_capabilities)
        return self._bridge.handle(
            session.key, session.cwd, read=read, write=write, terminal=terminal
        )

    async def _prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._session(params)
        text, images = prompt_of(params.get("prompt"))
        if text.strip() == "/compact" and not images:
            if session.turns:
                raise RpcError.bad_params(
                    "prompt", "/compact waits for the running prompt: send it once that ends"
                )
            return await self._compact(session)
        text = self._skill_prompt(text)
        request = self._run_request(session, text, images)
        stream = self._port.watch(session.key)
        turn = Turn()
        session.turns.append(turn)
        try:
            receipt = await self._port.submit(request)
            if receipt.status == "rejected":
                raise RpcError(
                    -32603,
                    f"the session refused the prompt: {receipt.reason or 'rejected'}",
                    {"receipt": receipt.status},
                )
            turn.run_id = receipt.run_id
            if turn.cancelled:  # cancelled while it was being submitted
                await self._port.cancel(run_id=receipt.run_id)
            ids = {receipt.run_id}
            while True:
                event = await stream.get()
                if isinstance(event, RunPhaseNotice) and event.retry_of in ids:
                    ids.add(event.run_id)
                elif isinstance(event, QueueNotice) and event.run_id in ids and event.into_run_id:
                    ids.add(event.into_run_id)
                elif isinstance(event, TextDelta) and event.run_id in ids:
                    await self._update(
                        session,
                        {
                            "sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": event.text},
                        },
                    )
                elif isinstance(event, ToolCard) and event.run_id in ids:
                    await self._tool_card(session, turn, event)
                elif isinstance(event, ApprovalAsked) and event.run_id in ids:
                    await self._ask(session, turn, event)
                elif isinstance(event, ApprovalEnded):
                    pass
                elif isinstance(event, RunEnded) and event.run_id == receipt.run_id:
                    result: dict[str, Any] = {"stopReason": self._stop_reason(turn, event)}
                    if event.usage is not None:
                        result["usage"] = _usage_of(event.usage)
                        await self._usage_update(session, event.usage)
                    return result
                elif isinstance(event, StreamOverflow):
                    raise RpcError(-32603, f"lost the run's events: {event.reason}")
        except asyncio.CancelledError:
            if turn.run_id is not None:
                await asyncio.shield(self._port.cancel(run_id=turn.run_id))
            raise
        finally:
            stream.close()
            session.turns.remove(turn)

    def _skill_prompt(self, text: str) -> str:
        """``/NAME rest`` for an offered skill: the prompt asking the agent to use it."""
        stripped = text.strip()
        if not stripped.startswith("/"):
            return text
        name, _, rest = stripped[1:].partition(" ")
        if name not in self._skills:
            return text
        ask = f"Use the skill {name!r}: load it with the read_skill tool and follow it."
        return f"{ask}\n\n{rest.strip()}" if rest.strip() else ask

    async def _usage_update(self, session: AcpSession, usage: RunUsage) -> None:
        """``usage_update`` after a turn: the tokens of the turn's prompt against the model's
        context window, and the cost so far. Sent only when the window is known (a client
        shows ``used / size``); ``used`` is the prompt of the turn's last model call (what
        the context holds), or, when the run's end does not carry it (an older daemon), the
        prompts of every model call of the turn summed: an upper bound."""
        session.cost_usd += usage.cost_usd
        ref = usage.model or session.model
        model = next((m for m in self._models if m.ref == ref or (ref is None and m.default)), None)
        if model is None or model.context_window <= 0:
            return
        summed = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        update: dict[str, Any] = {
            "sessionUpdate": "usage_update",
            "used": usage.context_tokens or summed,
            "size": model.context_window,
        }
        if session.cost_usd > 0:
            update["cost"] = {"amount": round(session.cost_usd, 6), "currency": "USD"}
        await self._update(session, update)

    async def _compact(self, session: AcpSession) -> dict[str, Any]:
        result = await self._port.compact(session.key)
        if result.error:
            note = f"Compaction failed: {result.error}"
        elif not result.compacted:
            note = result.note or "Nothing to compact."
        else:
            note = (
                f"Compacted {result.messages_summarised} messages "
                f"({result.tokens_before} -> {result.tokens_after} tokens)."
            )
        await self._update(
            session,
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": note}},
        )
        return {"stopReason": "end_turn"}

    def _stop_reason(self, turn: Turn, end: RunEnded) -> str:
        code = str(end.error_code) if end.error_code is not None else None
        if turn.cancelled or code == "cancelled":
            return "cancelled"
        if code == "max_turns":
            return "max_turn_requests"
        if code == "context_overflow":
            return "max_tokens"
        if not end.ok:
            raise RpcError(-32603, end.error or f"the run failed ({code})", {"errorCode": code})
        return "end_turn"

    async def _tool_card(self, session: AcpSession, turn: Turn, card: ToolCard) -> None:
        if str(card.kind) == "reasoning":
            if card.message:
                await self._update(
                    session,
                    {
                        "sessionUpdate": "agent_thought_chunk",
                        "content": {"type": "text", "text": card.message},
                    },
                )
            return
        plan = _plan_of(card)
        if plan is not None:
            await self._update(session, {"sessionUpdate": "plan", "entries": plan})
        call = turn.calls.get(card.action_id)
        if call is None:
            update_call = tool_call_of(card)
            call = {
                "tool": tool_name_of(card),
                "args": update_call.get("rawInput", {}),
                "open": True,
                "update": update_call,
            }
            turn.calls[card.action_id] = call
            await self._update(session, update_call)
        if card.phase == "completed":
            call["open"] = False
            update: dict[str, Any] = {
                "sessionUpdate": "tool_call_update",
                "toolCallId": card.action_id,
                "status": "completed" if card.ok is not False else "failed",
            }
            output = card.message or card.detail.get("output")
            content: list[dict[str, Any]] = []
            diff = _diff_of(card, call["tool"], call["args"])
            if diff is not None:
                content.append(diff)
            if isinstance(output, str) and output:
                content.append({"type": "content", "content": {"type": "text", "text": output}})
            if content:
                update["content"] = content
            await self._update(session, update)
        elif card.phase == "updated" and call["open"]:
            update = {
                "sessionUpdate": "tool_call_update",
                "toolCallId": card.action_id,
                "status": "in_progress",
            }
            if card.message:  # progress so far (a running command's output): its last part
                call["progress"] = (call.get("progress", "") + card.message)[-PROGRESS_CHARS:]
                text = call["progress"]
                update["content"] = [{"type": "content", "content": {"type": "text", "text": text}}]
            await self._update(session, update)

    async def _ask(self, session: AcpSession, turn: Turn, asked: ApprovalAsked) -> None:
        # The question names the call the run announced for this tool (its card started
        # before it asked); a tool that asks before its card starts is announced here.
        open_calls = [
            (call_id, call)
            for call_id, call in turn.calls.items()
            if call["open"] and call["tool"] == asked.tool
        ]
        if open_calls:
            call_id, call = open_calls[-1]
            announced = call["update"]
            tool_call = {
                "toolCallId": call_id,
                "title": announced["title"],
                "kind": announced["kind"],
                "status": "pending",
                "rawInput": call["args"],
            }
        else:
            args = approval_arguments(asked.action)
            call_id = f"approval-{asked.approval_id}"
            command = approval_command(args)
            tool_call = {
                "toolCallId": call_id,
                "title": f"{asked.tool}: {command}" if command else asked.tool,
                "kind": tool_kind(asked.tool),
                "status": "pending",
                "rawInput": args,
            }
            turn.calls[call_id] = {
                "tool": asked.tool,
                "args": args,
                "open": True,
                "update": tool_call,
            }
            await self._update(session, {"sessionUpdate": "tool_call", **tool_call})
        assert self._rpc is not None
        loop = asyncio.get_running_loop()
        session.permission = loop.create_future()
        ask = loop.create_task(
            self._rpc.request(
                "session/request_permission",
                {
                    "sessionId": session.key,
                    "toolCall": tool_call,
                    "options": [dict(o) for o in _PERMISSION_OPTIONS],
                },
            )
        )
        decision = ApprovalDecision.DENY
        try:
            done, _ = await asyncio.wait(
                {ask, session.permission},
                timeout=self._permission_timeout_s,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if ask in done and ask.exception() is None:
                outcome = (ask.result() or {}).get("outcome") or {}
                if outcome.get("outcome") == "selected":
                    decision = _DECISIONS.get(str(outcome.get("optionId")), ApprovalDecision.DENY)
            elif ask in done:
                log.warning("the permission question failed: %s", ask.exception())
        finally:
            session.permission = None
            if not ask.done():
                ask.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await ask
        if turn.cancelled:
            decision = ApprovalDecision.DENY
        await self._port.resolve_approval(asked.approval_id, decision)


def _usage_of(usage: RunUsage) -> dict[str, int]:
    """A turn's token usage as ``PromptResponse.usage`` (unstable in ACP v1)."""
    inputs = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    return {
        "totalTokens": inputs + usage.output_tokens,
        "inputTokens": inputs,
        "outputTokens": usage.output_tokens,
        "cachedReadTokens": usage.cache_read_tokens,
        "cachedWriteTokens": usage.cache_write_tokens,
    }


def _diff_of(card: ToolCard, tool: str, args: object) -> dict[str, Any] | None:
    """The ``diff`` content of a finished write or edit (from its announced arguments)."""
    if card.ok is False or not isinstance(args, Mapping) or not isinstance(args.get("path"), str):
        return None
    if tool == "edit" and isinstance(args.get("new_text"), str):
        old = args.get("old_text")
        return {"type": "diff", "path": args["path"], "oldText": old, "newText": args["new_text"]}
    if tool == "write" and isinstance(args.get("content"), str):
        return {"type": "diff", "path": args["path"], "oldText": None, "newText": args["content"]}
    return None


def _plan_of(card: ToolCard) -> list[dict[str, str]] | None:
    """The ``plan`` entries a todo tool call wrote (``None``: not a todo write)."""
    detail = card.detail
    args = detail.get("arguments") or detail.get("args") or {}
    tool = detail.get("tool") or detail.get("name") or card.title
    if tool != "todo" or not isinstance(args, Mapping) or args.get("action") != "write":
        return None
    todos = args.get("todos")
    if card.phase != "started" or not isinstance(todos, list):
        return None
    return [
        {
            "content": str(t.get("content") or ""),
            "priority": str(t.get("priority") or "medium"),
            "status": _plan_status(t.get("status")),
        }
        for t in todos
        if isinstance(t, Mapping)
    ]


def _plan_status(value: object) -> str:
    text = str(value or "pending")
    return (
        text
        if text in ("pending", "in_progress", "completed")
        else ("completed" if text == "done" else "pending")
    )
