"""The channel plugin contract kit on the Telegram plugin, against the fake Bot API server
(real HTTP on 127.0.0.1, the real JSON wire format)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from lemon_channels.telegram import TelegramPlugin
from lemon_channels.testing import FakeTelegram
from lemon_core.channels import DeliveryRoute
from lemon_platform_test import ChannelContract


@dataclass
class TelegramHarness:
    plugin: TelegramPlugin
    fake: FakeTelegram
    route: DeliveryRoute
    user_id: str = "42"

    async def send_text(self, text: str) -> None:
        await self.fake.send_text(text, chat_id=42, user_id=42)

    async def press(self, message_id: str, button: int) -> None:
        buttons = [b for row in self.fake.messages[int(message_id)].buttons for b in row]
        await self.fake.press(int(message_id), buttons[button]["callback_data"])

    def shown(self, message_id: str) -> str:
        return self.fake.messages[int(message_id)].shown

    def message_ids(self) -> list[str]:
        return [str(m.message_id) for m in self.fake.chat(42)]

    def buttons(self, message_id: str) -> list[str]:
        return [b["text"] for row in self.fake.messages[int(message_id)].buttons for b in row]

    def callback_answers(self) -> list[str]:
        return list(self.fake.callback_answers)

    def refuse_next_send(self, *, retry_after: int) -> None:
        self.fake.refuse_next("sendMessage", retry_after=retry_after)


class TestTelegramContract(ChannelContract):
    @pytest.fixture
    async def channel_harness(self) -> AsyncIterator[TelegramHarness]:
        async with FakeTelegram() as fake:
            plugin = TelegramPlugin(token=fake.token, api_base_url=fake.url, poll_timeout_s=5)
            route = DeliveryRoute(
                channel_id="telegram", account_id=str(fake.bot_id), peer_kind="dm", peer_id="42"
            )
            yield TelegramHarness(plugin=plugin, fake=fake, route=route)
