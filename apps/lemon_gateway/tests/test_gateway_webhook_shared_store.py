"""Two daemons (the real ``daemon`` profile, in process, each with its own home and control
plane on 127.0.0.1:<ephemeral>) on one PostgreSQL schema share their webhook reservations: the
same key sent to A and B, at once and afterwards, executes once, and either daemon replays
the stored answer byte for byte. The test's schema is its own, dropped after."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from lemon_core.config import load_config
from lemon_core.idempotency.postgres import PostgresIdempotencyStore
from lemon_core.runtime import Runtime
from lemon_core.sessions import SESSION_PORT
from lemon_core.store.postgres import drop_schema
from lemon_gateway import WebhookIngress, idempotency_store_path

DSN = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture
async def schema() -> AsyncIterator[str]:
    name = f"gwidem_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    yield name
    await drop_schema(DSN, name)


@pytest.fixture
def runtime_on(
    tmp_path: Path, schema: str, make_home: Callable[..., None]
) -> Callable[[str], Runtime]:
    def make(name: str) -> Runtime:
        return _runtime(tmp_path, name, schema, make_home)

    return make


def _runtime(tmp_path: Path, name: str, schema: str, make_home: Callable[..., None]) -> Runtime:
    home = tmp_path / name
    work = tmp_path / f"work-{name}"
    work.mkdir()
    make_home(home)  # ingress enabled, the webhook "ci" and its secret
    with (home / "config.toml").open("a", encoding="utf-8") as config:
        config.write(f'[store]\nbackend = "postgres"\ndsn = "{DSN}"\nschema = "{schema}"\n')
    loaded = load_config(home=home, cwd=work, environ={})
    settings = {"port": 0, "cwd": str(work)}
    return Runtime(profile="daemon", config=loaded, settings={"control_plane": settings})


def _url(runtime: Runtime) -> str:
    url = getattr(runtime.handle("lemon_control_plane"), "url", None)
    assert isinstance(url, str)
    return url


def _submitted(runtime: Runtime) -> int:
    return runtime.context.capabilities.require(SESSION_PORT).statistics().submitted


async def test_one_key_sent_to_two_daemons_on_one_schema_executes_once(
    runtime_on: Callable[[str], Runtime],
    sign: Callable[..., dict[str, str]],
    body: Callable[..., bytes],
) -> None:
    async with runtime_on("a") as a, runtime_on("b") as b:
        for runtime in (a, b):
            mounted = runtime.mounts.resolve("/webhooks/ci")
            assert mounted is not None
            assert isinstance(mounted.app, WebhookIngress)
            assert isinstance(mounted.app.store, PostgresIdempotencyStore)
            assert not idempotency_store_path(runtime.home).exists()  # no SQLite file
        payload = body()
        limits = httpx.Limits(max_connections=50)
        async with (
            httpx.AsyncClient(base_url=_url(a), limits=limits) as on_a,
            httpx.AsyncClient(base_url=_url(b), limits=limits) as on_b,
        ):
            # 40 requests with one key, alternating A and B, all in flight together
            responses = await asyncio.gather(
                *(
                    (on_a, on_b)[i % 2].post(
                        "/webhooks/ci", content=payload, headers=sign(payload, key="shared")
                    )
                    for i in range(40)
                )
            )
            assert {r.status_code for r in responses} <= {202, 409}, [
                (r.status_code, r.content) for r in responses
            ]
            accepted = {r.content for r in responses if r.status_code == 202}
            assert len(accepted) == 1
            assert _submitted(a) + _submitted(b) == 1  # executed once, on one of them
            [first] = accepted
            answer: dict[str, Any] = msgspec.json.decode(first)
            assert answer["status"] == "accepted"
            # later, either daemon replays the stored answer byte for byte
            for client in (on_a, on_b):
                replay = await client.post(
                    "/webhooks/ci", content=payload, headers=sign(payload, key="shared")
                )
                assert replay.status_code == 202
                assert replay.content == first
                assert replay.headers["idempotent-replayed"] == "true"
            # the same key with another body is refused by the other daemon too
            other = body("another prompt")
            for client in (on_a, on_b):
                reused = await client.post(
                    "/webhooks/ci", content=other, headers=sign(other, key="shared")
                )
                assert reused.status_code == 422
        assert _submitted(a) + _submitted(b) == 1


async def test_a_daemon_starting_leaves_the_other_daemons_pending_fences_alone(
    runtime_on: Callable[[str], Runtime],
) -> None:
    async with runtime_on("a") as a:
        mounted = a.mounts.resolve("/webhooks/ci")
        assert mounted is not None
        assert isinstance(mounted.app, WebhookIngress)
        store = mounted.app.store
        now = mounted.app.clock_ms()
        reservation = await store.reserve(
            key_hash="h" * 64,
            integration="ci",
            body_hash="b",
            run_id="run_in_flight_on_a",
            session_key="agent:default:main",
            now_ms=now,
            ttl_ms=60_000,
            lease_ms=60_000,
        )
        assert reservation.created
        async with runtime_on("b"):  # B boots on the same schema meanwhile
            record = await store.lookup("h" * 64, now_ms=now + 1)
            assert record is not None
            assert record.state == "pending"  # still A's, still in flight
            assert record.in_flight(now + 1)
