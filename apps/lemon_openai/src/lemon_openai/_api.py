"""The ``/v1`` ASGI application (no framework: four routes, and SSE written by hand).

Order of one request, and what each step guarantees:

1. ``Origin`` (browsers only send it): the daemon's own origin or one of
   ``[openai_api] cors_origins``, else a 403 before anything is read. CORS preflights are
   answered only for a configured origin (CORS is off by default).
2. ``Authorization: Bearer <token>``: any control-plane token (the local one, a stored one, a
   configured one); GET needs the ``read`` scope, POST ``write``. Only a loopback daemon whose
   ``local_auth`` is off (it then takes connections without a token) takes none. A 401 / 403
   otherwise, in OpenAI's error shape, like every refusal.
3. The body is read to at most ``max_body_bytes`` (413) within ``body_timeout_s`` (408), then
   parsed (:mod:`lemon_openai._wire`; a 400 names the field).
4. The run goes to the session port (:func:`~lemon_openai._runner.run_pieces`); the client
   going away (``http.disconnect``) cancels it. The session: ``X-Lemon-Session`` or ``user``
   (a key with ``:`` is used as it is, else ``openai:<value>``), ``previous_response_id`` for
   the Responses API, else a new ``openai:<uuid>`` per request. The answer names it in the
   ``X-Lemon-Session`` response header.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, MutableMapping
from typing import Any, Final, Protocol

from lemon_core.capabilities import ModelInfo
from lemon_core.execution import Receipt, RouterUnavailableError, RunRequest
from lemon_core.sessions import (
    InvalidSessionKeyError,
    RunEnded,
    SessionPort,
    ToolCard,
    check_session_key,
)
from lemon_openai._runner import RunTimeoutError, run_pieces
from lemon_openai._section import OpenAIApiConfig
from lemon_openai._wire import (
    ChatRequest,
    ResponsesRequest,
    parse_chat,
    parse_responses,
    render_prompt,
)
from lemon_openai.errors import ApiError

__all__ = ["API_PREFIX", "OpenAIApi", "TokenGate"]

log = logging.getLogger("lemon_openai.api")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

API_PREFIX: Final = "/v1"
_ORIGIN: Final = "openai_api"
_SESSION_HEADER: Final = "x-lemon-session"
_RESP_PREFIX: Final = "resp_"


class TokenGate(Protocol):
    """What the API asks the control plane (its running :class:`ControlPlane`)."""

    @property
    def requires_token(self) -> bool: ...

    def token_scopes(self, token: object) -> frozenset[str] | None: ...

    def origin_allowed(self, origin: str | None, host: str | None = None) -> bool: ...


def _error_for_run(end: RunEnded) -> ApiError:
    code = str(end.error_code) if end.error_code is not None else "run_failed"
    message = end.error or f"the run ended without an answer ({code})"
    if code == "rate_limited":
        return ApiError(429, message, type="rate_limit_error", code=code)
    if code == "bad_request":
        return ApiError(400, message, code=code)
    return ApiError(500, message, type="server_error", code=code)


def _usage_chat(end: RunEnded) -> dict[str, int]:
    usage = end.usage
    prompt = 0 if usage is None else usage.input_tokens + usage.cache_read_tokens
    completion = 0 if usage is None else usage.output_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _finish(end: RunEnded) -> str:
    return "length" if str(end.error_code or "") == "max_turns" else "stop"


class OpenAIApi:
    """See the module docstring. ``port`` is looked up per request (``None``: the router is
    not running: a 503)."""

    def __init__(
        self,
        *,
        config: OpenAIApiConfig,
        gate: TokenGate,
        port: Callable[[], SessionPort | None],
        models: Callable[[], list[ModelInfo]],
    ) -> None:
        self._config = config
        self._gate = gate
        self._port = port
        self._models = models
        self._requests = 0
        self._refused = 0
        self._cancelled = 0
        self._active = 0

    def statistics(self) -> dict[str, int]:
        return {
            "requests": self._requests,
            "refused": self._refused,
            "cancelled_by_disconnect": self._cancelled,
            "active": self._active,
        }

    # -- the ASGI entry -----------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        self._requests += 1
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        origin = headers.get("origin")
        cors = origin if origin is not None and origin in self._config.cors_origins else None
        try:
            if (
                origin is not None
                and cors is None
                and not self._gate.origin_allowed(origin, headers.get("host"))
            ):
                raise ApiError(
                    403,
                    f"the origin {origin!r} may not call this API",
                    type="permission_error",
                    code="origin_not_allowed",
                )
            if scope["method"] == "OPTIONS":
                if cors is None:
                    raise ApiError(
                        403,
                        "CORS is off for this origin ([openai_api] cors_origins)",
                        type="permission_error",
                        code="origin_not_allowed",
                    )
                await self._respond(send, 204, None, cors=cors, preflight=True)
                return
            scopes = self._authorize(headers)
            await self._route(scope, receive, send, headers, scopes, cors)
        except ApiError as exc:
            self._refused += 1
            await self._respond(send, exc.status, exc.body(), cors=cors)

    def _authorize(self, headers: Mapping[str, str]) -> frozenset[str]:
        if not self._gate.requires_token:
            return frozenset({"read", "write"})
        auth = headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(
                401,
                "send 'Authorization: Bearer <token>' with a control-plane token "
                "(lemon tokens create)",
                type="authentication_error",
                code="invalid_api_key",
            )
        scopes = self._gate.token_scopes(token.strip())
        if scopes is None:
            raise ApiError(
                401,
                "that token is not valid (revoked, rotated or mistyped)",
                type="authentication_error",
                code="invalid_api_key",
            )
        return scopes

    async def _route(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: Mapping[str, str],
        scopes: frozenset[str],
        cors: str | None,
    ) -> None:
        method, path = scope["method"], scope["path"].rstrip("/")
        if path in (f"{API_PREFIX}/models",) or path.startswith(f"{API_PREFIX}/models/"):
            if method != "GET":
                raise ApiError(405, f"{path} takes GET", code="method_not_allowed")
            _need(scopes, "read")
            await self._respond(send, 200, self._model_list(path), cors=cors)
            return
        if path not in (f"{API_PREFIX}/chat/completions", f"{API_PREFIX}/responses"):
            raise ApiError(404, f"no route {method} {path}", code="not_found")
        if method != "POST":
            raise ApiError(405, f"{path} takes POST", code="method_not_allowed")
        _need(scopes, "write")
        body = await self._body(receive, headers)
        port = self._port()
        if port is None:
            raise ApiError(
                503,
                "the daemon is starting or stopping; retry shortly",
                type="server_error",
                code="unavailable",
            )
        preapproved = frozenset(self._config.preapprove) if "approvals" in scopes else frozenset()
        if path.endswith("/chat/completions"):
            chat = parse_chat(body)
            work = self._chat(port, chat, headers, send, cors, preapproved)
        else:
            responses = parse_responses(body)
            work = self._responses(port, responses, send, cors, preapproved)
        await self._until_disconnect(work, receive)

    # -- helpers --------------------------------------------------------------------------------

    async def _until_disconnect(self, work: Coroutine[Any, Any, None], receive: Receive) -> None:
        """Run ``work``; the client going away first cancels it (and so the run)."""

        async def gone() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        self._active += 1
        task = asyncio.ensure_future(work)
        watch = asyncio.ensure_future(gone())
        try:
            done, _ = await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
            if task not in done:
                self._cancelled += 1
                task.cancel()
            await asyncio.wait({task})
            if not task.cancelled():
                task.result()
        finally:
            self._active -= 1
            watch.cancel()
            await asyncio.wait({watch})
            if not task.done():
                task.cancel()
                await asyncio.wait({task})

    async def _body(self, receive: Receive, headers: Mapping[str, str]) -> object:
        limit = self._config.max_body_bytes
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ApiError(
                413,
                f"the request body is larger than {limit} bytes ([openai_api] max_body_bytes)",
                code="request_too_large",
            )
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self._config.body_timeout_s):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise ApiError(400, "the client went away", code="client_closed")
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > limit:
                        raise ApiError(
                            413,
                            f"the request body is larger than {limit} bytes "
                            "([openai_api] max_body_bytes)",
                            code="request_too_large",
                        )
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            raise ApiError(408, "the request body did not arrive in time", code="timeout") from None
        try:
            return json.loads(b"".join(chunks) or b"null")
        except ValueError as exc:
            raise ApiError(
                400, f"the request body is not JSON: {exc}", code="invalid_json"
            ) from None

    def _model_list(self, path: str) -> dict[str, Any]:
        rows = [{"id": "lemon", "object": "model", "created": 0, "owned_by": "lemon"}]
        for model in self._models():
            if not model.unavailable:
                rows.append(
                    {
                        "id": f"lemon:{model.ref}",
                        "object": "model",
                        "created": 0,
                        "owned_by": model.provider,
                    }
                )
        wanted = path.removeprefix(f"{API_PREFIX}/models").lstrip("/")
        if wanted:
            for row in rows:
                if row["id"] == wanted:
                    return row
            raise ApiError(
                404, f"The model '{wanted}' does not exist", code="model_not_found", param="model"
            )
        return {"object": "list", "data": rows}

    def _session(self, named: str | None, param: str) -> tuple[str, bool]:
        """(session key, named by the client)."""
        if named is None:
            return f"openai:{uuid.uuid4()}", False
        key = named.strip() if ":" in named else f"openai:{named.strip()}"
        try:
            check_session_key(key)
        except InvalidSessionKeyError as exc:
            raise ApiError(
                400, f"'{param}' does not name a session: {exc}", param=param, code="invalid_value"
            ) from None
        return key, True

    async def _continuing(self, port: SessionPort, key: str) -> bool:
        page = await port.transcript(key, limit=1)
        return bool(page.entries)

    def _request(
        self,
        key: str,
        prompt: str,
        images: tuple[Mapping[str, Any], ...],
        model: str | None,
        preapproved: frozenset[str],
    ) -> RunRequest:
        return RunRequest(
            origin=_ORIGIN,
            session_key=key,
            prompt=prompt,
            agent_id=self._config.agent_id,
            queue_mode="followup",
            model=model,
            images=images,
            preapproved=preapproved,
        )

    async def _pieces(
        self, port: SessionPort, request: RunRequest
    ) -> AsyncIterator[Receipt | str | ToolCard | RunEnded]:
        try:
            async for piece in run_pieces(port, request, timeout_s=self._config.run_timeout_s):
                yield piece
        except RouterUnavailableError as exc:
            raise ApiError(
                503,
                f"the daemon cannot take runs now: {exc}",
                type="server_error",
                code="unavailable",
            ) from None
        except ValueError as exc:
            raise ApiError(400, str(exc), code="invalid_value") from None
        except RunTimeoutError as exc:
            raise ApiError(500, str(exc), type="server_error", code="timeout") from None

    async def _collect(
        self, port: SessionPort, request: RunRequest
    ) -> tuple[list[str], list[ToolCard], RunEnded]:
        """A non-streaming answer's pieces: the text deltas, the tool cards, the end."""
        texts: list[str] = []
        cards: list[ToolCard] = []
        end: RunEnded | None = None
        async for piece in self._pieces(port, request):
            if isinstance(piece, RunEnded):
                end = piece
            elif isinstance(piece, ToolCard):
                cards.append(piece)
            elif isinstance(piece, str):
                texts.append(piece)
        assert end is not None  # the pieces end with the run's end or raise
        return texts, cards, end

    async def _respond(
        self,
        send: Send,
        status: int,
        body: object,
        *,
        cors: str | None,
        preflight: bool = False,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        payload = b"" if body is None else json.dumps(body).encode()
        headers = [(b"content-type", b"application/json")] if body is not None else []
        headers.append((b"content-length", str(len(payload)).encode()))
        headers += _cors_headers(cors, preflight)
        headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    async def _start_sse(self, send: Send, cors: str | None, key: str) -> None:
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
            (_SESSION_HEADER.encode(), key.encode()),
            *_cors_headers(cors, False),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})

    # -- /v1/chat/completions -----------------------------------------------------------------

    async def _chat(
        self,
        port: SessionPort,
        chat: ChatRequest,
        headers: Mapping[str, str],
        send: Send,
        cors: str | None,
        preapproved: frozenset[str],
    ) -> None:
        named = headers.get(_SESSION_HEADER) or chat.user
        param = "X-Lemon-Session" if headers.get(_SESSION_HEADER) else "user"
        key, is_named = self._session(named, param)
        # Without an assistant message there is no earlier turn to leave out: the prompt is the
        # same either way, so the session's transcript is not read (a first turn's latency).
        replied = any(m.role == "assistant" for m in chat.messages)
        continuing = is_named and replied and await self._continuing(port, key)
        prompt, images = render_prompt(chat.messages, continuing=continuing)
        if not prompt.strip() and not images:
            raise ApiError(
                400,
                "'messages' holds no user text to answer",
                param="messages",
                code="invalid_value",
            )
        request = self._request(key, prompt, images, chat.model, preapproved)
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        if not chat.stream:
            texts, cards, end = await self._collect(port, request)
            if not end.ok and str(end.error_code or "") != "max_turns":
                raise _error_for_run(end)
            notes = "".join(n for n in map(_tool_note, cards) if n)
            text = notes + (end.answer or "".join(texts))
            message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
            if chat.lemon_tools:
                begun = [c for c in cards if c.phase == "started"]
                message["tool_calls"] = [_tool_call(c, i) for i, c in enumerate(begun)]
            body = {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": chat.model_name,
                "system_fingerprint": None,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": _finish(end),
                    }
                ],
                "usage": _usage_chat(end),
            }
            await self._respond(send, 200, body, cors=cors, extra={_SESSION_HEADER: key})
            return

        def chunk(delta: dict[str, Any], finish: str | None) -> bytes:
            data = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": chat.model_name,
                "system_fingerprint": None,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
            return b"data: " + json.dumps(data).encode() + b"\n\n"

        started = False
        calls = 0
        try:
            async for piece in self._pieces(port, request):
                if isinstance(piece, ToolCard):
                    note = _tool_note(piece)
                    if note:
                        await _write(send, chunk({"content": note}, None))
                    if chat.lemon_tools and piece.phase == "started":
                        call = _tool_call(piece, calls)
                        calls += 1
                        await _write(send, chunk({"tool_calls": [call]}, None))
                elif isinstance(piece, Receipt):
                    await self._start_sse(send, cors, key)
                    await _write(send, chunk({"role": "assistant", "content": ""}, None))
                    started = True
                elif isinstance(piece, RunEnded):
                    if not piece.ok and str(piece.error_code or "") != "max_turns":
                        raise _error_for_run(piece)
                    await _write(send, chunk({}, _finish(piece)))
                    if chat.include_usage:
                        usage = {
                            "id": completion_id,
                            "object": "chat.completion.chunk",
                            "created": created,
                            "model": chat.model_name,
                            "choices": [],
                            "usage": _usage_chat(piece),
                        }
                        await _write(send, b"data: " + json.dumps(usage).encode() + b"\n\n")
                elif piece:
                    await _write(send, chunk({"content": piece}, None))
        except ApiError as exc:
            if not started:
                raise
            await _write(send, b"data: " + json.dumps(exc.body()).encode() + b"\n\n")
        await _write(send, b"data: [DONE]\n\n", more=False)

    # -- /v1/responses ------------------------------------------------------------------------

    async def _responses(
        self,
        port: SessionPort,
        req: ResponsesRequest,
        send: Send,
        cors: str | None,
        preapproved: frozenset[str],
    ) -> None:
        if req.previous_response_id is not None:
            session_id = _session_of_response(req.previous_response_id)
            key = f"openai:resp-{session_id}"
            if not await self._continuing(port, key):
                raise ApiError(
                    404,
                    f"Previous response with id '{req.previous_response_id}' not found.",
                    param="previous_response_id",
                    code="previous_response_not_found",
                )
            continuing = True
        else:
            session_id = uuid.uuid4().hex
            key = f"openai:resp-{session_id}"
            continuing = False
        prompt, images = render_prompt(
            req.messages, continuing=continuing, instructions=req.instructions
        )
        if not prompt.strip() and not images:
            raise ApiError(
                400, "'input' holds no text to answer", param="input", code="invalid_value"
            )
        request = self._request(key, prompt, images, req.model, preapproved)
        response_id = f"{_RESP_PREFIX}{session_id}{uuid.uuid4().hex[:16]}"
        message_id = f"msg_{uuid.uuid4().hex}"
        created = int(time.time())

        def response(status: str, text: str | None, end: RunEnded | None) -> dict[str, Any]:
            output = (
                []
                if text is None
                else [
                    {
                        "type": "message",
                        "id": message_id,
                        "status": "completed",
                        "role": "assistant",
                        "content": [
                            {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
                        ],
                    }
                ]
            )
            usage = None
            if end is not None:
                u = _usage_chat(end)
                usage = {
                    "input_tokens": u["prompt_tokens"],
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": u["completion_tokens"],
                    "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": u["total_tokens"],
                }
            return {
                "id": response_id,
                "object": "response",
                "created_at": created,
                "status": status,
                "error": None,
                "incomplete_details": None,
                "instructions": req.instructions,
                "model": req.model_name,
                "output": output,
                "parallel_tool_calls": False,
                "previous_response_id": req.previous_response_id,
                "temperature": None,
                "top_p": None,
                "tool_choice": "none",
                "tools": [],
                "usage": usage,
                "metadata": {},
            }

        if not req.stream:
            texts, _cards, end = await self._collect(port, request)
            if not end.ok:
                raise _error_for_run(end)
            await self._respond(
                send,
                200,
                response("completed", end.answer or "".join(texts), end),
                cors=cors,
                extra={_SESSION_HEADER: key},
            )
            return

        seq = 0

        async def event(kind: str, data: dict[str, Any]) -> None:
            nonlocal seq
            seq += 1
            payload = {"type": kind, "sequence_number": seq, **data}
            await _write(send, f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode())

        await self._start_sse(send, cors, key)
        await event("response.created", {"response": response("in_progress", None, None)})
        await event("response.in_progress", {"response": response("in_progress", None, None)})
        item = {
            "type": "message",
            "id": message_id,
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        await event("response.output_item.added", {"output_index": 0, "item": item})
        where = {"item_id": message_id, "output_index": 0, "content_index": 0}
        await event(
            "response.content_part.added",
            {**where, "part": {"type": "output_text", "text": "", "annotations": []}},
        )
        texts = []
        try:
            async for piece in self._pieces(port, request):
                if isinstance(piece, Receipt | ToolCard):
                    continue
                if isinstance(piece, RunEnded):
                    if not piece.ok:
                        raise _error_for_run(piece)
                    text = piece.answer or "".join(texts)
                    await event(
                        "response.output_text.done", {**where, "text": text, "logprobs": []}
                    )
                    part = {"type": "output_text", "text": text, "annotations": []}
                    await event("response.content_part.done", {**where, "part": part})
                    done_item = {**item, "status": "completed", "content": [part]}
                    await event("response.output_item.done", {"output_index": 0, "item": done_item})
                    await event(
                        "response.completed", {"response": response("completed", text, piece)}
                    )
                elif piece:
                    texts.append(piece)
                    await event(
                        "response.output_text.delta", {**where, "delta": piece, "logprobs": []}
                    )
        except ApiError as exc:
            await event("error", {"code": exc.code, "message": exc.message, "param": exc.param})
        await _write(send, b"", more=False)


def _tool_name(card: ToolCard) -> str:
    return str(card.detail.get("tool") or card.detail.get("name") or card.title.split(" ", 1)[0])


def _tool_note(card: ToolCard) -> str | None:
    """Tool activity as the assistant's text: a line when a call starts, and when one fails."""
    if card.phase == "started":
        return f"\n[tool {card.title}]\n"
    if card.phase == "completed" and card.ok is False:
        reason = (card.message or "failed").strip().splitlines()
        return f"\n[tool {_tool_name(card)} failed: {reason[0][:200] if reason else 'failed'}]\n"
    return None


def _tool_call(card: ToolCard, index: int) -> dict[str, Any]:
    """A started call as a ``tool_calls`` entry (``x_lemon_tools``; the agent already ran it)."""
    args = card.detail.get("arguments") or card.detail.get("args") or {}
    return {
        "index": index,
        "id": card.action_id,
        "type": "function",
        "function": {"name": _tool_name(card), "arguments": json.dumps(args)},
    }


def _session_of_response(response_id: str) -> str:
    body = response_id.removeprefix(_RESP_PREFIX)
    session = body[:32]
    if (
        not response_id.startswith(_RESP_PREFIX)
        or len(session) != 32
        or any(c not in "0123456789abcdef" for c in session)
    ):
        raise ApiError(
            404,
            f"Previous response with id '{response_id}' not found.",
            param="previous_response_id",
            code="previous_response_not_found",
        )
    return session


def _need(scopes: frozenset[str], scope: str) -> None:
    if scope not in scopes:
        raise ApiError(
            403,
            f"this token lacks the '{scope}' scope",
            type="permission_error",
            code="insufficient_scope",
        )


def _cors_headers(cors: str | None, preflight: bool) -> list[tuple[bytes, bytes]]:
    if cors is None:
        return []
    out = [(b"access-control-allow-origin", cors.encode()), (b"vary", b"Origin")]
    if preflight:
        out += [
            (b"access-control-allow-methods", b"GET, POST, OPTIONS"),
            (b"access-control-allow-headers", b"authorization, content-type, x-lemon-session"),
            (b"access-control-max-age", b"600"),
        ]
    return out


async def _write(send: Send, data: bytes, *, more: bool = True) -> None:
    with contextlib.suppress(OSError):
        await send({"type": "http.response.body", "body": data, "more_body": more})
