"""Two daemons (the real ``daemon`` profile, in process, each with its own home and control
plane on 127.0.0.1:<ephemeral>) on one PostgreSQL schema share their webhook reservations: the
same key sent to A and B, at once and afterwards, executes once, and either daemon replays
the stored answer byte for byte; and the ingress fails closed when PostgreSQL is lost (through
a proxy the test cuts: the server is shared). The test's schema is its own, dropped after."""

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

from lemon_control_plane import ControlPlaneOptions
from lemon_core.config import load_config
from lemon_core.execution import Receipt, RunRequest
from lemon_core.idempotency import IdempotencyStoreError
from lemon_core.sessions import SESSION_PORT
from lemon_core.store import system_clock_ms
from lemon_infra import PostgresIdempotencyStore, drop_schema
from lemon_platform_test.proxy import TcpProxy
from lemon_runtime import Runtime
from lemon_webhooks import Webhook, WebhookIngress, WebhookSecret, idempotency_store_path

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
    return Runtime(
        profile="daemon", config=loaded, options=[ControlPlaneOptions(settings=settings)]
    )


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


class CuttingSubmitter:
    """Accepts like a router, but cuts the PostgreSQL proxy first when ``cut`` is set (the
    server is lost between the reservation and the acceptance write)."""

    def __init__(self, proxy: TcpProxy) -> None:
        self.proxy = proxy
        self.cut = False
        self.requests: list[RunRequest] = []

    def unavailable_reason(self) -> str | None:
        return None

    async def submit(self, request: RunRequest) -> Receipt:
        self.requests.append(request)
        if self.cut:
            self.proxy.cut()
        assert request.run_id is not None
        return Receipt(
            run_id=request.run_id,
            session_key=request.session_key,
            requested_mode=request.queue_mode,
            actual_mode=request.queue_mode,
            status="started",
            at_ms=0,
        )


async def _until_reconnected(store: PostgresIdempotencyStore) -> None:
    for _ in range(100):  # the pool reconnects (bounded retries, as a caller does)
        try:
            await store.watermark()
            return
        except IdempotencyStoreError:
            await asyncio.sleep(0.05)
    pytest.fail("the pool never reconnected")


async def test_a_postgres_loss_fails_closed_at_the_ingress(
    schema: str, sign: Callable[..., dict[str, str]], body: Callable[..., bytes]
) -> None:
    secret = WebhookSecret(b"k" * 32)
    with TcpProxy("127.0.0.1", 5432) as proxy:
        store = await PostgresIdempotencyStore.open(
            f"postgresql://postgres@127.0.0.1:{proxy.port}/test",
            schema=schema,
            timeout_s=1.0,
            min_connections=1,
            max_connections=1,
        )
        port = CuttingSubmitter(proxy)
        offset = [0]
        app = WebhookIngress(
            webhooks={"ci": Webhook(id="ci", secret=secret, agent_id="default")},
            store=store,
            submitter=port,
            submit_timeout_s=1.0,
            clock_ms=lambda: system_clock_ms() + offset[0],
        )
        transport = httpx.ASGITransport(app=app)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://hooks") as http:

                async def post(key: str) -> httpx.Response:
                    payload = body()
                    ts = app.clock_ms() // 1000
                    headers = sign(payload, key=key, secret=secret, timestamp=ts)
                    return await http.post("/webhooks/ci", content=payload, headers=headers)

                # lost before the lookup: 503, nothing submitted, the key not burned
                proxy.cut()
                refused = await post("before")
                assert refused.status_code == 503
                assert msgspec.json.decode(refused.content)["error"] == "store_unavailable"
                assert port.requests == []
                proxy.restore()
                await _until_reconnected(store)
                assert (await post("before")).status_code == 202  # runs now, once
                assert len(port.requests) == 1

                # lost after the reservation, before the acceptance write: never "accepted"
                port.cut = True
                uncertain = await post("during")
                port.cut = False
                assert uncertain.status_code == 202
                receipt = msgspec.json.decode(uncertain.content)
                assert receipt["status"] == "outcome_unknown"
                assert receipt["retry_safe"] is False
                assert len(port.requests) == 2
                proxy.restore()
                await _until_reconnected(store)
                [record] = await store.records(integration="ci", limit=1)  # the newest fence
                assert record.run_id == receipt["run_id"]
                assert (record.state, record.response) == ("pending", None)  # nothing claimed
                again = await post("during")
                assert again.status_code == 409  # its lease is live: maybe still in flight
                offset[0] = app.lease_ms  # past the lease: the uncertain receipt, not a rerun
                replay = await post("during")
                assert replay.status_code == 202
                assert msgspec.json.decode(replay.content)["status"] == "outcome_unknown"
                assert len(port.requests) == 2
        finally:
            await store.close()
