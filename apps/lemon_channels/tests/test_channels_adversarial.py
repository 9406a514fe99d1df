"""An attacker's and a demanding user's tests of the channels: markup a model writes that
Telegram would refuse, Telegram's UTF-16 length limit, a polling loop fed garbage, a plugin
that raises mid-delivery, an update delivered twice, senders that are not a person, and a
button press aimed at another chat's approval."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lemon_channels.telegram import TelegramPayload, TelegramPlugin
from lemon_channels.telegram._render import markdown_to_html, split_markdown
from lemon_channels.testing import FakeTelegram
from lemon_core.channels import (
    DeliveryIntent,
    DeliveryRoute,
    InboundMessage,
    IntentKind,
)

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
