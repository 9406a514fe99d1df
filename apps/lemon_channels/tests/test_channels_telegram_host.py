"""The channel host with the real Telegram plugin and the fake Bot API server, in front of a
hand-fed session port: a coalescer overflow forced through a small ingress, then the canonical
final answer in the chat; photos passed on as images."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator

import pytest

from lemon_channels import ChannelHost
from lemon_channels.telegram import TelegramPlugin
from lemon_channels.testing import FakeSessionPort, FakeTelegram
from lemon_core.channels import ChannelState
from lemon_core.sessions import RunEnded, TextDelta
from lemon_infra import MemoryStore

KEY = "agent:default:telegram:123456:dm:42"


@pytest.fixture
def port() -> FakeSessionPort:
    return FakeSessionPort()


@pytest.fixture
async def host(telegram: FakeTelegram, port: FakeSessionPort) -> AsyncIterator[ChannelHost]:
    plugin = TelegramPlugin(token=telegram.token, api_base_url=telegram.url, poll_timeout_s=5)
    host = ChannelHost(
        plugin=plugin,
        port=port,
        store=MemoryStore(),
        bus=None,
        allowed_users=frozenset({"42"}),
        edit_interval_s=0.0,
        ingress_entries=4,
    )
    status = await host.start()
    assert status.state is ChannelState.RUNNING
    yield host
    await host.stop()


async def test_an_overflow_ends_with_the_canonical_final_answer_in_the_chat(
    telegram: FakeTelegram, port: FakeSessionPort, host: ChannelHost
) -> None:
    await telegram.send_text("write a lot")
    request = await asyncio.wait_for(port.next_submission(1), 10)
    assert request.session_key == KEY
    stream = await port.next_stream(1)
    deltas = [TextDelta(session_key=KEY, run_id="r1", seq=i, text=f"d{i} ") for i in range(1, 60)]
    stream.push(*deltas)
    stream.push(RunEnded(session_key=KEY, run_id="r1", attempt_id="r1", ok=True, answer="FINAL"))
    await telegram.wait_for(lambda: [m.shown for m in telegram.chat(42)] == ["FINAL"])
    [pump] = host.statistics()["pumps"]
    assert pump["overflows"] == 1
    assert pump["ingress_refused"] > 0
    # The streamed snapshots never showed more than the admitted prefix.
    texts = [p["text"] for p in telegram.method_calls("sendMessage")]
    texts += [p["text"] for p in telegram.method_calls("editMessageText")]
    assert all(len(t.split()) <= 4 for t in texts if t != "FINAL")


async def test_a_photo_reaches_the_session_port_as_an_image(
    telegram: FakeTelegram, port: FakeSessionPort, host: ChannelHost
) -> None:
    photo = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    await telegram.send_text("what is this?", photo=photo)
    request = await asyncio.wait_for(port.next_submission(1), 10)
    assert request.prompt == "what is this?"
    [image] = request.images
    assert image["type"] == "image"
    assert base64.b64decode(image["data"]) == photo


async def test_the_bot_token_never_reaches_a_log_record(
    telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    async def ignore(_: object) -> None:
        return None

    plugin = TelegramPlugin(token=telegram.token, api_base_url=telegram.url, poll_timeout_s=1)
    with caplog.at_level(logging.DEBUG):
        await plugin.start(ignore)
        await telegram.wait_for(lambda: bool(telegram.method_calls("getUpdates")))
        await plugin.stop()
    messages = [record.getMessage() for record in caplog.records]
    assert any("/bot<token>/getMe" in m for m in messages)
    assert not any(telegram.token in m for m in messages)


async def test_live_pairing_codes_are_bounded() -> None:
    from lemon_channels import MAX_PAIRING_REQUESTS, PairingStore

    pairing = PairingStore(MemoryStore())
    codes = [
        await pairing.request("telegram", str(user), peer_id=str(user), user_name=None)
        for user in range(MAX_PAIRING_REQUESTS + 5)
    ]
    assert all(code is not None for code in codes[:MAX_PAIRING_REQUESTS])
    assert codes[MAX_PAIRING_REQUESTS:] == [None] * 5
    assert await pairing.request("telegram", "0", peer_id="0", user_name=None) is None
