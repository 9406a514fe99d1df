"""Delivery to a channel target through ChannelSupervision, in a real daemon whose Telegram
channel talks to the fake Bot API on 127.0.0.1: a job's summary (a heartbeat's alert) is
admitted to the channel's outbox keyed by its cron_run_id, sent once, and recorded
``delivered`` only with the platform's message id; ``HEARTBEAT_OK`` sends nothing; a target
that cannot be delivered to is ``skipped: preflight`` with no model call and one alert."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from lemon_automation import AutomationApp
from lemon_automation._boot import AutomationOptions
from lemon_automation.service import AutomationService
from lemon_channels import ChannelsOptions
from lemon_channels.testing import FakeTelegram
from lemon_control_plane import ControlPlane, ControlPlaneOptions
from lemon_control_plane.testing import plane_client
from lemon_core.bus.topics import run_topic, session_topic
from lemon_core.channels import CHANNEL_SUPERVISION
from lemon_core.config import load_config
from lemon_platform_test.providers import Gate, ScriptedProviderServer, ScriptedTurn
from lemon_runtime import Runtime

TOKEN_ENV = "LEMON_TEST_TELEGRAM_TOKEN"
MAIN = "agent:default:main"
CHAT = "4242"


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
def daemon(tmp_path: Path, telegram: FakeTelegram) -> Callable[[], Runtime]:
    def make() -> Runtime:
        home, work = tmp_path / "home", tmp_path / "work"
        home.mkdir(exist_ok=True)
        work.mkdir(exist_ok=True)
        (home / "config.toml").write_text(
            "[channels.telegram]\n"
            f'token_env = "{TOKEN_ENV}"\n'
            f'api_base_url = "{telegram.url}"\n'
            "allowed_users = [42]\n"
            "poll_timeout_s = 5\n",
            encoding="utf-8",
        )
        loaded = load_config(home=home, cwd=work, environ={})
        options: list[Any] = [
            AutomationOptions(tick_s=0.2),
            ControlPlaneOptions(settings={"port": 0, "cwd": str(work)}),
            ChannelsOptions(environ={TOKEN_ENV: telegram.token}, edit_interval_s=0),
        ]
        return Runtime(profile="daemon", config=loaded, options=options)

    return make


async def queued(sub: Any) -> list[Any]:
    """The events already queued on ``sub`` (it is read until it has nothing for 0.2 s)."""
    out: list[Any] = []
    while True:
        try:
            out.append(await asyncio.wait_for(sub.get(), 0.2))
        except TimeoutError:
            return out


def service_of(rt: Runtime) -> AutomationService:
    app = rt.handle("lemon_automation")
    assert isinstance(app, AutomationApp)
    assert app.service is not None
    return app.service


async def test_a_jobs_summary_is_delivered_once_and_verified_by_its_message_id(
    daemon: Callable[[], Runtime], telegram: FakeTelegram
) -> None:
    async with daemon() as rt:
        plane = rt.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        main = rt.bus.subscribe(session_topic(MAIN))
        async with plane_client(plane)() as c:
            job = (
                await c.call(
                    "cron.add",
                    {"name": "report", "schedule": "0 9 * * *", "prompt": "/echo all green",
                     "channel": f"telegram:{CHAT}"},
                )
            )["job"]  # fmt: skip
            assert job["channel"] == f"telegram:{CHAT}"
            ran = await c.call("cron.run", {"id": job["id"], "wait": True})
            assert ran["status"] == "completed", ran
            assert ran["delivery"] == "admitted"
            await telegram.wait_for(lambda: len(telegram.chat(CHAT)) == 1)
            (sent,) = telegram.chat(CHAT)
            assert sent.text == "all green"

            # the summary still reaches the base session as history
            async with asyncio.timeout(10):
                while True:
                    event = await main.get()
                    if event.type == "run_completed":
                        break
            assert event.payload.completed.answer == "all green"

            (run,) = (await c.call("cron.runs", {"id": job["id"]}))["runs"]
            assert run["delivery"] == "delivered"
            assert run["deliveryMessageIds"] == [str(sent.message_id)]

            # a second submission of the same fire (a takeover re-delivering) sends nothing
            supervision = rt.context.capabilities.require(CHANNEL_SUPERVISION)
            again = await supervision.submit(
                f"telegram:{CHAT}", intent_id=ran["cronRunId"], text="all green"
            )
            assert again.status == "duplicate"
            audit = (await c.call("cron.audit", {"action": "delivery_admitted"}))["events"]
            assert [e["runId"] for e in audit] == [ran["cronRunId"]]
        main.cancel()
    assert len(telegram.chat(CHAT)) == 1


async def test_a_heartbeat_alert_goes_to_its_channel_and_heartbeat_ok_sends_nothing(
    daemon: Callable[[], Runtime], telegram: FakeTelegram
) -> None:
    async with daemon() as rt:
        plane = rt.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        service = service_of(rt)
        async with plane_client(plane)() as c:
            await c.call(
                "set-heartbeats",
                {"enabled": True, "prompt": "/echo HEARTBEAT_OK", "channel": f"telegram:{CHAT}"},
            )
            hb = await service.heartbeat("default")
            assert hb is not None
            _, _, done = await service.run_now(hb.id, triggered_by="wake")
            quiet = await done
            assert quiet.suppressed is True
            assert quiet.delivery is None
            _, _, done = await service.run_now(
                hb.id, triggered_by="wake", prompt="/echo the disk is full"
            )
            loud = await done
            assert loud.suppressed is False
            assert loud.delivery == "admitted"
            await telegram.wait_for(lambda: len(telegram.chat(CHAT)) == 1)
            assert [m.text for m in telegram.chat(CHAT)] == ["the disk is full"]


async def test_an_undeliverable_target_is_skipped_preflight_with_one_alert_and_no_model_call(
    daemon: Callable[[], Runtime], telegram: FakeTelegram
) -> None:
    async with daemon() as rt:
        plane = rt.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        service = service_of(rt)
        main = rt.bus.subscribe(session_topic(MAIN))
        async with plane_client(plane)() as c:
            job = (
                await c.call(
                    "cron.add",
                    {"name": "s", "schedule": "0 9 * * *", "prompt": "/echo x",
                     "channel": "slack:C1"},
                )
            )["job"]  # fmt: skip
            for _ in range(2):
                ran = await c.call("cron.run", {"id": job["id"], "wait": True})
                assert ran["status"] == "skipped", ran
                assert ran["reason"].startswith("preflight: delivery target slack:C1: ")
                assert "not configured" in ran["reason"]
            assert service.counters.fired == 0  # no model call
            assert service.counters.alerts == 1  # one alert, not one per fire
            async with asyncio.timeout(10):
                while True:
                    event = await main.get()
                    if event.type == "run_completed":
                        break
            assert event.meta["origin"] == "cron"
            assert event.payload.completed.ok is False
            assert "preflight" in (event.payload.completed.error or "")

            bad = await c.request(
                "cron.add",
                {"name": "b", "schedule": "0 9 * * *", "prompt": "/echo x", "channel": "nope"},
            )
            assert bad["error"]["code"] == "INVALID_PARAMS"
            assert bad["error"]["message"].startswith("channel: ")
        main.cancel()
    assert telegram.chat(CHAT) == []


async def test_a_streaming_heartbeat_ok_is_suppressed_and_no_delta_reaches_the_channel(
    tmp_path: Path, telegram: FakeTelegram, scripted_provider: ScriptedProviderServer
) -> None:
    """The heartbeat's model streams (the scripted provider on 127.0.0.1, a few characters per
    frame, held at a gate mid-answer): while ``HEARTBE`` is streamed the channel has nothing,
    the finished ``HEARTBEAT_OK`` is suppressed (no send, no forward), and the next, alerting,
    heartbeat is the only message the chat ever gets, sent once as a whole."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(
        '[defaults]\nmodel = "scripted:test-model"\n'
        '[providers.scripted]\nkind = "openai_completions"\n'
        f'base_url = "{scripted_provider.openai_base_url}"\n'
        "[channels.telegram]\n"
        f'token_env = "{TOKEN_ENV}"\napi_base_url = "{telegram.url}"\n'
        "allowed_users = [42]\npoll_timeout_s = 5\n",
        encoding="utf-8",
    )
    options: list[Any] = [
        AutomationOptions(tick_s=0.2),
        ControlPlaneOptions(settings={"port": 0, "cwd": str(work)}),
        ChannelsOptions(environ={TOKEN_ENV: telegram.token}, edit_interval_s=0),
    ]
    gate = Gate()
    scripted_provider.script(
        ScriptedTurn(text="HEARTBEAT_OK", chunk_size=3, pause=gate, pause_after=2),
        ScriptedTurn(text="the disk is full", chunk_size=3),
    )
    loaded = load_config(home=home, cwd=work, environ={})
    async with Runtime(profile="daemon", config=loaded, options=options) as rt:
        service = service_of(rt)
        main = rt.bus.subscribe(session_topic(MAIN))
        hb = await service.set_heartbeat("default", enabled=True, channel=f"telegram:{CHAT}")
        _, cid, done = await service.run_now(hb.id, triggered_by="wake")
        deltas = rt.bus.subscribe(run_topic(f"run_{cid}"))
        assert await gate.wait_reached_async(30)  # the answer is half streamed
        assert telegram.chat(CHAT) == []
        gate.open()
        quiet = await asyncio.wait_for(done, 30)
        assert quiet.status == "completed", quiet
        assert quiet.suppressed is True
        assert quiet.delivery is None
        # the run ended before its fire did: every delta of it is queued already
        streamed = [e.payload.text for e in await queued(deltas) if e.type == "delta"]
        assert len(streamed) >= 2, streamed  # it did stream, after the gate too
        assert "".join(streamed).endswith("_OK")
        _, _, done = await service.run_now(hb.id, triggered_by="wake")
        loud = await asyncio.wait_for(done, 30)
        assert loud.delivery == "admitted", loud
        await telegram.wait_for(lambda: len(telegram.chat(CHAT)) == 1)
        (sent,) = telegram.chat(CHAT)
        assert sent.text == "the disk is full"
        assert sent.edits == 0  # delivered whole, not streamed into the chat
        forwarded = [
            e.payload.completed.answer for e in await queued(main) if e.type == "run_completed"
        ]
        assert forwarded == []  # with a channel, not the base session: the alert went there
        main.cancel()
        deltas.cancel()
    assert [m.text for m in telegram.chat(CHAT)] == ["the disk is full"]
