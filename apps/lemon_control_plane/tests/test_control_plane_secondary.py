"""The secondary methods: status, usage.status, usage.cost, runs.active.list,
runs.recent.list, logs.tail, config.get; the unsupported one (config.set) is not
advertised and answers NOT_IMPLEMENTED (goal.* are lemon_memory's registered methods); what
hello-ok advertises is exactly what dispatches."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import msgspec

from lemon_control_plane import ControlPlane, ControlPlaneConfig
from lemon_control_plane._secondary import UNSUPPORTED, redacted
from lemon_control_plane.testing import ClientFactory as Client
from lemon_control_plane.testing import plane_client, wire_client
from lemon_core.config import BusConfig, Config, ProviderConfig, StoreConfig
from lemon_core.sessions import SESSION_PORT
from lemon_runtime import Runtime

SESSION = "agent:default:main"
#: The method names the reference terminal client knows.
CLIENT_METHODS = [
    "chat.send",
    "chat.abort",
    "chat.history",
    "sessions.list",
    "sessions.active",
    "sessions.active.list",
    "sessions.patch",
    "sessions.reset",
    "sessions.delete",
    "session.detail",
    "models.list",
    "exec.approval.resolve",
    "exec.approvals.get",
    "health",
    "status",
    "usage.status",
    "usage.cost",
    "runs.active.list",
    "runs.recent.list",
    "goal.set",
    "goal.status",
    "goal.pause",
    "goal.resume",
    "goal.clear",
    "logs.tail",
    "config.get",
    "config.set",
]


async def test_advertised_methods_are_exactly_the_ones_that_dispatch(
    daemon: ControlPlane, client: Client
) -> None:
    async with client() as c:
        advertised = c.frames[0]["features"]["methods"]
        assert advertised == sorted(advertised) == list(daemon.methods)
        for method in advertised:
            res = await c.request(method, {})
            if not res["ok"]:
                code = res["error"]["code"]
                assert code not in ("METHOD_NOT_FOUND", "NOT_IMPLEMENTED"), (method, res)
        for method in UNSUPPORTED:
            assert method not in advertised
            res = await c.request(method, {"sessionKey": SESSION})
            assert res["error"]["code"] == "NOT_IMPLEMENTED", res
            assert res["error"]["message"]
        missing = [m for m in CLIENT_METHODS if m not in advertised and m not in UNSUPPORTED]
        assert missing == []


async def test_usage_and_run_lists_come_from_the_finished_runs(client: Client) -> None:
    async with client() as c:
        empty = await c.call("usage.status")
        assert (empty["period"], empty["runs"]) == ("today", 0)
        sent = await c.call("chat.send", {"sessionKey": SESSION, "prompt": "count me"})
        await c.completed(sent["runId"])
        usage = await c.call("usage.status")
        recent = await c.call("runs.recent.list", {"limit": 5})
        today = dt.datetime.now(dt.UTC).date().isoformat()
        cost = await c.call("usage.cost", {"startDate": today, "endDate": today})
        old = await c.call("usage.cost", {"startDate": "2001-01-01", "endDate": "2001-01-31"})
        status = await c.call("status")
        bad = await c.request("usage.cost", {"startDate": "yesterday"})
        backwards = await c.request("usage.cost", {"startDate": today, "endDate": "2001-01-01"})
    assert usage["runs"] == 1
    assert usage["summary"]["totalTokens"] == sum(usage["tokens"].values())
    assert [p["requests"] for p in usage["providers"]] == [1]
    (row,) = recent["runs"]
    assert (row["runId"], row["sessionKey"], row["status"]) == (sent["runId"], SESSION, "completed")
    assert row["finishedAtMs"] >= row["startedAtMs"] > 0
    assert (cost["startDate"], cost["endDate"], cost["runs"]) == (today, today, 1)
    assert [b["date"] for b in cost["breakdown"]] == [today]
    assert cost["totalCost"] == usage["cost"]
    assert (old["runs"], old["totalCost"], old["breakdown"]) == (0, 0, [])
    assert status["runs"]["completed_today"] == 1
    assert status["server"]["memory_mb"] > 0
    assert status["connections"]["operators"] >= 1
    assert bad["error"]["code"] == "INVALID_PARAMS"
    assert "YYYY-MM-DD" in bad["error"]["message"]
    assert backwards["error"]["code"] == "INVALID_PARAMS"


async def test_runs_active_list_shows_a_run_in_flight(client: Client) -> None:
    async with client() as c:
        assert (await c.call("runs.active.list"))["runs"] == []
        sent = await c.call(
            "chat.send", {"sessionKey": SESSION, "prompt": '/tool bash {"command": "echo hi"}'}
        )
        ask = await c.event("exec.approval.requested", runId=sent["runId"])
        (row,) = (await c.call("runs.active.list", {"limit": 10}))["runs"]
        assert (row["runId"], row["sessionKey"], row["status"]) == (
            sent["runId"],
            SESSION,
            "running",
        )
        assert row["startedAtMs"] > 0
        await c.call(
            "exec.approval.resolve",
            {"approvalId": ask["payload"]["approvalId"], "decision": "deny"},
        )
        await c.completed(sent["runId"])
        assert (await c.call("runs.active.list"))["runs"] == []


async def test_logs_tail_reads_the_end_of_the_daemon_log_redacted_and_filtered(
    boot: Callable[..., Runtime], tmp_path: Path
) -> None:
    log = tmp_path / "daemon.log"
    log.write_text(
        "lemon serve: listening on http://127.0.0.1:4040\n"
        "2026-12-01 10:00:00,123 WARNING lemon_router: slow store\n"
        "2026-12-01 10:00:01,000 ERROR lemon_gateway: key sk-abcdefghijklmnopqrstuvwx leaked\n"
        "2026-12-01 10:00:02,000 INFO lemon_core: fine\n",
        encoding="utf-8",
    )
    async with boot(log_file=str(log)) as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        async with plane_client(plane)() as c:
            tail = await c.call("logs.tail", {"limit": 3})
            errors = await c.call("logs.tail", {"limit": 10, "level": "error"})
            bad = await c.request("logs.tail", {"level": "loud"})
    assert [r["level"] for r in tail["logs"]] == ["warning", "error", "info"]
    assert tail["truncated"] is True
    warning = tail["logs"][0]
    assert warning["message"] == "lemon_router: slow store"
    assert warning["timestampMs"] == int(
        dt.datetime(2026, 12, 1, 10, 0, 0, 123000).astimezone(dt.UTC).timestamp() * 1000
    )
    (error,) = errors["logs"]
    assert "sk-abcdefghijklmnopqrstuvwx" not in error["message"]
    assert "[redacted]" in error["message"]
    assert bad["error"]["code"] == "INVALID_PARAMS"


async def test_logs_tail_without_a_log_yet_says_so(client: Client) -> None:
    async with client() as c:
        tail = await c.call("logs.tail")
    assert tail["logs"] == []
    assert tail["notice"] == "no log yet"


async def test_config_get_shows_the_configuration_without_secrets(
    boot: Callable[..., Runtime],
) -> None:
    async with boot(tokens=["s3cret-token"]) as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        async with wire_client(plane.ws_url)(handshake=False) as c:
            hello = await c.connect(auth={"token": "s3cret-token"})
            assert hello["type"] == "hello-ok"
            got = await c.call("config.get")
    text = repr(got)
    assert "s3cret-token" not in text
    assert got["controlPlane"]["tokens"] == 1
    assert "defaults" in got["config"]


def test_redaction_hides_secret_keys_and_credential_shaped_values() -> None:
    shown = redacted(
        {
            "providers": {
                "anthropic": {"api_key": "plain-secret", "api_key_env": "ANTHROPIC_API_KEY"},
                "notes": ["use sk-abcdefghijklmnopqrstuv here"],
            },
            "token": "",
            "count": 3,
        }
    )
    assert shown["providers"]["anthropic"] == {
        "api_key": "[redacted]",
        "api_key_env": "ANTHROPIC_API_KEY",
    }
    assert shown["providers"]["notes"] == ["use [redacted] here"]
    assert (shown["token"], shown["count"]) == ("", 3)


async def test_config_get_redacts_dsn_passwords_and_url_userinfo(
    boot: Callable[..., Runtime],
) -> None:
    shown = Config(
        store=StoreConfig(
            backend="postgres", dsn="postgresql://lemon:hunter2@db:5432/lemon?password=again"
        ),
        bus=BusConfig(backend="redis", url="rediss://user:redis-pw@cache:6380/0"),
        providers={
            "corp": ProviderConfig(
                kind="openai_completions", base_url="https://tok3n@llm.example/v1"
            )
        },
    )
    async with boot() as runtime:
        port = runtime.context.capabilities.require(SESSION_PORT)
        plane = ControlPlane(
            port, ControlPlaneConfig(port=0), config_view=lambda: msgspec.to_builtins(shown)
        )
        async with plane, plane_client(plane)() as c:
            got = await c.call("config.get")
    text = repr(got)
    for secret in ("hunter2", "again", "redis-pw", "tok3n", "lemon:", "user:"):
        assert secret not in text, secret
    assert got["config"]["store"]["dsn"] == "postgresql://***@db:5432/lemon?password=***"
    assert got["config"]["bus"]["url"] == "rediss://***@cache:6380/0"
    assert got["config"]["providers"]["corp"]["base_url"] == "https://***@llm.example/v1"


def test_redaction_covers_keyword_dsns_and_secret_named_query_parameters() -> None:
    shown = redacted(
        {
            "dsn": "host=db user=lemon password=hunter2 dbname=lemon",
            "quoted": "host=db password='two words' port=5432",
            "plain": "https://llm.example/v1?api_key=k-123&model=x",
        }
    )
    assert shown == {
        "dsn": "host=db user=lemon password=*** dbname=lemon",
        "quoted": "host=db password=*** port=5432",
        "plain": "https://llm.example/v1?api_key=***&model=x",
    }
