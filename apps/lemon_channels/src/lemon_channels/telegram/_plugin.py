"""The Telegram plugin: the Bot API over httpx (long polling by default, or a webhook).

Inbound: ``getUpdates`` long polling (``offset`` acknowledges what was handled), or updates
POSTed to the daemon at ``/channels/telegram`` with the ``X-Telegram-Bot-Api-Secret-Token``
header checked (constant-time) against the configured secret. Messages (text, captions,
photos: the largest size is downloaded and passed on as an image) and button presses
(``callback_query``) become :class:`~lemon_core.channels.InboundMessage` records.

Outbound: ``sendMessage`` / ``editMessageText`` with ``parse_mode=HTML`` (Markdown rendered
and escaped by :mod:`._render`), inline keyboards for approvals, ``answerCallbackQuery``.
A 429's ``parameters.retry_after`` is reported to the outbox; 400 "message is not modified"
is success. The bot token is part of every Bot API URL: a logging filter on httpx's logger
replaces it, and no error text or status carries it.

Status while polling: :data:`POLL_FAILURES_BEFORE_FAILED` consecutive failed ``getUpdates``
(409 Conflict: another process polls the same bot; 401: the token was revoked; the Bot API
unreachable) turn the status FAILED with a sentence saying why and what to do; polling goes on
(``lemon_core.Backoff`` from 0.5 s doubling up to 30 s, jittered; a 429's ``retry_after`` is
waited for first, up to 300 s), and the first answered poll makes it RUNNING again. Each change is
reported to ``on_status`` (the host records it for ``lemon channels status``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hmac
import html
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any, Final

import httpx
import msgspec

from lemon_channels.telegram._render import MAX_MESSAGE_CHARS, markdown_to_html, split_markdown
from lemon_core.backoff import Backoff
from lemon_core.channels import (
    CallbackQuery,
    ChannelState,
    ChannelStatus,
    DeliveryIntent,
    DeliveryRoute,
    InboundImage,
    InboundMessage,
    InboundSink,
    IntentKind,
    SendResult,
)
from lemon_core.mounts import HttpMounts

__all__ = [
    "CHOICE_LABELS",
    "POLL_FAILURES_BEFORE_FAILED",
    "WEBHOOK_PATH",
    "TelegramPayload",
    "TelegramPlugin",
]

_log = logging.getLogger("lemon_channels.telegram")

#: Where webhook mode mounts its ASGI app on the daemon.
WEBHOOK_PATH: Final = "/channels/telegram"
#: Button labels of the approval choices.
CHOICE_LABELS: Final = {
    "approve_once": "Once",
    "approve_session": "This session",
    "approve_agent": "Always",
    "approve_global": "Always (all agents)",
    "deny": "Deny",
}
_MAX_PHOTO_BYTES: Final = 10 * 1024 * 1024
_MAX_WEBHOOK_BODY: Final = 1024 * 1024
#: Updates handled at once in webhook mode; beyond it the POST is refused (Telegram retries).
_MAX_WEBHOOK_IN_FLIGHT: Final = 256
_ERROR_CHARS: Final = 300
#: Between failed ``getUpdates``; a 429's ``retry_after`` is honoured up to its retry_after_cap.
_POLL_BACKOFF: Final = Backoff(initial=0.5, cap=30.0)
#: How long a stop waits for the updates in hand to finish.
_STOP_GRACE_S: Final = 10.0
_ANY_TAG: Final = re.compile(r"<[^<>]*>")
#: Consecutive failed ``getUpdates`` after which a polling channel's status is FAILED.
POLL_FAILURES_BEFORE_FAILED: Final = 3


class TelegramPayload(msgspec.Struct, frozen=True, kw_only=True):
    """One Bot API message: HTML text, optional inline buttons (rows of (label, data))."""

    chat_id: str
    text: str
    thread_id: str | None = None
    buttons: tuple[tuple[tuple[str, str], ...], ...] = ()


def _person(sender: object) -> str | None:
    """The user id of an update's ``from``, or ``None`` when there is no person."""
    if not isinstance(sender, dict):
        return None
    user_id = sender.get("id")
    return str(user_id) if isinstance(user_id, int) and not isinstance(user_id, bool) else None


def _plain(markup: str) -> str:
    """The text Telegram HTML displays (tags dropped, entities decoded)."""
    return html.unescape(_ANY_TAG.sub("", markup))


class _RedactToken(logging.Filter):
    def __init__(self, token: str) -> None:
        super().__init__()
        self._token = token

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self._token in message:
            record.msg = message.replace(self._token, "<token>")
            record.args = ()
        return True


class TelegramPlugin:
    """See the module docstring."""

    channel_id: str = "telegram"
    max_text_chars: int = MAX_MESSAGE_CHARS

    def __init__(
        self,
        *,
        token: str,
        api_base_url: str = "https://api.telegram.org",
        token_name: str = "TELEGRAM_BOT_TOKEN",
        mode: str = "polling",
        poll_timeout_s: int = 25,
        webhook_url: str | None = None,
        webhook_secret: str | None = None,
        mounts: HttpMounts | None = None,
    ) -> None:
        self._token = token
        self._token_name = token_name
        self._base = api_base_url.rstrip("/")
        self._mode = mode
        self._poll_timeout = poll_timeout_s
        self._webhook_url = webhook_url
        self._webhook_secret = webhook_secret
        self._mounts = mounts
        self._http: httpx.AsyncClient | None = None
        self._sink: InboundSink | None = None
        self._poller: asyncio.Task[None] | None = None
        self._in_hand: asyncio.Future[None] | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._filter = _RedactToken(token)
        self._status = ChannelStatus(
            channel_id=self.channel_id, state=ChannelState.STOPPED, mode=mode
        )
        self._account: str | None = None
        self._username: str | None = None
        self._offset = 0
        self._running_detail = ""
        self._poll_failures = 0
        self.on_status: Callable[[ChannelStatus], None] | None = None
        """Called (on the loop) after each status change the poller makes by itself."""
        self.updates = 0
        self.rejected_webhook = 0

    # -- lifecycle -------------------------------------------------------------------------

    def status(self) -> ChannelStatus:
        return self._status

    def _set(self, state: ChannelState, detail: str) -> ChannelStatus:
        self._status = ChannelStatus(
            channel_id=self.channel_id,
            state=state,
            account_id=self._account,
            mode=self._mode,
            detail=detail,
        )
        return self._status

    async def start(self, sink: InboundSink) -> ChannelStatus:
        if self._status.state is ChannelState.RUNNING or self._poller is not None:
            return self._status  # running, or polling through a failure it reported
        self._set(ChannelState.STARTING, "connecting")
        self._sink = sink
        logging.getLogger("httpx").addFilter(self._filter)
        self._http = httpx.AsyncClient(
            base_url=f"{self._base}/bot{self._token}/",
            timeout=httpx.Timeout(10.0, read=self._poll_timeout + 15.0),
        )
        try:
            me = await self._call("getMe", {})
        except httpx.HTTPError as exc:
            await self._close_http()
            return self._set(
                ChannelState.FAILED,
                f"cannot reach the Bot API at {self._base} ({type(exc).__name__}); "
                "check [channels.telegram] api_base_url and the network",
            )
        if not me.get("ok"):
            await self._close_http()
            code = me.get("error_code")
            if code in (401, 404):
                detail = (
                    f"Telegram refused the bot token in {self._token_name} ({code} "
                    f"{me.get('description', '')}); put the token @BotFather gave you in "
                    f"{self._token_name} (environment or $LEMON_HOME/secrets.env)"
                )
            else:
                detail = f"getMe failed: {str(me.get('description'))[:_ERROR_CHARS]}"
            return self._set(ChannelState.FAILED, detail)
        result = me.get("result") or {}
        self._account = str(result.get("id", "bot"))
        username = result.get("username")
        self._username = username.lower() if isinstance(username, str) else None
        try:
            if self._mode == "webhook":
                problem = await self._start_webhook()
            else:
                problem = None
                await self._call("deleteWebhook", {"drop_pending_updates": False})
        except httpx.HTTPError as exc:  # the network went away after getMe
            if self._mode == "webhook" and self._mounts is not None:
                self._mounts.unmount(WEBHOOK_PATH)
            problem = (
                f"cannot reach the Bot API at {self._base} ({type(exc).__name__}); "
                "check [channels.telegram] api_base_url and the network"
            )
        if problem is not None:
            await self._close_http()
            return self._set(ChannelState.FAILED, problem)
        self._running_detail = (
            f"@{username} ({self._mode})" if username else f"bot {self._account} ({self._mode})"
        )
        self._poll_failures = 0
        if self._mode != "webhook":
            self._poller = asyncio.ensure_future(self._poll())
        return self._set(ChannelState.RUNNING, self._running_detail)

    async def _start_webhook(self) -> str | None:
        if self._mounts is None or not self._webhook_url or not self._webhook_secret:
            return "webhook mode needs the daemon's HTTP server, webhook_url and the secret"
        self._mounts.mount(
            WEBHOOK_PATH, self._webhook_app, owner="lemon_channels", description="Telegram"
        )
        answer = await self._call(
            "setWebhook",
            {
                "url": self._webhook_url,
                "secret_token": self._webhook_secret,
                "allowed_updates": ["message", "callback_query"],
            },
        )
        if not answer.get("ok"):
            self._mounts.unmount(WEBHOOK_PATH)
            return f"setWebhook failed: {str(answer.get('description'))[:_ERROR_CHARS]}"
        return None

    async def stop(self) -> None:
        """Stop receiving; the updates in hand get ``_STOP_GRACE_S`` to finish."""
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
            self._poller = None
        if self._mode == "webhook" and self._mounts is not None:
            self._mounts.unmount(WEBHOOK_PATH)
        in_hand: set[asyncio.Future[None]] = set(self._handlers)
        if self._in_hand is not None:
            in_hand.add(self._in_hand)
            self._in_hand = None
        if in_hand:
            _, late = await asyncio.wait(in_hand, timeout=_STOP_GRACE_S)
            for task in late:
                task.cancel()
            await asyncio.gather(*in_hand, return_exceptions=True)
        await self._close_http()
        if self._poll_failures >= POLL_FAILURES_BEFORE_FAILED:
            # Failed while polling: the daemon no longer runs it, but the reason still matters.
            self._set(ChannelState.STOPPED, f"stopped; before that: {self._status.detail}")
        elif self._status.state is not ChannelState.FAILED:
            self._set(ChannelState.STOPPED, "stopped")
        self._poll_failures = 0

    async def _close_http(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None
        logging.getLogger("httpx").removeFilter(self._filter)

    # -- the Bot API -----------------------------------------------------------------------

    async def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self._http is None:
            return {"ok": False, "description": "the channel is stopped"}
        response = await self._http.post(method, json=params)
        try:
            data = response.json()
        except ValueError:
            return {
                "ok": False,
                "error_code": response.status_code,
                "description": f"HTTP {response.status_code} without a JSON body",
            }
        return data if isinstance(data, dict) else {"ok": False, "description": "not an object"}

    async def _send(self, method: str, params: dict[str, Any]) -> SendResult:
        try:
            data = await self._call(method, params)
        except httpx.HTTPError as exc:
            return SendResult(ok=False, error=f"{method}: {type(exc).__name__}")
        if data.get("ok"):
            result = data.get("result")
            message_id = result.get("message_id") if isinstance(result, dict) else None
            return SendResult(ok=True, message_id=None if message_id is None else str(message_id))
        code = data.get("error_code")
        description = str(data.get("description", ""))[:_ERROR_CHARS]
        if code == 400 and "can't parse entities" in description and "parse_mode" in params:
            # The renderer's output is meant to parse; if Telegram disagrees, the words still
            # matter more than their formatting: send them as plain text rather than nothing.
            _log.warning("telegram: %s refused the markup (%s); sent as plain text", method, code)
            plain = dict(params, text=_plain(str(params.get("text", ""))))
            del plain["parse_mode"]
            return await self._send(method, plain)
        if code == 400 and "message is not modified" in description:
            return SendResult(ok=True, message_id=str(params.get("message_id", "")) or None)
        parameters = data.get("parameters") or {}
        retry_after = parameters.get("retry_after") if isinstance(parameters, dict) else None
        return SendResult(
            ok=False,
            error=f"{method}: {code} {description}",
            retry_after=float(retry_after) if isinstance(retry_after, int | float) else None,
            permanent=code in (400, 401, 403, 404),
        )

    # -- inbound ---------------------------------------------------------------------------

    async def _poll(self) -> None:
        """Long-poll ``getUpdates`` until cancelled. Nothing the server answers stops it: a
        refusal or an answer of the wrong shape is logged and retried with backoff."""
        failures = 0
        while True:
            try:
                updates = await self._poll_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a malformed answer, say: never the end of the channel
                _log.warning("telegram: getUpdates failed (%s); retrying", type(exc).__name__)
                updates = None
                self._poll_failed(f"getUpdates failed ({type(exc).__name__})")
            if updates is None:
                failures += 1
                await asyncio.sleep(_POLL_BACKOFF.delay(failures))
                continue
            failures = 0
            self._poll_answered()
            for update in updates:
                update_id = update.get("update_id")
                if not isinstance(update_id, int) or isinstance(update_id, bool):
                    continue  # cannot be acknowledged, so cannot be handled exactly once
                self._offset = max(self._offset, update_id + 1)
                # Shielded: a stop ends the loop here but lets the update in hand finish
                # (the host marks it taken first; cut off, it would be neither done nor redone).
                self._in_hand = asyncio.ensure_future(self._handle(update))
                await asyncio.shield(self._in_hand)
                self._in_hand = None

    async def _poll_once(self) -> list[dict[str, Any]] | None:
        """One ``getUpdates``: the updates, or ``None`` after a failure (already waited for
        the server's ``retry_after`` when it gave one)."""
        try:
            data = await self._call(
                "getUpdates",
                {
                    "offset": self._offset,
                    "timeout": self._poll_timeout,
                    "allowed_updates": ["message", "callback_query"],
                },
            )
        except httpx.HTTPError as exc:
            _log.warning("telegram: getUpdates failed (%s); retrying", type(exc).__name__)
            self._poll_failed(
                f"cannot reach the Bot API at {self._base} ({type(exc).__name__}); check "
                "[channels.telegram] api_base_url and the network (retrying)"
            )
            return None
        if not data.get("ok"):
            parameters = data.get("parameters")
            retry = parameters.get("retry_after") if isinstance(parameters, dict) else None
            description = str(data.get("description"))[:_ERROR_CHARS]
            _log.warning("telegram: getUpdates refused: %s", description)
            if isinstance(retry, int | float) and retry > 0:
                await asyncio.sleep(min(float(retry), _POLL_BACKOFF.retry_after_cap))
            else:  # a 429 is flow control, not a failure of the channel
                self._poll_failed(self._refusal_detail(data.get("error_code"), description))
            return None
        result = data.get("result")
        if not isinstance(result, list):
            self._poll_failed("getUpdates answered with something other than a list (retrying)")
            return None
        return [update for update in result if isinstance(update, dict)]

    def _refusal_detail(self, code: object, description: str) -> str:
        if code == 409:
            return (
                f"Telegram refused polling (409 {description}): another process polls this bot "
                "(a second daemon with the same token, or a webhook set for it elsewhere); "
                "stop the other one (retrying)"
            )
        if code in (401, 404):
            return (
                f"Telegram refused the bot token in {self._token_name} while polling ({code} "
                f"{description}): it was revoked or changed; put the token @BotFather gives "
                f"you in {self._token_name} and restart the daemon (retrying)"
            )
        return f"getUpdates refused ({code} {description}) (retrying)"

    def _poll_failed(self, detail: str) -> None:
        self._poll_failures += 1
        if self._poll_failures >= POLL_FAILURES_BEFORE_FAILED and (
            self._status.state is not ChannelState.FAILED or self._status.detail != detail
        ):
            self._set(ChannelState.FAILED, detail)
            self._changed()

    def _poll_answered(self) -> None:
        failed = self._poll_failures >= POLL_FAILURES_BEFORE_FAILED
        self._poll_failures = 0
        if failed and self._status.state is ChannelState.FAILED:
            self._set(ChannelState.RUNNING, self._running_detail)
            self._changed()

    def _changed(self) -> None:
        if self.on_status is None:
            return
        try:
            self.on_status(self._status)
        except Exception as exc:  # a listener never breaks polling
            _log.warning("telegram: status listener raised %r", exc)

    async def _handle(self, update: dict[str, Any]) -> None:
        """Turn one update into an inbound message and hand it to the sink (errors logged:
        one bad update never stops the channel)."""
        self.updates += 1
        try:
            inbound = await self._parse(update)
            if inbound is not None and self._sink is not None:
                await self._sink(inbound)
        except Exception:
            _log.exception("telegram: update %s not handled", update.get("update_id"))

    def _route(self, chat: dict[str, Any], thread: object) -> DeliveryRoute:
        kind = {"private": "dm", "group": "group", "supergroup": "group", "channel": "channel"}
        return DeliveryRoute(
            channel_id=self.channel_id,
            account_id=self._account or "bot",
            peer_kind=kind.get(str(chat.get("type")), "unknown"),  # type: ignore[arg-type]  # values are PeerKinds
            peer_id=str(chat.get("id")),
            thread_id=None if thread is None else str(thread),
        )

    async def _parse(self, update: dict[str, Any]) -> InboundMessage | None:
        callback = update.get("callback_query")
        if isinstance(callback, dict):
            message = callback.get("message") or {}
            chat = message.get("chat")
            sender = callback.get("from")
            if not isinstance(chat, dict) or _person(sender) is None:
                return None  # a press on an inline-mode message (no chat), or no person
            assert isinstance(sender, dict)
            thread = message.get("message_thread_id") if message.get("is_topic_message") else None
            return InboundMessage(
                route=self._route(chat, thread),
                user_id=str(sender.get("id")),
                user_name=sender.get("username"),
                callback=CallbackQuery(
                    callback_id=str(callback.get("id")),
                    data=str(callback.get("data", "")),
                    message_id=str(message.get("message_id")) if message else None,
                ),
            )
        message = update.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("chat"), dict):
            return None
        sender = message.get("from")
        if message.get("sender_chat") is not None or _person(sender) is None:
            # Sent on behalf of a chat (``from`` is then a placeholder shared by every such
            # chat: allowing or pairing it would let them all in), or by nobody: not a person.
            return None
        assert isinstance(sender, dict)
        text = str(message.get("text") or message.get("caption") or "")
        if self._for_another_bot(text):
            return None
        images: tuple[InboundImage, ...] = ()
        photos = message.get("photo")
        if isinstance(photos, list) and photos:
            image = await self._download(photos[-1])
            images = () if image is None else (image,)
        thread = message.get("message_thread_id") if message.get("is_topic_message") else None
        return InboundMessage(
            route=self._route(message["chat"], thread),
            user_id=str(sender.get("id")),
            user_name=sender.get("username"),
            text=text,
            images=images,
            message_id=str(message.get("message_id")),
        )

    def _for_another_bot(self, text: str) -> bool:
        """``/command@name`` where ``name`` is not this bot (a group with several bots)."""
        if not text.startswith("/"):
            return False
        command = text.split(maxsplit=1)[0]
        _, at, name = command.partition("@")
        return bool(at) and self._username is not None and name.lower() != self._username

    async def _download(self, photo: dict[str, Any]) -> InboundImage | None:
        if self._http is None or int(photo.get("file_size") or 0) > _MAX_PHOTO_BYTES:
            return None
        try:
            info = await self._call("getFile", {"file_id": photo.get("file_id")})
            result = info.get("result") if info.get("ok") else None
            path = result.get("file_path") if isinstance(result, dict) else None
            if not isinstance(path, str):
                return None
            response = await self._http.get(f"{self._base}/file/bot{self._token}/{path}")
        except httpx.HTTPError as exc:  # the message still counts: it goes on without it
            _log.warning("telegram: a photo was not downloaded (%s)", type(exc).__name__)
            return None
        if response.status_code != 200 or len(response.content) > _MAX_PHOTO_BYTES:
            return None
        mime = "image/png" if path.lower().endswith(".png") else "image/jpeg"
        return InboundImage(data=base64.b64encode(response.content).decode(), mime_type=mime)

    async def _webhook_app(self, scope: Any, receive: Any, send: Any) -> None:
        """The ASGI app webhook mode mounts: POST updates with the secret header."""

        async def reply(status: int, body: bytes = b"") -> None:
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})

        if scope.get("type") != "http":
            return
        if scope.get("method") != "POST":
            await reply(405, b'{"ok":false}')
            return
        headers = dict(scope.get("headers") or ())
        secret = headers.get(b"x-telegram-bot-api-secret-token", b"")
        expected = (self._webhook_secret or "").encode()
        if not expected or not hmac.compare_digest(secret, expected):
            self.rejected_webhook += 1
            await reply(401, b'{"ok":false}')
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if len(body) > _MAX_WEBHOOK_BODY:
                await reply(413, b'{"ok":false}')
                return
            if not message.get("more_body"):
                break
        try:
            update = msgspec.json.decode(body)
        except msgspec.DecodeError:
            await reply(400, b'{"ok":false}')
            return
        if len(self._handlers) >= _MAX_WEBHOOK_IN_FLIGHT:
            # Telegram redelivers an update answered with an error: nothing is lost.
            await reply(503, b'{"ok":false}')
            return
        if isinstance(update, dict):
            task = asyncio.ensure_future(self._handle(update))
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)
        await reply(200, b'{"ok":true}')

    # -- outbound --------------------------------------------------------------------------

    def render(self, intent: DeliveryIntent) -> Sequence[TelegramPayload]:
        route = intent.route
        chat, thread = route.peer_id, route.thread_id
        if intent.kind is IntentKind.APPROVAL_PROMPT:
            labels = [
                (CHOICE_LABELS.get(c, c), f"ap|{intent.approval_id}|{c}") for c in intent.choices
            ]
            rows = tuple(tuple(labels[i : i + 2]) for i in range(0, len(labels), 2))
            [first, *_] = split_markdown(intent.text) or [""]
            return [
                TelegramPayload(
                    chat_id=chat, thread_id=thread, text=markdown_to_html(first), buttons=rows
                )
            ]
        if intent.kind in (IntentKind.STREAM_SNAPSHOT, IntentKind.TOOL_STATUS):
            # One transient message: its first part (the final text sends the rest).
            # Only the head of a long stream is shown: split what can be shown, not all of it.
            head = (intent.text or "…")[: 2 * self.max_text_chars]
            [first, *rest] = split_markdown(head, limit=self.max_text_chars - 2)
            more = bool(rest) or len(intent.text) > len(head)
            text = markdown_to_html(first) + (" …" if more else "")
            return [TelegramPayload(chat_id=chat, thread_id=thread, text=text)]
        return [
            TelegramPayload(chat_id=chat, thread_id=thread, text=markdown_to_html(chunk))
            for chunk in split_markdown(intent.text or "(empty)")
        ]

    def _params(self, payload: TelegramPayload) -> dict[str, Any]:
        params: dict[str, Any] = {
            "chat_id": payload.chat_id,
            "text": payload.text,
            "parse_mode": "HTML",
            "link_preview_options": {"is_disabled": True},
        }
        if payload.buttons:
            params["reply_markup"] = {
                "inline_keyboard": [
                    [{"text": label, "callback_data": data} for label, data in row]
                    for row in payload.buttons
                ]
            }
        return params

    async def deliver(self, payload: TelegramPayload) -> SendResult:
        params = self._params(payload)
        if payload.thread_id is not None:
            params["message_thread_id"] = int(payload.thread_id)
        return await self._send("sendMessage", params)

    async def edit(self, message_id: str, payload: TelegramPayload) -> SendResult:
        params = self._params(payload)
        params["message_id"] = int(message_id)
        result = await self._send("editMessageText", params)
        if result.ok and result.message_id is None:
            return SendResult(ok=True, message_id=message_id)
        return result

    async def answer_callback(self, callback_id: str, text: str) -> SendResult:
        return await self._send(
            "answerCallbackQuery", {"callback_query_id": callback_id, "text": text[:200]}
        )

    def encode_payload(self, payload: TelegramPayload) -> dict[str, Any]:
        data: dict[str, Any] = msgspec.to_builtins(payload)
        return data

    def decode_payload(self, data: dict[str, Any]) -> TelegramPayload:
        return msgspec.convert(data, TelegramPayload)
