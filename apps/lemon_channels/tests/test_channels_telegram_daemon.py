"""Telegram end to end: the real daemon profile (router, gateway, coding agent with the offline
model, SQLite store, control plane) with the channel polling the fake Bot API server.

Every wait is on an observable fact (a message shown, an edit, a session event); the timeouts
are failure guards only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from lemon_channels import ChannelHost, Channels, ChannelsOptions, PairingStore, channel_statuses
from lemon_channels.telegram import POLL_FAILURES_BEFORE_FAILED
from lemon_channels.testing import FakeMessage, FakeTelegram, displayed
from lemon_core.capabilities import AGENT_RUNTIME
from lemon_core.channels import ChannelState, ChannelStatus
from lemon_core.events import ApprovalDecision, QueueOutcomeKind
from lemon_core.sessions import (
    SESSION_PORT,
    ApprovalAsked,
    ApprovalEnded,
    QueueNotice,
    RunEnded,
    SessionEvent,
)
from lemon_runtime import Runtime

TOOL = '/tool bash {"command": "ls"}'
KEY = "agent:default:telegram:123456:dm:42"
CONFLICT = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance "
    "is running"
)


def host_of(runtime: Runtime) -> ChannelHost:
    channels = runtime.handle("lemon_channels")
    assert isinstance(channels, Channels)
    return channels.hosts["telegram"]


def prompts(fake: FakeTelegram, chat: int = 42) -> list[FakeMessage]:
    return [m for m in fake.chat(chat) if "asks to run" in m.shown]


def button(message: FakeMessage, label: str) -> str:
    for row in message.buttons:
        for b in row:
            if b["text"] == label:
                return b["callback_data"]
    raise AssertionError(f"no button {label!r} in {message.buttons}")


async def test_a_conversation_with_a_tool_call_and_an_approval_through_buttons(
    telegram: FakeTelegram, daemon: Callable[..., Runtime]
) -> None:
    async with daemon():
        await telegram.send_text(TOOL)
        await telegram.wait_for(lambda: bool(prompts(telegram)))
        [prompt] = prompts(telegram)
        labels = [b["text"] for row in prompt.buttons for b in row]
        assert labels == ["Once", "This session", "Always", "Deny"]
        assert "<b>bash</b>" in prompt.text
        await telegram.press(prompt.message_id, button(prompt, "Once"))
        await telegram.wait_for(lambda: "approved" in telegram.callback_answers)
        await telegram.wait_for(lambda: prompt.shown == "bash: approved (once)")
        assert prompt.buttons == []
        await telegram.wait_for(
            lambda: any("a.txt" in m.shown and "🔧" not in m.shown for m in telegram.chat(42))
        )
        status = [m for m in telegram.chat(42) if m.shown.startswith("🔧")]
        assert len(status) == 1
        await telegram.wait_for(lambda: status[0].shown == "🔧 bash ✓")


async def test_a_burst_of_20_messages_in_a_busy_chat_is_each_accounted_for(
    telegram: FakeTelegram, daemon: Callable[..., Runtime]
) -> None:
    async with daemon() as runtime:
        port = runtime.context.capabilities.require(SESSION_PORT)
        stream = port.watch(KEY)
        await telegram.send_text(TOOL)
        await telegram.wait_for(lambda: bool(prompts(telegram)))  # the chat is busy now
        for i in range(20):
            await telegram.send_text(f"/echo burst {i}")
        host = host_of(runtime)
        await telegram.wait_for(lambda: len(host.receipts) == 21)
        [prompt] = prompts(telegram)
        await telegram.press(prompt.message_id, button(prompt, "Once"))

        burst = [r.run_id for r in list(host.receipts)[1:]]
        ended: set[str] = set()
        merged: dict[str, str] = {}
        events: list[SessionEvent] = []

        def settled() -> bool:
            return all(r in ended or merged.get(r) in ended for r in burst)

        async def follow() -> None:
            while not settled():
                event = await stream.get()
                events.append(event)
                if isinstance(event, RunEnded):
                    ended.add(event.run_id)
                elif isinstance(event, QueueNotice) and event.into_run_id is not None:
                    assert event.outcome is QueueOutcomeKind.MERGED
                    merged[event.run_id] = event.into_run_id

        await asyncio.wait_for(follow(), 30)
        stream.close()
        statuses = {r.status for r in list(host.receipts)[1:]}
        assert statuses <= {"queued", "started"}
        # Every answered run shows one final answer in the chat, the burst's words in order.
        await telegram.wait_for(lambda: any("burst 19" in m.shown for m in telegram.chat(42)))
        shown = "\n".join(m.shown for m in telegram.chat(42))
        positions = [shown.index(f"burst {i}") for i in range(20)]
        assert positions == sorted(positions)


async def test_a_10000_character_answer_is_split_at_4096(
    telegram: FakeTelegram, daemon: Callable[..., Runtime]
) -> None:
    words = [f"w{i:05d}" for i in range(1_429)]  # 1,429 * 7 - 1 = 10,002 characters
    text = " ".join(words)
    async with daemon():
        await telegram.send_text("/echo " + text)
        await telegram.wait_for(lambda: len(telegram.chat(42)) == 3, timeout_s=30)
        await telegram.wait_for(
            lambda: telegram.chat(42)[-1].shown.split()[-1] == words[-1], timeout_s=30
        )
        parts = [m.shown for m in telegram.chat(42)]
        assert all(len(p) <= 4096 for p in parts)
        assert " ".join(parts).split() == words


async def test_a_stranger_is_ignored_until_paired(
    telegram: FakeTelegram, daemon: Callable[..., Runtime]
) -> None:
    async with daemon() as runtime:
        port = runtime.context.capabilities.require(SESSION_PORT)
        before = port.statistics().submitted
        await telegram.send_text("hi, let me in", chat_id=77, user_id=77, username="mallory")
        await telegram.wait_for(lambda: len(telegram.chat(77)) == 1)
        [code_message] = telegram.chat(77)
        assert "pairing code" in code_message.shown
        await telegram.send_text("/echo please", chat_id=77, user_id=77)
        await telegram.send_text(TOOL, chat_id=77, user_id=77)
        host = host_of(runtime)
        await telegram.wait_for(lambda: host.statistics()["strangers_ignored"] == 3)
        assert len(telegram.chat(77)) == 1  # the code once, nothing else
        assert port.statistics().submitted == before  # nothing reached the router

        [pending] = await PairingStore(runtime.store).pending()
        assert pending.user_id == "77"
        assert pending.code in code_message.shown
        paired = await PairingStore(runtime.store).approve(pending.code.lower())
        assert paired is not None
        assert await PairingStore(runtime.store).approve(pending.code) is None  # once
        await telegram.send_text("/echo welcome", chat_id=77, user_id=77)
        await telegram.wait_for(lambda: any(m.shown == "welcome" for m in telegram.chat(77)))


async def test_an_approval_whose_run_ends_edits_the_prompt(
    telegram: FakeTelegram, daemon: Callable[..., Runtime]
) -> None:
    async with daemon():
        await telegram.send_text(TOOL)
        await telegram.wait_for(lambda: bool(prompts(telegram)))
        [prompt] = prompts(telegram)
        once = button(prompt, "Once")
        await telegram.send_text("/cancel")
        await telegram.wait_for(lambda: prompt.shown == "bash: the run ended")
        assert prompt.buttons == []
        await telegram.wait_for(lambda: any(m.shown == "Cancelled 1." for m in telegram.chat(42)))
        # A press on the old prompt is answered, and resolves nothing.
        await telegram.press(prompt.message_id, once)
        await telegram.wait_for(lambda: "no longer pending" in telegram.callback_answers)


async def test_an_approval_that_expires_edits_the_prompt(
    telegram: FakeTelegram, daemon: Callable[..., Runtime]
) -> None:
    async with daemon() as runtime:
        # No config key sets the approval deadline (300 s by default): the test shortens the
        # agent's own setting. The deadline is ExecApprovals' wall clock; the test waits on the
        # session's approval_ended event and on the edit, never on a sleep.
        executor: Any = runtime.context.capabilities.require(AGENT_RUNTIME).executor()
        executor.settings = dataclasses.replace(executor.settings, approval_timeout_s=0.2)
        port = runtime.context.capabilities.require(SESSION_PORT)
        stream = port.watch(KEY)
        await telegram.send_text(TOOL)
        asked: ApprovalAsked | None = None
        while True:
            event = await asyncio.wait_for(stream.get(), 30)
            if isinstance(event, ApprovalAsked):
                asked = event
            elif isinstance(event, ApprovalEnded):
                break
        stream.close()
        assert asked is not None
        assert asked.approval_id == event.approval_id
        assert asked.expires_at_ms is not None
        assert event.decision is ApprovalDecision.TIMEOUT  # its own deadline, the run goes on
        expired = "bash: not answered in time (denied)"
        await telegram.wait_for(lambda: any(m.shown == expired for m in telegram.chat(42)))
        [prompt] = [m for m in telegram.chat(42) if m.shown == expired]
        assert prompt.buttons == []
        # The prompt was sent with its buttons, then edited (not a second message).
        [sent] = [p for p in telegram.method_calls("sendMessage") if "asks to run" in p["text"]]
        assert sent["reply_markup"]["inline_keyboard"]
        edits = [
            p
            for p in telegram.method_calls("editMessageText")
            if p["message_id"] == prompt.message_id
        ]
        assert [displayed(p["text"], p.get("parse_mode")) for p in edits] == [expired]
        assert not (edits[0].get("reply_markup") or {}).get("inline_keyboard")
        # A late press is answered and resolves nothing.
        await telegram.press(prompt.message_id, f"ap|{asked.approval_id}|approve_once")
        await telegram.wait_for(lambda: "no longer pending" in telegram.callback_answers)


async def test_commands_new_model_and_status(
    telegram: FakeTelegram, daemon: Callable[..., Runtime]
) -> None:
    async with daemon() as runtime:
        await telegram.send_text("/new")
        await telegram.wait_for(lambda: any("New session" in m.shown for m in telegram.chat(42)))
        await telegram.send_text("/echo fresh")
        await telegram.wait_for(lambda: any(m.shown == "fresh" for m in telegram.chat(42)))
        assert host_of(runtime).receipts[-1].session_key == KEY + ":sub:s1"
        await telegram.send_text("/model not a model")
        await telegram.wait_for(
            lambda: any("not of the form" in m.shown for m in telegram.chat(42))
        )
        await telegram.send_text("/model openai:gpt-4o-mini")
        await telegram.wait_for(lambda: any("Model set" in m.shown for m in telegram.chat(42)))
        await telegram.send_text("/status")
        await telegram.wait_for(lambda: any("Idle." in m.shown for m in telegram.chat(42)))
        status = next(m for m in telegram.chat(42) if "Idle." in m.shown)
        assert "openai:gpt-4o-mini" in status.shown
        assert KEY + ":sub:s1" in status.shown


async def test_a_restart_mid_delivery_sends_the_answer_once(
    telegram: FakeTelegram, daemon: Callable[..., Runtime]
) -> None:
    telegram.refuse_next("sendMessage", retry_after=3)
    async with daemon() as runtime:
        port = runtime.context.capabilities.require(SESSION_PORT)
        stream = port.watch(KEY)
        await telegram.send_text("/echo exactly once")
        while not isinstance(await asyncio.wait_for(stream.get(), 30), RunEnded):
            pass
        stream.close()
        host = host_of(runtime)
        await asyncio.wait_for(host.outbox.until(lambda s: s.retried >= 1), 10)
        assert telegram.chat(42) == []  # the retry is 3 s away: the daemon stops first
    # The daemon stopped with the answer pending; the next one sends it, once.
    async with daemon():
        await telegram.wait_for(lambda: [m.shown for m in telegram.chat(42)] == ["exactly once"])
    assert [m.shown for m in telegram.chat(42)] == ["exactly once"]


async def test_a_bad_token_leaves_the_daemon_running_without_the_channel(
    telegram: FakeTelegram, daemon: Callable[..., Runtime]
) -> None:
    async with daemon(token="999:wrong") as runtime:
        channels = runtime.handle("lemon_channels")
        assert isinstance(channels, Channels)
        failed = channels.failed["telegram"]
        assert failed.state is ChannelState.FAILED
        assert "LEMON_TEST_TELEGRAM_TOKEN" in failed.detail
        assert "999:wrong" not in failed.detail
        plane = runtime.handle("lemon_control_plane")
        async with httpx.AsyncClient() as client:
            health = await client.get(plane.url + "/healthz")  # type: ignore[attr-defined]
        assert health.status_code == 200


def running(status: ChannelStatus) -> bool:
    return status.state is ChannelState.RUNNING


def failed(status: ChannelStatus) -> bool:
    return status.state is ChannelState.FAILED


async def test_polling_refused_by_a_conflict_is_recorded_failed_then_running_again(
    telegram: FakeTelegram, daemon: Callable[..., Runtime]
) -> None:
    async with daemon() as runtime:
        host = host_of(runtime)
        await asyncio.wait_for(host.until_recorded(running), 10)
        # Fewer refusals than the bound: a passing conflict, the channel is still running.
        await telegram.refuse_polls(409, CONFLICT, POLL_FAILURES_BEFORE_FAILED - 1)
        await telegram.send_text("/echo still here")
        await telegram.wait_for(lambda: any(m.shown == "still here" for m in telegram.chat(42)))
        assert running(host.plugin.status())
        [row] = await channel_statuses(runtime.config, runtime.store)
        assert row["state"] == "running"

        # Another process keeps polling the same bot: the record says failed, and why.
        await telegram.refuse_polls(409, CONFLICT, POLL_FAILURES_BEFORE_FAILED)
        status = await asyncio.wait_for(host.until_recorded(failed), 30)
        assert "409" in status.detail
        assert "another process polls this bot" in status.detail
        [row] = await channel_statuses(runtime.config, runtime.store)
        assert row["state"] == "failed"
        assert row["detail"] == status.detail
        assert telegram.token not in row["detail"]

        # The other process stopped: the next answered poll records it running again.
        await telegram.send_text("/echo back again")
        await asyncio.wait_for(host.until_recorded(running), 30)
        [row] = await channel_statuses(runtime.config, runtime.store)
        assert row["state"] == "running"
        assert row["detail"] == "@lemon_bot (polling)"
        await telegram.wait_for(lambda: any(m.shown == "back again" for m in telegram.chat(42)))


async def test_a_token_revoked_while_polling_is_recorded_failed(
    telegram: FakeTelegram, daemon: Callable[..., Runtime]
) -> None:
    async with daemon() as runtime:
        host = host_of(runtime)
        await asyncio.wait_for(host.until_recorded(running), 10)
        await telegram.revoke_token()
        status = await asyncio.wait_for(host.until_recorded(failed), 30)
        assert "401" in status.detail
        assert "LEMON_TEST_TELEGRAM_TOKEN" in status.detail
        [row] = await channel_statuses(runtime.config, runtime.store)
        assert row["state"] == "failed"
        assert "revoked" in row["detail"]
        assert telegram.token not in row["detail"]
    # Stopped: the last record says so, and still says what went wrong before.
    assert host.recorded is not None
    assert host.recorded.state is ChannelState.STOPPED
    assert host.recorded.detail == f"stopped; before that: {status.detail}"


async def test_webhook_mode_checks_the_secret_header(
    telegram: FakeTelegram, daemon: Callable[..., Runtime], home: Path
) -> None:
    runtime = daemon(
        mode="webhook",
        webhook_url="https://bot.example.org/channels/telegram",
        webhook_secret_env="LEMON_TEST_WEBHOOK_SECRET",
    )
    options = runtime.option(ChannelsOptions)
    assert options is not None
    assert isinstance(options.environ, dict)
    options.environ["LEMON_TEST_WEBHOOK_SECRET"] = "s3cret"
    async with runtime:
        assert telegram.webhook is not None
        assert telegram.webhook["secret_token"] == "s3cret"
        plane = runtime.handle("lemon_control_plane")
        url = plane.url + "/channels/telegram"  # type: ignore[attr-defined]
        update = telegram.update_for_text("/echo via webhook")
        async with httpx.AsyncClient() as client:
            wrong = await client.post(
                url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "guess"}
            )
            missing = await client.post(url, json=update)
            assert wrong.status_code == 401
            assert missing.status_code == 401
            right = await client.post(
                url, json=update, headers={"X-Telegram-Bot-Api-Secret-Token": "s3cret"}
            )
            assert right.status_code == 200
        await telegram.wait_for(lambda: any(m.shown == "via webhook" for m in telegram.chat(42)))
        assert len(telegram.chat(42)) == 1


async def test_a_telegram_run_works_in_the_daemons_workspace_and_its_delivery_reaches_operators(
    telegram: FakeTelegram, served: Callable[[Path], Runtime], tmp_path: Path
) -> None:
    """`lemon serve --cwd D`: a Telegram run reads D/note.txt with no question about a path
    outside the workspace, and operators on the wire see the answer's channel.delivery."""
    from lemon_control_plane import ControlPlane
    from lemon_control_plane.testing import plane_client

    work = tmp_path / "served"
    work.mkdir()
    (work / "note.txt").write_text("the note says lemons")
    async with served(work) as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        async with plane_client(plane)() as operator:
            await operator.call("health")
            note = json.dumps({"path": str(work / "note.txt")})
            await telegram.send_text(f"/tool read {note}")
            await telegram.wait_for(
                lambda: any("the note says lemons" in m.shown for m in telegram.chat(42))
            )
            assert prompts(telegram) == []
            assert not any("outside the workspace" in m.shown for m in telegram.chat(42))
            detail = await operator.call("session.detail", {"sessionKey": KEY})
            assert detail["session"]["workspace"] == str(work.resolve())
            frame = await operator.event("channel.delivery", sessionKey=KEY, ok=True)
            assert frame["payload"]["channelId"] == "telegram"
