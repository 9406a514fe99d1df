"""An attacker's and a demanding user's tests of the channels: markup a model writes that
Telegram would refuse, Telegram's UTF-16 length limit, a polling loop fed garbage, a plugin
that raises mid-delivery, an update delivered twice, senders that are not a person, and a
button press aimed at another chat's approval."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lemon_channels import ChannelHost, Outbox
from lemon_channels.telegram import TelegramPayload, TelegramPlugin
from lemon_channels.telegram._render import markdown_to_html, split_markdown
from lemon_channels.testing import FakeSessionPort, FakeTelegram
from lemon_core.channels import (
    ChannelState,
    DeliveryIntent,
    DeliveryRoute,
    InboundMessage,
    IntentKind,
    SendResult,
)
from lemon_core.events import ApprovalDecision
from lemon_core.execution import Receipt, RunRequest
from lemon_core.sessions import ApprovalResult, PendingApproval, SessionSnapshot, TextDelta
from lemon_core.store import OutboxStore
from lemon_infra import MemoryStore

KEY = "agent:default:telegram:123456:dm:42"
ROUTE = DeliveryRoute(channel_id="telegram", account_id="1", peer_kind="dm", peer_id="42")
_TAG = re.compile(r"<(/?)([a-z]+)[^>]*>")


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def well_nested(markup: str) -> bool:
    stack: list[str] = []
    for match in _TAG.finditer(markup):
        closing, name = match.groups()
        if not closing:
            stack.append(name)
        elif not stack or stack.pop() != name:
            return False
    return not stack


def final(n: int, text: str, *, route: DeliveryRoute = ROUTE) -> DeliveryIntent:
    return DeliveryIntent(
        intent_id=f"adv{n}",
        kind=IntentKind.FINAL_TEXT,
        route=route,
        slot=f"slot{n}",
        text=text,
        run_id=f"run_{n}",
        session_key=KEY,
    )


async def _ignore(_: InboundMessage) -> None:
    return None


@pytest.fixture
async def plugin(telegram: FakeTelegram) -> AsyncIterator[TelegramPlugin]:
    plugin = TelegramPlugin(token=telegram.token, api_base_url=telegram.url, poll_timeout_s=5)
    await plugin.start(_ignore)
    yield plugin
    await plugin.stop()


# -- Markdown a model writes ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["**a _b** c_", "*a **b* c**", "~~a **b~~ c**", "_x ~~y_ z~~", "**a `b** c` d**"],
)
async def test_overlapping_markdown_still_reaches_the_chat(
    telegram: FakeTelegram, plugin: TelegramPlugin, text: str
) -> None:
    # Telegram refuses mis-nested HTML with a 400 (permanent): the answer would be lost.
    [payload] = plugin.render(final(1, text))
    assert well_nested(payload.text), payload.text
    result = await plugin.deliver(payload)
    assert result.ok, result
    [message] = telegram.chat(42)
    assert "a" in message.shown or "x" in message.shown


async def test_markup_telegram_refuses_is_sent_as_plain_text(
    telegram: FakeTelegram, plugin: TelegramPlugin
) -> None:
    # The safety net under the renderer: "can't parse entities" resends the text unformatted.
    result = await plugin.deliver(
        TelegramPayload(chat_id="42", text="<b>bold <i>x</b> y</i> &amp;")
    )
    assert result.ok, result
    [message] = telegram.chat(42)
    assert message.shown == "bold x y &"


_MARKDOWN = st.lists(
    st.sampled_from(["**", "*", "_", "~~", "`", "a", "b", " ", "[a](http://x)", "# ", "\n"]),
    max_size=16,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(_MARKDOWN)
def test_rendered_markdown_is_always_well_nested(text: str) -> None:
    assert well_nested(markdown_to_html(text)), markdown_to_html(text)


# -- Telegram's length limit is in UTF-16 code units ----------------------------------------


async def test_an_emoji_answer_is_split_within_the_utf16_limit(
    telegram: FakeTelegram, plugin: TelegramPlugin
) -> None:
    text = "😀" * 5000  # 5,000 characters, 10,000 UTF-16 code units
    payloads = plugin.render(final(1, text))
    assert all(utf16(p.text) <= 4096 for p in payloads)
    for payload in payloads:
        result = await plugin.deliver(payload)
        assert result.ok, result
    assert "".join(m.shown for m in telegram.chat(42)) == text


@settings(max_examples=50, deadline=None)
@given(st.text(alphabet="a😀 \n*&<", min_size=1, max_size=300), st.integers(20, 80))
def test_every_chunk_fits_the_limit_in_utf16_units(text: str, limit: int) -> None:
    for chunk in split_markdown(text, limit=limit):
        assert utf16(markdown_to_html(chunk)) <= limit


def test_a_huge_single_line_is_split_without_rendering_all_of_it_per_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import lemon_channels.telegram._render as render

    rendered = 0
    real = render.markdown_to_html

    def counting(text: str) -> str:
        nonlocal rendered
        rendered += len(text)
        return real(text)

    monkeypatch.setattr(render, "markdown_to_html", counting)
    chunks = render.split_markdown("word " * 40_000)  # 200,000 characters, one line
    assert " ".join(chunks).split() == ["word"] * 40_000
    # Each cut looks at about one message worth of text, not at the whole rest of the line.
    assert rendered < 200_000 * 60, rendered


# -- the polling loop ------------------------------------------------------------------------


def make_host(
    telegram: FakeTelegram, port: FakeSessionPort, store: MemoryStore, **keys: Any
) -> ChannelHost:
    plugin = TelegramPlugin(token=telegram.token, api_base_url=telegram.url, poll_timeout_s=5)
    return ChannelHost(
        plugin=plugin,
        port=port,
        store=store,
        bus=None,
        allowed_users=frozenset({"42"}),
        edit_interval_s=0.0,
        **keys,
    )


@pytest.fixture
async def host(telegram: FakeTelegram) -> AsyncIterator[tuple[ChannelHost, FakeSessionPort]]:
    port = FakeSessionPort()
    host = make_host(telegram, port, MemoryStore())
    status = await host.start()
    assert status.state is ChannelState.RUNNING
    yield host, port
    await host.stop()


async def test_a_malformed_getupdates_answer_does_not_stop_polling(
    telegram: FakeTelegram, host: tuple[ChannelHost, FakeSessionPort]
) -> None:
    _, port = host
    # An error whose ``parameters`` is not an object, then an update whose id is not a number.
    telegram._refusals.setdefault("getUpdates", []).append(
        {"ok": False, "error_code": 500, "description": "oops", "parameters": "later"}
    )
    await telegram.wait_for(lambda: not telegram._refusals["getUpdates"])
    await telegram.send_text("still there?")
    request = await asyncio.wait_for(port.next_submission(1), 10)
    assert request.prompt == "still there?"


async def test_an_update_delivered_again_after_a_restart_is_handled_once(
    telegram: FakeTelegram,
) -> None:
    # The offset that acknowledges an update reaches Telegram with the *next* getUpdates: a
    # daemon stopped in between gets the same update again from Telegram after its restart.
    store = MemoryStore()
    port = FakeSessionPort()
    update = telegram.update_for_text("run the migration")
    first = make_host(telegram, port, store)
    await first.start()
    await telegram._push(update)
    await asyncio.wait_for(port.next_submission(1), 10)
    await first.stop()
    second = make_host(telegram, port, store)
    await second.start()
    try:
        await telegram._push(update)  # Telegram never got the acknowledgement
        await telegram.send_text("and then this")
        request = await asyncio.wait_for(port.next_submission(2), 10)
        assert request.prompt == "and then this"
        assert [r.prompt for r in port.submitted] == ["run the migration", "and then this"]
    finally:
        await second.stop()


# -- who is talking --------------------------------------------------------------------------


async def test_a_message_sent_on_behalf_of_a_chat_gets_nothing(
    telegram: FakeTelegram, host: tuple[ChannelHost, FakeSessionPort]
) -> None:
    _, port = host
    # Sent as a channel (sender_chat): ``from`` is Telegram's placeholder user 136817688, the
    # same for every channel; pairing it would let every channel in. And no ``from`` at all.
    as_channel = telegram.update_for_text("hello", chat_id=-100, chat_type="supergroup")
    as_channel["message"]["from"] = {"id": 136817688, "is_bot": True, "first_name": "Channel"}
    as_channel["message"]["sender_chat"] = {"id": -1001, "type": "channel", "title": "c"}
    anonymous = telegram.update_for_text("hi", chat_id=-100, chat_type="supergroup")
    del anonymous["message"]["from"]
    await telegram._push(as_channel)
    await telegram._push(anonymous)
    await telegram.send_text("the owner speaks")
    request = await asyncio.wait_for(port.next_submission(1), 10)
    assert request.prompt == "the owner speaks"
    assert len(port.submitted) == 1
    assert telegram.chat(-100) == []  # no pairing code for a non-person
    host_, _ = host
    assert await host_.pairing.pending() == []


class ApprovingPort(FakeSessionPort):
    """A port whose session ``KEY`` waits for approval ``ap_dm``; records resolutions."""

    def __init__(self) -> None:
        super().__init__()
        self.resolved: list[tuple[str, str]] = []

    async def snapshot(self, session_key: str) -> SessionSnapshot:
        pending: tuple[PendingApproval, ...] = ()
        if session_key == KEY:
            pending = (PendingApproval(approval_id="ap_dm", run_id="r1", tool="bash"),)
        return SessionSnapshot(session_key=session_key, pending_approvals=pending)

    async def resolve_approval(
        self, approval_id: str, decision: ApprovalDecision | str
    ) -> ApprovalResult:
        self.resolved.append((approval_id, str(decision)))
        return ApprovalResult(resolved=True)


async def test_a_button_press_cannot_resolve_another_chats_approval(
    telegram: FakeTelegram,
) -> None:
    port = ApprovingPort()
    host = make_host(telegram, port, MemoryStore())
    await host.start()
    try:
        # Allowed user 42 presses, in a group, a button whose data names the approval of the
        # private chat's session (forged data, or a keyboard copied from elsewhere).
        forged = {
            "update_id": telegram._next_update_id(),
            "callback_query": {
                "id": "cb_forged",
                "from": {"id": 42, "is_bot": False, "first_name": "a"},
                "message": {
                    "message_id": 7,
                    "date": 1_700_000_000,
                    "chat": {"id": -100, "type": "supergroup"},
                    "text": "x",
                },
                "chat_instance": "1",
                "data": "ap|ap_dm|approve_agent",
            },
        }
        await telegram._push(forged)
        await telegram.wait_for(lambda: len(telegram.callback_answers) == 1)
        assert port.resolved == []
        # The same press in the chat the approval belongs to resolves it.
        await telegram._push(
            {
                "update_id": telegram._next_update_id(),
                "callback_query": {
                    **forged["callback_query"],  # type: ignore[dict-item]
                    "id": "cb_real",
                    "message": {
                        "message_id": 8,
                        "date": 1_700_000_000,
                        "chat": {"id": 42, "type": "private"},
                        "text": "x",
                    },
                },
            }
        )
        await telegram.wait_for(lambda: len(telegram.callback_answers) == 2)
        assert port.resolved == [("ap_dm", "approve_agent")]
        assert telegram.callback_answers[1] == "approved"
    finally:
        await host.stop()


# -- the outbox ------------------------------------------------------------------------------


class ExplodingPlugin(TelegramPlugin):
    """Raises on a payload containing ``boom`` (a plugin bug, an undecodable payload)."""

    async def deliver(self, payload: TelegramPayload) -> SendResult:
        if "boom" in payload.text:
            raise RuntimeError("plugin bug")
        return await super().deliver(payload)


async def test_an_exception_while_delivering_does_not_stall_the_chat(
    telegram: FakeTelegram,
) -> None:
    plugin = ExplodingPlugin(token=telegram.token, api_base_url=telegram.url, poll_timeout_s=5)
    await plugin.start(_ignore)
    store = OutboxStore(MemoryStore())
    outbox = Outbox(plugin=plugin, store=store, bus=None, max_attempts=2, base_backoff_s=0.01)
    try:
        await outbox.admit(final(1, "boom"))
        await outbox.admit(final(2, "after the poison"))
        await asyncio.wait_for(outbox.until(lambda s: s.sent == 1 and s.pending == 0), 10)
        assert [m.shown for m in telegram.chat(42)] == ["after the poison"]
        stats = outbox.statistics()
        assert stats.given_up == 1
        assert "RuntimeError" in (stats.last_error or "")
        assert await store.pending("telegram") == []  # not replayed at the next start
    finally:
        await outbox.close()
        await plugin.stop()


class RateLimitedPlugin(TelegramPlugin):
    """Answers the first ``n`` sends with a 429 (retry_after 0)."""

    def __init__(self, n: int, **keys: Any) -> None:
        super().__init__(**keys)
        self.refusals = n

    async def deliver(self, payload: TelegramPayload) -> SendResult:
        if self.refusals > 0:
            self.refusals -= 1
            return SendResult(ok=False, error="sendMessage: 429 Too Many Requests", retry_after=0)
        return await super().deliver(payload)


async def test_a_429_storm_delays_the_answer_but_does_not_lose_it(
    telegram: FakeTelegram,
) -> None:
    plugin = RateLimitedPlugin(12, token=telegram.token, api_base_url=telegram.url)
    await plugin.start(_ignore)
    outbox = Outbox(
        plugin=plugin,
        store=OutboxStore(MemoryStore()),
        bus=None,
        max_attempts=8,
        base_backoff_s=0.001,
        max_backoff_s=0.002,
    )
    try:
        await outbox.admit(final(1, "the final answer"))
        await asyncio.wait_for(outbox.drained(), 10)
        assert [m.shown for m in telegram.chat(42)] == ["the final answer"]
        assert outbox.statistics().given_up == 0
    finally:
        await outbox.close()
        await plugin.stop()


# -- the coalescer ---------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 4000), min_size=1, max_size=30))
def test_a_flood_of_deltas_keeps_a_bounded_head_of_the_answer(sizes: list[int]) -> None:
    from lemon_channels._coalescer import AnswerCoalescer

    deltas = [("ab😀\n" * 1000)[n % 4 : n % 4 + n] for n in sizes]
    answer = AnswerCoalescer("r1")
    for seq, text in enumerate(deltas, start=1):
        assert answer.add(TextDelta(session_key=KEY, run_id="r1", seq=seq, text=text))
    whole = "".join(deltas)
    assert sum(len(t) for t in answer.text) <= 16_384  # MAX_SNAPSHOT_CHARS
    assert answer.snapshot() == whole[:16_384]


def test_a_megabyte_of_deltas_is_not_kept() -> None:
    from lemon_channels._coalescer import AnswerCoalescer

    answer = AnswerCoalescer("r1")
    for seq in range(1, 5001):
        answer.add(TextDelta(session_key=KEY, run_id="r1", seq=seq, text="x" * 200))
    assert sum(len(t) for t in answer.text) <= 16_384
    assert len(answer.snapshot()) == 16_384


# -- groups with other bots; a failing port ----------------------------------------------------


async def test_a_command_addressed_to_another_bot_is_not_ours(
    telegram: FakeTelegram, host: tuple[ChannelHost, FakeSessionPort]
) -> None:
    _, port = host
    group = {"chat_id": -100, "chat_type": "supergroup"}
    await telegram.send_text("/new@other_bot", **group)
    await telegram.send_text("/cancel@Other_Bot please", **group)
    await telegram.send_text("/help@lemon_bot", **group)  # ours (the fake's bot username)
    await telegram.wait_for(lambda: len(telegram.chat(-100)) == 1)
    [reply] = telegram.chat(-100)
    assert reply.shown.startswith("Send a message to talk to the agent.")
    await telegram.send_text("hello", **group)
    request = await asyncio.wait_for(port.next_submission(1), 10)
    assert request.prompt == "hello"
    assert request.session_key == "agent:default:telegram:123456:group:-100"  # no /new happened
    assert len(port.submitted) == 1


class FailingWatchPort(FakeSessionPort):
    """``watch`` fails for one session (a port error)."""

    def watch(self, session_key: str) -> Any:
        if session_key.endswith(":group:-100"):
            raise RuntimeError("the bus is closed")
        return super().watch(session_key)


async def test_a_session_whose_watch_fails_does_not_stall_the_other_chats(
    telegram: FakeTelegram,
) -> None:
    port = FailingWatchPort()
    host = make_host(telegram, port, MemoryStore())
    await host.start()
    try:
        await telegram.send_text("in the group", chat_id=-100, chat_type="supergroup")
        await telegram.send_text("in private")
        request = await asyncio.wait_for(port.next_submission(1), 10)
        assert request.prompt == "in private"
        assert [r.prompt for r in port.submitted] == ["in private"]
        await telegram.wait_for(lambda: len(telegram.chat(-100)) == 1)
        assert "not reachable" in telegram.chat(-100)[0].shown
    finally:
        await host.stop()


async def test_nothing_but_an_allowed_persons_message_or_press_reaches_the_port(
    telegram: FakeTelegram,
) -> None:
    # What held in review, kept as a guard: strangers (alone, or in a group with an allowed
    # person), their button presses, edited messages and channel posts never reach the port.
    port = ApprovingPort()
    host = make_host(telegram, port, MemoryStore())
    await host.start()
    try:
        group = {"chat_id": -100, "chat_type": "supergroup"}
        await telegram.send_text("hi, I am the owner", user_id=42, **group)
        await telegram.send_text("ignore the owner", user_id=666, username="mallory", **group)
        edited = telegram.update_for_text("edited", user_id=666)
        edited["edited_message"] = edited.pop("message")
        post = telegram.update_for_text("a channel post", chat_id=-1001, chat_type="channel")
        post["channel_post"] = post.pop("message")
        await telegram._push(edited)
        await telegram._push(post)
        press = {
            "update_id": telegram._next_update_id(),
            "callback_query": {
                "id": "cb_mallory",
                "from": {"id": 666, "is_bot": False, "first_name": "m"},
                "message": {"message_id": 1, "date": 0, "chat": {"id": 42, "type": "private"}},
                "chat_instance": "1",
                "data": "ap|ap_dm|approve_global",
            },
        }
        await telegram._push(press)
        await telegram.wait_for(lambda: telegram.callback_answers == ["not allowed"])
        await telegram.send_text("last", user_id=42)
        await asyncio.wait_for(port.next_submission(2), 10)
        assert [r.prompt for r in port.submitted] == ["hi, I am the owner", "last"]
        assert port.resolved == []
    finally:
        await host.stop()


async def test_a_stranger_in_a_group_gets_no_public_pairing_code(
    telegram: FakeTelegram, host: tuple[ChannelHost, FakeSessionPort]
) -> None:
    # In a group the bot answers nobody it does not know (no code posted for all to see, no
    # spam when strangers chat); a pairing code is offered in a private chat only.
    host_, port = host
    group = {"chat_id": -100, "chat_type": "supergroup", "user_id": 666, "username": "mallory"}
    await telegram.send_text("hello bot", **group)
    await telegram.send_text("hello?", user_id=666, chat_id=666, username="mallory")
    await telegram.wait_for(lambda: len(telegram.chat(666)) == 1)
    assert "pairing code" in telegram.chat(666)[0].shown
    assert telegram.chat(-100) == []
    [request] = await host_.pairing.pending()
    assert (request.user_id, request.peer_id) == ("666", "666")
    assert port.submitted == []


# -- the network failing at the wrong moment -------------------------------------------------


async def test_a_network_failure_after_getme_is_a_failed_status_not_a_raise(
    telegram: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = httpx.AsyncClient.post

    async def post(self: httpx.AsyncClient, url: Any, **keys: Any) -> httpx.Response:
        if str(url).endswith("deleteWebhook"):
            raise httpx.ConnectError("connection reset")
        return await real(self, url, **keys)

    monkeypatch.setattr(httpx.AsyncClient, "post", post)
    plugin = TelegramPlugin(token=telegram.token, api_base_url=telegram.url, poll_timeout_s=5)
    status = await plugin.start(_ignore)
    assert status.state is ChannelState.FAILED
    assert "ConnectError" in (status.detail or "")
    assert telegram.token not in (status.detail or "")
    await plugin.stop()


async def test_a_photo_that_cannot_be_downloaded_keeps_its_caption(
    telegram: FakeTelegram,
    host: tuple[ChannelHost, FakeSessionPort],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, port = host

    async def get(self: httpx.AsyncClient, url: Any, **keys: Any) -> httpx.Response:
        raise httpx.ReadTimeout("timed out")

    monkeypatch.setattr(httpx.AsyncClient, "get", get)
    await telegram.send_text("what is in this picture?", photo=b"\x89PNG" + bytes(64))
    request = await asyncio.wait_for(port.next_submission(1), 10)
    assert request.prompt == "what is in this picture?"
    assert request.images == ()


async def test_the_webhook_refuses_what_telegram_would_not_send() -> None:
    # What held in review, kept as a guard (the ASGI app alone, no daemon).
    received: list[InboundMessage] = []

    async def sink(message: InboundMessage) -> None:
        received.append(message)

    plugin = TelegramPlugin(token="1:t", mode="webhook", webhook_secret="s3cret")
    plugin._sink = sink

    async def post(body: bytes, headers: list[tuple[bytes, bytes]], method: str = "POST") -> int:
        chunks = [body[i : i + 65_536] for i in range(0, len(body), 65_536)] or [b""]
        messages = [
            {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
            for i, c in enumerate(chunks)
        ]
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return messages.pop(0)

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": method, "headers": headers, "path": "/"}
        await plugin._webhook_app(scope, receive, send)
        return int(sent[0]["status"])

    good = [(b"x-telegram-bot-api-secret-token", b"s3cret")]
    update = (
        b'{"update_id": 5, "message": {"message_id": 1, "date": 0, "text": "hi",'
        b' "chat": {"id": 42, "type": "private"}, "from": {"id": 42, "is_bot": false}}}'
    )
    assert await post(update, []) == 401
    assert await post(update, [(b"x-telegram-bot-api-secret-token", b"s3cre")]) == 401
    assert await post(update, [(b"x-telegram-bot-api-secret-token", b"s3cret" * 2)]) == 401
    assert await post(update, good, method="GET") == 405
    assert await post(b"{" * 10, good) == 400
    assert await post(b'{"a": "' + b"x" * (2 * 1024 * 1024) + b'"}', good) == 413
    assert await post(b"[1, 2]", good) == 200  # not an update: acknowledged, ignored
    assert await post(update, good) == 200
    await asyncio.gather(*plugin._handlers)
    assert [m.text for m in received] == ["hi"]


class GatedPort(FakeSessionPort):
    """``submit`` waits for ``gate`` (a router slow to admit)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()

    async def submit(self, request: RunRequest) -> Receipt:
        self.entered.set()
        await self.gate.wait()
        return await super().submit(request)


async def test_a_stop_while_an_update_is_in_hand_finishes_it_and_a_restart_does_not_lose_it(
    telegram: FakeTelegram,
) -> None:
    store = MemoryStore()
    port = GatedPort()
    update = telegram.update_for_text("deploy it")
    first = make_host(telegram, port, store)
    await first.start()
    await telegram._push(update)
    await asyncio.wait_for(port.entered.wait(), 10)
    plugin = first.plugin
    assert isinstance(plugin, TelegramPlugin)
    poller = plugin._poller
    assert poller is not None
    stopping = asyncio.ensure_future(first.stop())
    await asyncio.wait({poller})  # the stop has ended the poll loop
    port.gate.set()
    await asyncio.wait_for(stopping, 10)
    assert [r.prompt for r in port.submitted] == ["deploy it"]  # finished, not cut off
    second = make_host(telegram, port, store)
    await second.start()
    try:
        await telegram._push(update)  # redelivered: the offset never reached Telegram
        await telegram.send_text("status?")
        await asyncio.wait_for(port.next_submission(2), 10)
        assert [r.prompt for r in port.submitted] == ["deploy it", "status?"]
    finally:
        await second.stop()
