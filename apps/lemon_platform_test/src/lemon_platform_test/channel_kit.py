"""The channel plugin contract kit: what every :class:`~lemon_core.channels.ChannelPlugin` does
against a fake of its platform that speaks the platform's real wire API.

A plugin runs it by subclassing :class:`ChannelContract` and providing a ``channel_harness``
fixture that yields a :class:`ChannelHarness`: a *not yet started* plugin pointed at a fake
platform server (real HTTP on 127.0.0.1), and the fake's controls::

    class TestMyPlugin(ChannelContract):
        @pytest.fixture
        async def channel_harness(self):
            async with MyFakePlatform() as fake:
                yield MyHarness(plugin=MyPlugin(base_url=fake.url, ...), fake=fake)

The kit starts the plugin with its own sink, and stops it afterwards. It imports only
lemon_core: the harness is the only thing that knows the platform.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, ClassVar, Protocol

import pytest

from lemon_core.channels import (
    ChannelPlugin,
    ChannelState,
    DeliveryIntent,
    DeliveryRoute,
    InboundMessage,
    IntentKind,
)
from lemon_core.sessions import SessionKey

__all__ = ["ChannelContract", "ChannelHarness", "StartedChannel"]


class ChannelHarness(Protocol):
    """A plugin (not started) and the controls of the fake platform it talks to."""

    plugin: ChannelPlugin[Any]
    route: DeliveryRoute
    """The fake's test chat, as the plugin names it."""
    user_id: str
    """A person in that chat (the kit only checks that it is reported, not who may talk)."""

    async def send_text(self, text: str) -> None:
        """The person writes ``text`` in the test chat (the fake queues a platform update)."""
        ...

    async def press(self, message_id: str, button: int) -> None:
        """The person presses button number ``button`` (in reading order) of a message."""
        ...

    def shown(self, message_id: str) -> str:
        """The message's text as the platform displays it (markup applied, not shown)."""
        ...

    def message_ids(self) -> list[str]:
        """The ids of the messages the plugin made in the test chat, oldest first."""
        ...

    def buttons(self, message_id: str) -> list[str]:
        """The labels of the message's buttons, in reading order (empty: none)."""
        ...

    def callback_answers(self) -> list[str]:
        """The texts the plugin answered button presses with, in order."""
        ...

    def refuse_next_send(self, *, retry_after: int) -> None:
        """The platform answers the next send with its rate-limit error."""
        ...


class StartedChannel:
    """The started plugin and what its sink received."""

    def __init__(self, harness: ChannelHarness) -> None:
        self.harness = harness
        self.plugin = harness.plugin
        self.inbound: asyncio.Queue[InboundMessage] = asyncio.Queue()

    async def sink(self, message: InboundMessage) -> None:
        self.inbound.put_nowait(message)

    async def next_inbound(self, timeout_s: float) -> InboundMessage:
        return await asyncio.wait_for(self.inbound.get(), timeout_s)

    async def show(self, intent: DeliveryIntent) -> list[str]:
        """Render and deliver ``intent`` as new messages; the ids made."""
        ids: list[str] = []
        for payload in self.plugin.render(intent):
            result = await self.plugin.deliver(payload)
            assert result.ok, result
            assert result.message_id is not None
            ids.append(result.message_id)
        return ids


def _unmarked(text: str) -> str:
    return "".join(c for c in text if c not in "*_~")


def _intent(
    route: DeliveryRoute,
    text: str,
    *,
    kind: IntentKind = IntentKind.FINAL_TEXT,
    slot: str = "s1",
    n: int = 1,
    approval_id: str | None = None,
    choices: tuple[str, ...] = (),
) -> DeliveryIntent:
    return DeliveryIntent(
        intent_id=f"kit-{slot}-{n}",
        kind=kind,
        route=route,
        slot=slot,
        text=text,
        run_id="run_kit",
        session_key="agent:default:kit:main",
        approval_id=approval_id,
        choices=choices,
    )


class ChannelContract:
    """See the module docstring. ``timeout_s`` is a failure guard, never part of the logic."""

    timeout_s: ClassVar[float] = 10.0
    agent_id: ClassVar[str] = "default"

    @pytest.fixture
    async def channel(self, channel_harness: ChannelHarness) -> AsyncIterator[StartedChannel]:
        started = StartedChannel(channel_harness)
        status = await started.plugin.start(started.sink)
        assert status.state is ChannelState.RUNNING, status
        try:
            yield started
        finally:
            await started.plugin.stop()

    async def test_an_inbound_text_reaches_the_sink_with_its_route_and_user(
        self, channel: StartedChannel
    ) -> None:
        await channel.harness.send_text("hello there")
        message = await channel.next_inbound(self.timeout_s)
        assert message.text == "hello there"
        assert message.route == channel.harness.route
        assert message.user_id == channel.harness.user_id
        assert message.route.channel_id == channel.plugin.channel_id

    async def test_the_session_key_is_canonical_and_stable_per_peer(
        self, channel: StartedChannel
    ) -> None:
        from lemon_core.channels import session_key_for

        await channel.harness.send_text("one")
        await channel.harness.send_text("two")
        first = await channel.next_inbound(self.timeout_s)
        second = await channel.next_inbound(self.timeout_s)
        key = session_key_for(first, agent_id=self.agent_id)
        assert key == session_key_for(second, agent_id=self.agent_id)
        parsed = SessionKey.parse(key)
        assert parsed.channel_id == channel.plugin.channel_id
        assert parsed.peer_id == channel.harness.route.peer_id
        assert parsed.peer_kind == channel.harness.route.peer_kind

    async def test_a_final_text_is_shown(self, channel: StartedChannel) -> None:
        [mid] = await channel.show(_intent(channel.harness.route, "The answer is 42."))
        assert channel.harness.shown(mid) == "The answer is 42."

    async def test_markup_characters_are_shown_literally(self, channel: StartedChannel) -> None:
        text = "a <b>tag</b> & an <script>alert(1)</script> & 1 < 2 > 0"
        [mid] = await channel.show(_intent(channel.harness.route, text))
        assert channel.harness.shown(mid) == text

    async def test_overlapping_markdown_is_shown_not_lost(self, channel: StartedChannel) -> None:
        # Models write forms that cross ("**a _b** c_"); markup a platform refuses must not
        # cost the message: its words are shown, formatted or not.
        text = "**a _b** c_ then *d **e* f** and ~~g **h~~ i**"
        [mid] = await channel.show(_intent(channel.harness.route, text))
        assert _unmarked(channel.harness.shown(mid)) == _unmarked(text)

    async def test_an_edit_replaces_the_message_and_an_unchanged_edit_is_ok(
        self, channel: StartedChannel
    ) -> None:
        route = channel.harness.route
        [mid] = await channel.show(_intent(route, "draft", kind=IntentKind.STREAM_SNAPSHOT))
        [payload] = channel.plugin.render(_intent(route, "final words", n=2))
        result = await channel.plugin.edit(mid, payload)
        assert result.ok, result
        assert channel.harness.shown(mid) == "final words"
        again = await channel.plugin.edit(mid, payload)
        assert again.ok, again
        assert channel.harness.message_ids() == [mid]

    async def test_a_long_text_is_split_within_the_platform_limit(
        self, channel: StartedChannel
    ) -> None:
        words = [f"word{i}" for i in range(1_700)]
        text = " ".join(words)
        assert len(text) > 2 * channel.plugin.max_text_chars
        ids = await channel.show(_intent(channel.harness.route, text))
        assert len(ids) >= 3
        shown = [channel.harness.shown(mid) for mid in ids]
        assert all(0 < len(part) <= channel.plugin.max_text_chars for part in shown)
        assert " ".join(part.strip() for part in shown).split() == words

    async def test_a_rate_limit_is_reported_with_retry_after(self, channel: StartedChannel) -> None:
        channel.harness.refuse_next_send(retry_after=7)
        [payload] = channel.plugin.render(_intent(channel.harness.route, "later"))
        result = await channel.plugin.deliver(payload)
        assert not result.ok
        assert result.retry_after == 7
        assert not result.permanent
        assert channel.harness.message_ids() == []
        retried = await channel.plugin.deliver(payload)
        assert retried.ok, retried

    async def test_payloads_round_trip_through_their_json_form(
        self, channel: StartedChannel
    ) -> None:
        import msgspec

        intent = _intent(
            channel.harness.route,
            "approve?",
            kind=IntentKind.APPROVAL_PROMPT,
            approval_id="appr_kit",
            choices=("approve_once", "deny"),
        )
        for payload in channel.plugin.render(intent):
            data = channel.plugin.encode_payload(payload)
            wire = msgspec.json.decode(msgspec.json.encode(data))
            assert channel.plugin.decode_payload(wire) == payload

    async def test_an_approval_prompt_offers_its_choices_and_a_press_comes_back(
        self, channel: StartedChannel
    ) -> None:
        choices = ("approve_once", "approve_session", "approve_agent", "deny")
        intent = _intent(
            channel.harness.route,
            "bash wants to run `ls`",
            kind=IntentKind.APPROVAL_PROMPT,
            approval_id="appr_kit",
            choices=choices,
        )
        [mid] = await channel.show(intent)
        assert len(channel.harness.buttons(mid)) == len(choices)
        await channel.harness.press(mid, len(choices) - 1)
        pressed = await channel.next_inbound(self.timeout_s)
        assert pressed.callback is not None
        assert pressed.callback.message_id == mid
        assert "appr_kit" in pressed.callback.data
        answered = await channel.plugin.answer_callback(pressed.callback.callback_id, "denied")
        assert answered.ok, answered
        assert channel.harness.callback_answers() == ["denied"]
        resolved = _intent(
            channel.harness.route, "bash: denied", kind=IntentKind.APPROVAL_RESOLVED, n=2
        )
        [payload] = channel.plugin.render(resolved)
        assert (await channel.plugin.edit(mid, payload)).ok
        assert channel.harness.buttons(mid) == []
        assert channel.harness.shown(mid) == "bash: denied"

    async def test_status_is_running_while_started_and_stopped_after(
        self, channel: StartedChannel
    ) -> None:
        assert channel.plugin.status().state is ChannelState.RUNNING
        await channel.plugin.stop()
        assert channel.plugin.status().state is ChannelState.STOPPED
        await channel.plugin.stop()  # idempotent
