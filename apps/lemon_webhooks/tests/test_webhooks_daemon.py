"""The webhook ingress on the real daemon profile (router, gateway, native executor on the
offline provider, control plane on 127.0.0.1:<ephemeral>), over real HTTP."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from lemon_control_plane import ControlPlaneOptions
from lemon_core.config import load_config
from lemon_core.execution import VANISHED_RUN_LISTENER
from lemon_core.sessions import SESSION_PORT, RunEnded
from lemon_infra import SQLiteIdempotencyStore
from lemon_runtime import Runtime
from lemon_webhooks import WebhookIngress, Webhooks, idempotency_store_path

SESSION = "agent:default:webhook:ci:channel:ci"


def daemon_url(runtime: Runtime) -> str:
    url = getattr(runtime.handle("lemon_control_plane"), "url", None)
    assert isinstance(url, str)
    return url


async def test_disabled_ingress_mounts_nothing_and_the_route_is_404(
    boot: Callable[..., Runtime], sign: Any, body: Any
) -> None:
    async with boot(ingress=False) as runtime:
        mount = runtime.mounts.resolve("/webhooks/ci")
        assert mount is None or mount.owner != "lemon_webhooks"  # (lemon_web serves "/")
        async with httpx.AsyncClient(base_url=daemon_url(runtime)) as http:
            payload = body()
            response = await http.post("/webhooks/ci", content=payload, headers=sign(payload))
        assert response.status_code == 404
        assert not idempotency_store_path(runtime.home).exists()


async def test_a_webhook_whose_secret_is_unset_is_degraded_and_the_daemon_starts(
    boot: Callable[..., Runtime], sign: Any, body: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # A broken optional surface (one endpoint) degrades that surface, said and logged; it
    # does not block the daemon (nor every chat of the home).
    caplog.set_level(logging.WARNING, logger="lemon_webhooks")
    async with boot(secret=False) as runtime:
        handle = runtime.handle("lemon_webhooks")
        assert isinstance(handle, Webhooks)
        assert "LEMON_TEST_HOOK_SECRET is not set" in handle.degraded["ci"]
        assert handle.ingress is not None
        assert "ci" in handle.ingress.statistics()["degraded"]
        assert "LEMON_TEST_HOOK_SECRET is not set" in caplog.text
        async with httpx.AsyncClient(base_url=daemon_url(runtime)) as http:
            payload = body()
            response = await http.post("/webhooks/ci", content=payload, headers=sign(payload))
        assert response.status_code == 404  # the degraded endpoint is not served


async def test_a_signed_webhook_runs_once_with_its_fixed_run_id(
    daemon: Runtime, sign: Any, body: Any
) -> None:
    port = daemon.context.capabilities.require(SESSION_PORT)
    stream = port.watch(SESSION)
    try:
        async with httpx.AsyncClient(base_url=daemon_url(daemon)) as http:
            payload = body()
            first = await http.post("/webhooks/ci", content=payload, headers=sign(payload))
            assert first.status_code == 202
            answer = msgspec.json.decode(first.content)
            assert answer["status"] == "accepted"
            assert answer["session_key"] == SESSION
            async for event in stream:
                if isinstance(event, RunEnded):
                    assert event.run_id == answer["run_id"]  # the router kept our run id
                    break
            replay = await http.post("/webhooks/ci", content=payload, headers=sign(payload))
        assert replay.content == first.content
        assert replay.headers["idempotent-replayed"] == "true"
        assert port.statistics().submitted == 1
    finally:
        stream.close()


async def test_a_hundred_concurrent_same_key_requests_over_http_submit_once(
    daemon: Runtime, sign: Any, body: Any
) -> None:
    port = daemon.context.capabilities.require(SESSION_PORT)
    payload = body()
    # 100 requests at once over 50 connections: the control plane caps one client address at
    # 64 open connections ([control_plane] max_connections_per_client)
    limits = httpx.Limits(max_connections=50)
    async with httpx.AsyncClient(base_url=daemon_url(daemon), limits=limits) as http:
        responses = await asyncio.gather(
            *(
                http.post("/webhooks/ci", content=payload, headers=sign(payload, key="same"))
                for _ in range(100)
            )
        )
    assert {r.status_code for r in responses} <= {202, 409}
    assert len({r.content for r in responses if r.status_code == 202}) == 1
    assert port.statistics().submitted == 1
    mounted = daemon.mounts.resolve("/webhooks/ci")
    assert mounted is not None
    assert isinstance(mounted.app, WebhookIngress)
    store = await SQLiteIdempotencyStore.open(idempotency_store_path(daemon.home))
    try:
        [record] = await store.records(integration="ci")
        assert record.state == "accepted"
    finally:
        await store.close()


async def test_the_booted_ingress_arms_no_fault_point_whatever_the_environment(
    boot: Callable[..., Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The old test-only switch was an environment variable; now only a test fixture passes
    # fault points (webhooks_app(faults=...)), so the variable means nothing.
    monkeypatch.setenv("LEMON_WEBHOOK_FAULT", "hang_after_reserve")
    async with boot() as runtime:
        handle = runtime.handle("lemon_webhooks")
        assert isinstance(handle, Webhooks)
        assert handle.ingress is not None
        assert handle.ingress.faults is None
        assert runtime.context.capabilities.get(VANISHED_RUN_LISTENER) is handle.ingress


async def test_the_deprecated_gateway_spelling_still_serves_webhooks(
    tmp_path: Path, work: Path, make_home: Callable[..., None], sign: Any, body: Any
) -> None:
    home = tmp_path / "home"
    make_home(home)  # the secret in secrets.env; the config below replaces the file
    (home / "config.toml").write_text(
        '[gateway]\ningress_enabled = true\n[[gateway.webhooks]]\nid = "ci"\n'
        'secret_env = "LEMON_TEST_HOOK_SECRET"\n',
        encoding="utf-8",
    )
    loaded = load_config(home=home, cwd=work, environ={})
    assert [d.key for d in loaded.deprecations] == ["gateway.ingress_enabled", "gateway.webhooks"]
    settings = {"port": 0, "cwd": str(work)}
    runtime = Runtime(
        profile="daemon", config=loaded, options=[ControlPlaneOptions(settings=settings)]
    )
    async with runtime, httpx.AsyncClient(base_url=daemon_url(runtime)) as http:
        payload = body()
        response = await http.post("/webhooks/ci", content=payload, headers=sign(payload))
    assert response.status_code == 202


async def test_a_webhook_run_works_in_the_daemons_workspace(
    tmp_path: Path, sign: Any, body: Any, make_home: Callable[..., None]
) -> None:
    """`lemon serve --cwd D`: a webhook run reads D/note.txt with no question about a path
    outside the workspace (its session has no workspace of its own: the daemon's applies)."""
    from lemon_core.sessions import ApprovalAsked
    from lemon_runtime import DaemonWorkspace

    home, work = tmp_path / "served-home", tmp_path / "served"
    work.mkdir()
    (work / "note.txt").write_text("the note says lemons")
    make_home(home)
    loaded = load_config(home=home, cwd=tmp_path, environ={})
    options = [
        ControlPlaneOptions(port=0, cwd=str(work)),
        DaemonWorkspace(path=str(work.resolve())),
    ]
    async with Runtime(profile="daemon", config=loaded, options=options) as runtime:
        port = runtime.context.capabilities.require(SESSION_PORT)
        stream = port.watch(SESSION)
        try:
            async with httpx.AsyncClient(base_url=daemon_url(runtime)) as http:
                note = msgspec.json.encode({"path": str(work / "note.txt")}).decode()
                payload = body(f"/tool read {note}")
                sent = await http.post("/webhooks/ci", content=payload, headers=sign(payload))
                assert sent.status_code == 202

            async def until_end() -> RunEnded:
                async for event in stream:
                    assert not isinstance(event, ApprovalAsked), event
                    if isinstance(event, RunEnded):
                        return event
                raise AssertionError("the stream ended")

            ended = await asyncio.wait_for(until_end(), 60)
        finally:
            stream.close()
    assert ended.ok, ended
    assert "the note says lemons" in ended.answer
