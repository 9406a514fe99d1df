"""Fakes for tests and the benchmark: a Telegram Bot API server (real HTTP on 127.0.0.1) and a
hand-fed session port.

It speaks the Bot API's JSON wire format for what the plugin uses: ``getMe``, ``getUpdates``
(long polling with ``offset`` and ``timeout``), ``deleteWebhook``, ``setWebhook``,
``sendMessage``, ``editMessageText``, ``answerCallbackQuery``, ``getFile`` and file downloads,
with Telegram's errors: 401 for a bad token (or one revoked: :meth:`FakeTelegram.revoke_token`),
409 Conflict for a poll another process cut off (:meth:`FakeTelegram.refuse_polls`), 429
with ``parameters.retry_after``, 400
"Bad Request: message is not modified", "message is too long" (over 4,096 UTF-16 code units
displayed) and "can't parse entities" (HTML with a tag Telegram does not know, or tags that are
not properly nested or closed), and BUTTON_DATA_INVALID for a ``callback_data`` over 64
bytes. It serves on the test's own event loop (uvicorn),
so a test reads its state directly and waits on :meth:`FakeTelegram.wait_for`.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import re
import socket
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final

import msgspec
import uvicorn

from lemon_core.events import ApprovalDecision
from lemon_core.execution import Receipt, RunRequest
from lemon_core.sessions import (
    ALL_SESSIONS,
    THINKING_LEVELS,
    ApprovalResult,
    CancelResult,
    CompactResult,
    RunRecord,
    SessionChange,
    SessionEvent,
    SessionPortStatistics,
    SessionSettings,
    SessionSnapshot,
    SessionStreamClosedError,
    SessionSummary,
    SteerResult,
    StreamOverflow,
    ThinkingLevel,
    TranscriptEntry,
    TranscriptPage,
)

__all__ = ["FakeMessage", "FakeSessionPort", "FakeStream", "FakeTelegram", "displayed"]

_TAG: Final = re.compile(r"</?([a-zA-Z0-9-]+)(\s[^>]*)?>")
_KNOWN_TAGS: Final = frozenset(
    {
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "a",
        "code",
        "pre",
        "tg-spoiler",
        "span",
        "blockquote",
    }
)


def displayed(text: str, parse_mode: str | None) -> str:
    """What Telegram shows for ``text`` (HTML tags applied, entities decoded)."""
    if parse_mode != "HTML":
        return text
    return html.unescape(_TAG.sub("", text))


@dataclass(slots=True)
class FakeMessage:
    message_id: int
    chat_id: str
    text: str
    shown: str
    buttons: list[list[dict[str, str]]] = field(default_factory=list)
    edits: int = 0
    thread_id: int | None = None


class FakeTelegram:
    """See the module docstring. ``async with FakeTelegram(token=...) as tg``: ``tg.url`` is
    the ``api_base_url``."""

    def __init__(self, *, token: str = "123456:TEST-token", bot_id: int = 123456) -> None:
        self.token = token
        self.bot_id = bot_id
        self.messages: dict[int, FakeMessage] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.callback_answers: list[str] = []
        self.webhook: dict[str, Any] | None = None
        self.files: dict[str, bytes] = {}
        self._updates: list[dict[str, Any]] = []
        self._update_id = 1000
        self._message_id = 0
        self._refusals: dict[str, list[dict[str, Any]]] = {}
        self._gates: dict[str, asyncio.Event] = {}
        self._later: dict[str, dict[int, int]] = {}
        self._counts: dict[str, int] = {}
        self._changed = asyncio.Condition()
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None
        self._closing = False
        self._poll_refusals: list[tuple[int, str]] = []
        self.revoked = False

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> FakeTelegram:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        sock.setblocking(False)
        self._socket = sock
        config = uvicorn.Config(
            self._app,
            loop="none",
            http="h11",
            ws="none",
            lifespan="off",
            interface="asgi3",
            log_level="critical",
            access_log=False,
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._task = asyncio.ensure_future(self._server.serve(sockets=[sock]))
        # uvicorn has bound the socket it was given before serve() yields the first time;
        # a request queued now is answered as soon as the server loop runs.
        await asyncio.sleep(0)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for gate in self._gates.values():
            gate.set()
        async with self._changed:
            self._closing = True  # long polls answer now, so shutdown does not wait on them
            self._changed.notify_all()
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            await self._task
        if self._socket is not None:
            self._socket.close()

    @property
    def url(self) -> str:
        assert self._socket is not None
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    # -- controls --------------------------------------------------------------------------

    def refuse_next(self, method: str, *, retry_after: int | None = None, error: str = "") -> None:
        """Answer the next call of ``method`` with a 429 (``retry_after``) or a 400 ``error``."""
        if retry_after is not None:
            body = {
                "ok": False,
                "error_code": 429,
                "description": f"Too Many Requests: retry after {retry_after}",
                "parameters": {"retry_after": retry_after},
            }
        else:
            body = {"ok": False, "error_code": 400, "description": f"Bad Request: {error}"}
        self._refusals.setdefault(method, []).append(body)

    def refuse_call(self, method: str, nth: int, *, retry_after: int) -> None:
        """Answer the ``nth`` next call of ``method`` (1 = the next one) with a 429."""
        self._later.setdefault(method, {})[self._counts.get(method, 0) + nth] = retry_after

    async def refuse_polls(self, code: int, description: str, times: int) -> None:
        """Answer the next ``times`` ``getUpdates`` (the long poll in flight first) with
        ``code``: 409 "Conflict: terminated by other getUpdates request; make sure that only
        one bot instance is running" is what another process polling the same bot causes."""
        async with self._changed:
            self._poll_refusals += [(code, description)] * times
            self._changed.notify_all()

    async def revoke_token(self, revoked: bool = True) -> None:
        """The token is revoked (every call, the long poll in flight included, answers 401
        Unauthorized) or, with ``revoked=False``, valid again."""
        async with self._changed:
            self.revoked = revoked
            self._changed.notify_all()

    def hold(self, method: str) -> asyncio.Event:
        """Hold every call of ``method`` until the returned event is set."""
        gate = self._gates[method] = asyncio.Event()
        return gate

    def _next_update_id(self) -> int:
        self._update_id += 1
        return self._update_id

    async def _push(self, update: dict[str, Any]) -> None:
        async with self._changed:
            self._updates.append(update)
            self._changed.notify_all()

    def update_for_text(
        self,
        text: str,
        *,
        chat_id: int = 42,
        user_id: int = 42,
        username: str = "alice",
        chat_type: str = "private",
        photo: bytes | None = None,
    ) -> dict[str, Any]:
        """A ``message`` update as Telegram sends it (not queued)."""
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        message: dict[str, Any] = {
            "message_id": self._next_update_id(),
            "date": 1_700_000_000,
            "chat": chat,
            "from": {"id": user_id, "is_bot": False, "first_name": username, "username": username},
        }
        if photo is not None:
            file_id = f"file{len(self.files)}"
            self.files[file_id] = photo
            message["photo"] = [
                {"file_id": file_id + "s", "file_unique_id": "s", "width": 90, "height": 90},
                {
                    "file_id": file_id,
                    "file_unique_id": "l",
                    "width": 800,
                    "height": 800,
                    "file_size": len(photo),
                },
            ]
            if text:
                message["caption"] = text
        else:
            message["text"] = text
        return {"update_id": self._next_update_id(), "message": message}

    async def send_text(self, text: str, **kwargs: Any) -> None:
        """A person writes ``text`` (queued for ``getUpdates``)."""
        await self._push(self.update_for_text(text, **kwargs))

    async def press(self, message_id: int, data: str, *, user_id: int = 42) -> str:
        """A person presses a button carrying ``data``; returns the callback query id."""
        message = self.messages[message_id]
        query_id = f"cb{self._next_update_id()}"
        await self._push(
            {
                "update_id": self._next_update_id(),
                "callback_query": {
                    "id": query_id,
                    "from": {"id": user_id, "is_bot": False, "first_name": "u"},
                    "message": {
                        "message_id": message_id,
                        "date": 1_700_000_000,
                        "chat": {"id": int(message.chat_id), "type": "private"},
                        "text": message.shown,
                    },
                    "chat_instance": "1",
                    "data": data,
                },
            }
        )
        return query_id

    def chat(self, chat_id: int | str) -> list[FakeMessage]:
        """The bot's messages in a chat, oldest first."""
        return [m for m in self.messages.values() if m.chat_id == str(chat_id)]

    def method_calls(self, method: str) -> list[dict[str, Any]]:
        return [params for name, params in self.calls if name == method]

    async def wait_for(self, predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
        """Wait until ``predicate()`` holds (re-tested after every call the server answers)."""

        async def wait() -> None:
            async with self._changed:
                await self._changed.wait_for(predicate)

        await asyncio.wait_for(wait(), timeout_s)

    # -- the server ------------------------------------------------------------------------

    async def _app(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        path: str = scope["path"]
        status, answer, raw = await self._route(scope["method"], path, body)
        headers = [(b"content-type", b"application/octet-stream" if raw else b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send(
            {
                "type": "http.response.body",
                "body": raw if raw is not None else msgspec.json.encode(answer),
            }
        )
        async with self._changed:
            self._changed.notify_all()

    async def _route(
        self, method: str, path: str, body: bytes
    ) -> tuple[int, dict[str, Any], bytes | None]:
        prefix = f"/file/bot{self.token}/"
        if method == "GET" and path.startswith(prefix):
            data = self.files.get(path[len(prefix) :].removeprefix("photos/"))
            if data is None:
                return 404, {"ok": False, "error_code": 404, "description": "Not Found"}, None
            return 200, {}, data
        match = re.fullmatch(r"/bot([^/]+)/([A-Za-z]+)", path)
        if match is None:
            return 404, {"ok": False, "error_code": 404, "description": "Not Found"}, None
        if match.group(1) != self.token or self.revoked:
            return 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}, None
        name = match.group(2)
        params: dict[str, Any] = msgspec.json.decode(body) if body else {}
        self.calls.append((name, params))
        async with self._changed:
            self._changed.notify_all()
        count = self._counts[name] = self._counts.get(name, 0) + 1
        later = self._later.get(name, {}).pop(count, None)
        if later is not None:
            self.refuse_next(name, retry_after=later)
        gate = self._gates.get(name)
        if gate is not None:
            await gate.wait()
        refusals = self._refusals.get(name)
        if refusals:
            refusal = refusals.pop(0)
            return refusal["error_code"], refusal, None
        handler = getattr(self, f"_m_{name}", None)
        if handler is None:
            return 404, {"ok": False, "error_code": 404, "description": "Not Found: method"}, None
        result = await handler(params)
        if isinstance(result, tuple):
            return result[0], result[1], None
        return 200, {"ok": True, "result": result}, None

    @staticmethod
    def _bad(description: str) -> tuple[int, dict[str, Any]]:
        return 400, {"ok": False, "error_code": 400, "description": f"Bad Request: {description}"}

    def _check_text(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]] | str:
        text = str(params.get("text", ""))
        mode = params.get("parse_mode")
        if mode == "HTML":
            open_tags: list[str] = []
            for tag in _TAG.finditer(text):
                name = tag.group(1).lower()
                if name not in _KNOWN_TAGS:
                    return self._bad(f'can\'t parse entities: Unsupported start tag "{name}"')
                if not tag.group(0).startswith("</"):
                    open_tags.append(name)
                elif not open_tags or open_tags.pop() != name:
                    # Telegram refuses mis-nested markup ("<b><i></b></i>").
                    return self._bad(
                        f"can't parse entities: Unmatched end tag at byte offset {tag.start()}"
                    )
            if open_tags:
                return self._bad(
                    f"can't parse entities: Can't find end tag corresponding to start tag \""
                    f'{open_tags[-1]}"'
                )
        shown = displayed(text, mode)
        if not shown.strip():
            return self._bad("message text is empty")
        if len(shown.encode("utf-16-le")) // 2 > 4096:  # Telegram counts UTF-16 code units
            return self._bad("message is too long")
        return shown

    async def _m_getMe(self, params: dict[str, Any]) -> Any:
        return {"id": self.bot_id, "is_bot": True, "first_name": "Lemon", "username": "lemon_bot"}

    async def _m_deleteWebhook(self, params: dict[str, Any]) -> Any:
        self.webhook = None
        return True

    async def _m_setWebhook(self, params: dict[str, Any]) -> Any:
        self.webhook = params
        return True

    async def _m_getUpdates(self, params: dict[str, Any]) -> Any:
        if self.webhook is not None:
            return 409, {
                "ok": False,
                "error_code": 409,
                "description": "Conflict: can't use getUpdates while webhook is active",
            }
        offset = int(params.get("offset") or 0)
        self._updates = [u for u in self._updates if u["update_id"] >= offset]
        timeout = float(params.get("timeout") or 0)
        if not self._updates and not self._poll_refusals and timeout > 0:
            async with self._changed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        self._changed.wait_for(
                            lambda: (
                                bool(self._updates)
                                or self._closing
                                or bool(self._poll_refusals)
                                or self.revoked
                            )
                        ),
                        timeout,
                    )
        if self.revoked:
            return 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
        if self._poll_refusals:
            code, description = self._poll_refusals.pop(0)
            return code, {"ok": False, "error_code": code, "description": description}
        return list(self._updates[:100])

    def _check_buttons(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        for row in (params.get("reply_markup") or {}).get("inline_keyboard") or []:
            for button in row:
                if len(str(button.get("callback_data", "")).encode()) > 64:
                    return self._bad("BUTTON_DATA_INVALID")  # Telegram's 64-byte limit
        return None

    async def _m_sendMessage(self, params: dict[str, Any]) -> Any:
        shown = self._check_text(params)
        if not isinstance(shown, str):
            return shown
        refused = self._check_buttons(params)
        if refused is not None:
            return refused
        self._message_id += 1
        message = FakeMessage(
            message_id=self._message_id,
            chat_id=str(params["chat_id"]),
            text=str(params["text"]),
            shown=shown,
            buttons=list((params.get("reply_markup") or {}).get("inline_keyboard") or []),
            thread_id=params.get("message_thread_id"),
        )
        self.messages[message.message_id] = message
        return {
            "message_id": message.message_id,
            "date": 1_700_000_000,
            "chat": {"id": params["chat_id"]},
            "text": shown,
        }

    async def _m_editMessageText(self, params: dict[str, Any]) -> Any:
        message = self.messages.get(int(params.get("message_id", 0)))
        if message is None or message.chat_id != str(params.get("chat_id")):
            return self._bad("message to edit not found")
        shown = self._check_text(params)
        if not isinstance(shown, str):
            return shown
        refused = self._check_buttons(params)
        if refused is not None:
            return refused
        buttons = list((params.get("reply_markup") or {}).get("inline_keyboard") or [])
        if message.text == params["text"] and message.buttons == buttons:
            return self._bad(
                "message is not modified: specified new message content and reply markup are "
                "exactly the same as a current content and reply markup of the message"
            )
        message.text = str(params["text"])
        message.shown = shown
        message.buttons = buttons
        message.edits += 1
        return {"message_id": message.message_id, "text": shown}

    async def _m_answerCallbackQuery(self, params: dict[str, Any]) -> Any:
        self.callback_answers.append(str(params.get("text", "")))
        return True

    async def _m_getFile(self, params: dict[str, Any]) -> Any:
        file_id = str(params.get("file_id"))
        if file_id not in self.files:
            return self._bad("invalid file_id")
        return {
            "file_id": file_id,
            "file_size": len(self.files[file_id]),
            "file_path": f"photos/{file_id}",
        }


class FakeStream:
    """One watch's stream, fed by the test (``push``); ``drained`` is set once the
    reader took everything pushed.

    Reading costs what a real stream's read costs (``SessionStreamBase``: a ready event is
    popped from a deque, no queue coroutine per event), so a bench through this fake measures
    its reader, not the fake."""

    def __init__(self, session_key: str) -> None:
        self.session_key = session_key
        self._ready: deque[SessionEvent] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self.drained = asyncio.Event()

    def push(self, *events: SessionEvent) -> None:
        self.drained.clear()
        self._ready.extend(events)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> SessionEvent:
        while True:
            if self._closed:
                raise SessionStreamClosedError("closed")
            ready = self._ready
            if ready:
                event = ready.popleft()
                if not ready:
                    self.drained.set()
                if isinstance(event, StreamOverflow):
                    self._closed = True
                return event
            self.drained.set()
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiter = waiter
            try:
                await waiter
            finally:
                self._waiter = None

    def __aiter__(self) -> AsyncIterator[SessionEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[SessionEvent]:
        while True:
            try:
                yield await self.get()
            except SessionStreamClosedError:
                return

    def close(self) -> None:
        self._closed = True
        self._wake()

    @property
    def closed(self) -> bool:
        return self._closed


class FakeSessionPort:
    """A :class:`~lemon_core.sessions.SessionPort` whose streams the test feeds by hand
    (what a :class:`~lemon_channels.SessionPump` reads: ``watch``, ``watch_all``,
    ``snapshot``, ``transcript``); ``submit`` records the request and answers a started
    receipt. ``settings`` / ``patch`` keep per-session settings in memory (``patch`` refuses
    what the real port refuses: a blank value, an unknown thinking level); ``reset`` /
    ``delete`` record the key and answer done (``delete`` forgets the settings); ``runs``
    answers ``run_records`` (set by the test), newest first as given."""

    def __init__(self) -> None:
        self.streams: list[FakeStream] = []
        self.session_settings: dict[str, SessionSettings] = {}
        self.run_records: list[RunRecord] = []
        self.resets: list[str] = []
        self.deletes: list[str] = []
        self._new = asyncio.Event()
        self.snapshot_value: SessionSnapshot | None = None
        self.transcript_entries: tuple[TranscriptEntry, ...] = ()
        self.submitted: list[RunRequest] = []
        self._submitted = asyncio.Event()

    async def next_submission(self, count: int) -> RunRequest:
        """The ``count``-th request submitted (1-based), once it exists."""
        while len(self.submitted) < count:
            self._submitted.clear()
            await self._submitted.wait()
        return self.submitted[count - 1]

    async def next_stream(self, count: int) -> FakeStream:
        """The ``count``-th stream watched (1-based), once it exists."""
        while len(self.streams) < count:
            self._new.clear()
            await self._new.wait()
        return self.streams[count - 1]

    def watch(self, session_key: str) -> FakeStream:
        stream = FakeStream(session_key)
        self.streams.append(stream)
        self._new.set()
        return stream

    def watch_all(self) -> FakeStream:
        return self.watch(ALL_SESSIONS)

    async def snapshot(self, session_key: str) -> SessionSnapshot:
        return self.snapshot_value or SessionSnapshot(session_key=session_key)

    async def transcript(
        self, session_key: str, *, limit: int = 50, before: int | None = None
    ) -> TranscriptPage:
        return TranscriptPage(session_key=session_key, entries=self.transcript_entries[-limit:])

    async def submit(self, request: RunRequest) -> Receipt:
        self.submitted.append(request)
        self._submitted.set()
        return Receipt(
            run_id=request.run_id or f"run_{len(self.submitted)}",
            session_key=request.session_key,
            requested_mode=request.queue_mode,
            actual_mode=request.queue_mode,
            status="started",
            at_ms=0,
        )

    async def steer(self, session_key: str, text: str) -> SteerResult:
        raise NotImplementedError

    async def cancel(
        self,
        *,
        run_id: str | None = None,
        session_key: str | None = None,
        include_queued: bool = True,
    ) -> CancelResult:
        return CancelResult(cancelled=0)

    async def resolve_approval(
        self, approval_id: str, decision: ApprovalDecision | str
    ) -> ApprovalResult:
        return ApprovalResult(resolved=False, reason="unknown")

    async def sessions(self, *, limit: int = 50) -> list[SessionSummary]:
        return []

    async def runs(self, *, limit: int = 50, since_ms: int | None = None) -> list[RunRecord]:
        records = [r for r in self.run_records if since_ms is None or r.finished_at_ms >= since_ms]
        return records[:limit]

    async def compact(self, session_key: str, *, instructions: str | None = None) -> CompactResult:
        raise NotImplementedError

    async def settings(self, session_key: str) -> SessionSettings:
        return self.session_settings.get(session_key) or SessionSettings(session_key=session_key)

    async def patch(
        self,
        session_key: str,
        *,
        model: str | msgspec.UnsetType | None = msgspec.UNSET,
        label: str | msgspec.UnsetType | None = msgspec.UNSET,
        thinking_level: ThinkingLevel | msgspec.UnsetType | None = msgspec.UNSET,
        workspace: str | msgspec.UnsetType | None = msgspec.UNSET,
    ) -> SessionSettings:
        for name, value in (("model", model), ("label", label), ("workspace", workspace)):
            if isinstance(value, str) and not value.strip():
                raise ValueError(f"{name} must not be blank; pass None to clear it")
        if isinstance(thinking_level, str) and thinking_level not in THINKING_LEVELS:
            raise ValueError(
                f"unknown thinking level {thinking_level!r}; use one of {list(THINKING_LEVELS)}"
            )
        current = await self.settings(session_key)
        changes: dict[str, Any] = {
            name: value
            for name, value in (
                ("model", model),
                ("label", label),
                ("thinking_level", thinking_level),
                ("workspace", workspace),
            )
            if value is not msgspec.UNSET
        }
        updated = msgspec.structs.replace(current, **changes)
        self.session_settings[session_key] = updated
        return updated

    async def reset(self, session_key: str) -> SessionChange:
        self.resets.append(session_key)
        return SessionChange(session_key=session_key, done=True)

    async def delete(self, session_key: str) -> SessionChange:
        self.deletes.append(session_key)
        self.session_settings.pop(session_key, None)
        return SessionChange(session_key=session_key, done=True)

    def statistics(self) -> SessionPortStatistics:
        return SessionPortStatistics(
            watchers=sum(1 for s in self.streams if not s.closed),
            streams_opened=len(self.streams),
            streams_overflowed=0,
            snapshots=0,
            snapshot_retries=0,
            active_runs=0,
            conversations=0,
            submitted=len(self.submitted),
        )
