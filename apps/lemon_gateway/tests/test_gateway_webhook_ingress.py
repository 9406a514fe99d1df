"""The webhook ingress's rules, each with a test: the real ASGI application over a real SQLite
idempotency store, submitting to a scripted port (a fake behind the ``Submitter`` Protocol),
with store faults injected through a failing store port."""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Literal

import httpx
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lemon_core.execution import Receipt, RouterUnavailableError, RunRequest
from lemon_core.idempotency import (
    LEGACY_TABLE,
    IdempotencyRecord,
    IdempotencyStore,
    IdempotencyStoreError,
    MigrationReport,
    Reservation,
    SQLiteIdempotencyStore,
    SweepReport,
    create_legacy_table,
)
from lemon_gateway import Webhook, WebhookIngress, WebhookSecret

SECRET = WebhookSecret(b"k" * 32)
Behaviour = Literal["accept", "reject", "raise", "unavailable", "refuse", "hang", "other_id"]


class ScriptedSubmitter:
    """Answers like a router would; counts submissions; can hold the first one at a gate."""

    def __init__(self) -> None:
        self.behaviour: Behaviour = "accept"
        self.unavailable: str | None = None
        self.requests: list[RunRequest] = []
        self.entered = asyncio.Event()
        self.gate: asyncio.Event | None = None

    def unavailable_reason(self) -> str | None:
        return self.unavailable

    async def submit(self, request: RunRequest) -> Receipt:
        self.requests.append(request)
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        assert request.run_id is not None
        status: Any = "started"
        if self.behaviour == "raise":
            raise RuntimeError("the router crashed mid-submission")
        if self.behaviour == "unavailable":
            raise RouterUnavailableError("the router stopped")
        if self.behaviour == "refuse":
            raise ValueError("agent_id does not match")
        if self.behaviour == "hang":
            await asyncio.Event().wait()
        if self.behaviour == "reject":
            status = "rejected"
        run_id = "run_other" if self.behaviour == "other_id" else request.run_id
        return Receipt(
            run_id=run_id,
            session_key=request.session_key,
            requested_mode=request.queue_mode,
            actual_mode=request.queue_mode,
            status=status,
            at_ms=0,
            reason="router_full: try later" if status == "rejected" else None,
        )


Step = Literal["lookup", "reserve", "complete", "mark_unknown", "release"]


class FailingStore:
    """An IdempotencyStore that fails (the operation does not happen) at the armed steps."""

    def __init__(self, inner: SQLiteIdempotencyStore) -> None:
        self.inner = inner
        self.failing: set[Step] = set()

    def _check(self, step: Step) -> None:
        if step in self.failing:
            raise IdempotencyStoreError(f"injected failure at {step}")

    async def reserve(self, **kw: Any) -> Reservation:
        self._check("reserve")
        return await self.inner.reserve(**kw)

    async def lookup(self, key_hash: str, *, now_ms: int) -> IdempotencyRecord | None:
        self._check("lookup")
        return await self.inner.lookup(key_hash, now_ms=now_ms)

    async def complete(self, **kw: Any) -> bool:
        self._check("complete")
        return await self.inner.complete(**kw)

    async def mark_unknown(self, **kw: Any) -> bool:
        self._check("mark_unknown")
        return await self.inner.mark_unknown(**kw)

    async def release(self, **kw: Any) -> bool:
        self._check("release")
        return await self.inner.release(**kw)

    async def recover(self, *, now_ms: int) -> int:
        return await self.inner.recover(now_ms=now_ms)

    async def sweep(self, *, now_ms: int) -> SweepReport:
        return await self.inner.sweep(now_ms=now_ms)

    async def watermark(self) -> int:
        return await self.inner.watermark()

    async def records(
        self, *, limit: int = 100, integration: str | None = None
    ) -> list[IdempotencyRecord]:
        return await self.inner.records(limit=limit, integration=integration)

    async def migrate_legacy(self, *, now_ms: int, ttl_ms: int) -> MigrationReport:
        return await self.inner.migrate_legacy(now_ms=now_ms, ttl_ms=ttl_ms)

    async def schema_version(self) -> int:
        return await self.inner.schema_version()

    async def close(self) -> None:
        await self.inner.close()

    def statistics(self) -> dict[str, Any]:
        return self.inner.statistics()


class Clock:
    def __init__(self) -> None:
        self.now_ms = int(time.time() * 1000)

    def __call__(self) -> int:
        return self.now_ms


class Harness:
    def __init__(
        self, app: WebhookIngress, store: FailingStore, port: ScriptedSubmitter, clock: Clock
    ) -> None:
        self.app = app
        self.store = store
        self.port = port
        self.clock = clock
        self.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://webhooks.test"
        )

    async def post(
        self,
        body: bytes,
        *,
        key: str | None = "key-1",
        path: str = "/webhooks/ci",
        secret: WebhookSecret = SECRET,
        sign: Callable[..., dict[str, str]],
        **options: Any,
    ) -> httpx.Response:
        headers = sign(
            body, key=key, secret=secret, timestamp=options.pop("timestamp", self.clock() // 1000)
        )
        headers.update(options.pop("headers", {}))
        return await self.http.post(path, content=options.pop("content", body), headers=headers)

    async def records(self) -> list[IdempotencyRecord]:
        return await self.store.inner.records()


@pytest.fixture
async def hooks(tmp_path: Path) -> AsyncIterator[Harness]:
    inner = await SQLiteIdempotencyStore.open(tmp_path / "idempotency.sqlite3")
    store = FailingStore(inner)
    assert isinstance(store, IdempotencyStore)
    port = ScriptedSubmitter()
    clock = Clock()
    app = WebhookIngress(
        webhooks={"ci": Webhook(id="ci", secret=SECRET, agent_id="default")},
        store=store,
        submitter=port,
        submit_timeout_s=0.5,
        max_body_bytes=4096,
        clock_ms=clock,
    )
    harness = Harness(app, store, port, clock)
    try:
        yield harness
    finally:
        await harness.http.aclose()
        await inner.close()


def _json(response: httpx.Response) -> Any:
    return msgspec.json.decode(response.content)


# -- acceptance and replay -------------------------------------------------------------------


async def test_an_accepted_webhook_answers_202_with_the_run_id_fixed_at_reservation(
    hooks: Harness, sign: Any, body: Any
) -> None:
    response = await hooks.post(body(), sign=sign)
    assert response.status_code == 202
    answer = _json(response)
    [request] = hooks.port.requests
    assert answer == {
        "status": "accepted",
        "run_id": request.run_id,
        "session_key": "agent:default:webhook:ci:channel:ci",
    }
    assert request.origin == "webhook:ci"
    [record] = await hooks.records()
    assert (record.state, record.run_id) == ("accepted", request.run_id)
    assert "idempotent-replayed" not in response.headers


async def test_a_replay_returns_the_stored_response_byte_for_byte(
    hooks: Harness, sign: Any, body: Any
) -> None:
    first = await hooks.post(body(), sign=sign)
    again = await hooks.post(body(), sign=sign)
    assert again.status_code == 202
    assert again.content == first.content
    assert again.headers["idempotent-replayed"] == "true"
    assert len(hooks.port.requests) == 1


async def test_the_same_key_with_a_different_body_is_422(
    hooks: Harness, sign: Any, body: Any
) -> None:
    await hooks.post(body("one"), sign=sign)
    response = await hooks.post(body("two"), sign=sign)
    assert response.status_code == 422
    assert _json(response)["error"] == "idempotency_key_reused"
    assert len(hooks.port.requests) == 1


async def test_the_same_key_while_the_first_is_submitted_is_409(
    hooks: Harness, sign: Any, body: Any
) -> None:
    hooks.port.gate = asyncio.Event()
    first = asyncio.create_task(hooks.post(body(), sign=sign))
    await hooks.port.entered.wait()
    second = await hooks.post(body(), sign=sign)
    assert second.status_code == 409
    assert _json(second)["error"] == "request_in_progress"
    hooks.port.gate.set()
    assert (await first).status_code == 202
    assert len(hooks.port.requests) == 1


async def test_a_hundred_concurrent_requests_with_one_key_execute_exactly_once(
    hooks: Harness, sign: Any, body: Any
) -> None:
    hooks.port.gate = asyncio.Event()
    answered = 0
    all_but_one = asyncio.Event()

    async def one() -> httpx.Response:
        nonlocal answered
        response = await hooks.post(body(), sign=sign)
        answered += 1
        if answered == 99:
            all_but_one.set()
        return response

    tasks = [asyncio.create_task(one()) for _ in range(100)]
    await all_but_one.wait()  # 99 answered while the first is held inside the router
    hooks.port.gate.set()
    responses = await asyncio.gather(*tasks)
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [202] + [409] * 99
    assert len(hooks.port.requests) == 1
    replay = await hooks.post(body(), sign=sign)
    assert replay.headers["idempotent-replayed"] == "true"


async def test_a_hundred_concurrent_requests_without_a_gate_still_execute_once(
    hooks: Harness, sign: Any, body: Any
) -> None:
    responses = await asyncio.gather(*(hooks.post(body(), sign=sign) for _ in range(100)))
    assert len(hooks.port.requests) == 1
    accepted = {r.content for r in responses if r.status_code == 202}
    assert len(accepted) == 1  # the original and every replay: the same bytes
    assert {r.status_code for r in responses} <= {202, 409}


# -- keys and bodies -------------------------------------------------------------------------


@pytest.mark.parametrize("key", [None, "", "   "])
async def test_a_missing_or_blank_key_is_400_and_nothing_is_reserved(
    hooks: Harness, sign: Any, body: Any, key: str | None
) -> None:
    response = await hooks.post(body(), key=key, sign=sign)
    assert response.status_code == 400
    assert _json(response)["error"] in ("missing_idempotency_key", "invalid_idempotency_key")
    assert await hooks.records() == []
    assert hooks.port.requests == []


async def test_a_key_that_is_not_text_or_sent_twice_is_400(
    hooks: Harness, sign: Any, body: Any
) -> None:
    payload = body()
    headers = [(k, v) for k, v in sign(payload, key=None).items()]
    for extra in ([("idempotency-key", b"\xff\xfe")], [("idempotency-key", "a")] * 2):
        response = await hooks.http.post(
            "/webhooks/ci", content=payload, headers=[*headers, *extra]
        )
        assert response.status_code == 400
    assert await hooks.records() == []


async def test_the_raw_key_never_reaches_the_store_or_the_router(
    hooks: Harness, sign: Any, body: Any
) -> None:
    await hooks.post(body(), key="caller-secret-key-123", sign=sign)
    [record] = await hooks.records()
    assert "caller-secret-key-123" not in str(record.to_dict())
    [request] = hooks.port.requests
    assert "caller-secret-key-123" not in repr(request)


@pytest.mark.parametrize(
    "payload",
    [b"not json", b"[]", b"{}", b'{"prompt": "  "}', b'{"prompt": "x", "extra": 1}'],
)
async def test_an_invalid_body_is_400_and_nothing_is_reserved(
    hooks: Harness, sign: Any, payload: bytes
) -> None:
    response = await hooks.post(payload, sign=sign)
    assert response.status_code == 400
    assert _json(response)["error"] == "invalid_body"
    assert await hooks.records() == []


async def test_a_body_over_the_limit_is_413_before_it_is_verified_or_stored(
    hooks: Harness, sign: Any, body: Any
) -> None:
    big = body("x" * 5000)
    response = await hooks.post(big, sign=sign)
    assert response.status_code == 413

    async def chunks() -> AsyncIterator[bytes]:  # no content-length: counted while reading
        for _ in range(10):
            yield b"x" * 1000

    streamed = await hooks.http.post("/webhooks/ci", content=chunks(), headers=sign(b"irrelevant"))
    assert streamed.status_code == 413
    assert await hooks.records() == []


async def test_the_body_may_choose_the_session_of_the_webhooks_agent_only(
    hooks: Harness, sign: Any, body: Any
) -> None:
    ok = await hooks.post(body(session_key="agent:default:main"), key="a", sign=sign)
    assert _json(ok)["session_key"] == "agent:default:main"
    other = await hooks.post(body(session_key="agent:root:main"), key="b", sign=sign)
    assert other.status_code == 400
    bad = await hooks.post(body(session_key="agent:default:"), key="c", sign=sign)
    assert bad.status_code == 400
    mode = await hooks.post(body(queue_mode="followup"), key="d", sign=sign)
    assert mode.status_code == 202
    assert hooks.port.requests[-1].queue_mode == "followup"


# -- signatures ------------------------------------------------------------------------------


async def test_a_wrong_secret_is_401_and_nothing_is_read_or_stored(
    hooks: Harness, sign: Any, body: Any
) -> None:
    wrong = WebhookSecret(b"w" * 32)
    response = await hooks.post(body(), secret=wrong, sign=sign)
    assert response.status_code == 401
    assert _json(response)["error"] == "invalid_signature"
    # even a missing key and an invalid body are not looked at before the signature
    assert (await hooks.post(b"not json", key=None, secret=wrong, sign=sign)).status_code == 401
    assert await hooks.records() == []
    assert hooks.port.requests == []


@pytest.mark.parametrize("offset_s", [-301, 301, -3600])
async def test_a_validly_signed_message_with_a_stale_timestamp_is_401(
    hooks: Harness, sign: Any, body: Any, offset_s: int
) -> None:
    stamp = hooks.clock() // 1000 + offset_s
    response = await hooks.post(body(), timestamp=stamp, sign=sign)
    assert response.status_code == 401
    assert "webhook-timestamp" in _json(response)["message"]
    within = await hooks.post(body(), timestamp=hooks.clock() // 1000 - 299, sign=sign)
    assert within.status_code == 202


async def test_a_tampered_body_is_401(hooks: Harness, sign: Any, body: Any) -> None:
    response = await hooks.post(body("original"), content=body("tampered"), sign=sign)
    assert response.status_code == 401
    assert await hooks.records() == []


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
async def test_a_missing_signature_header_is_401(
    hooks: Harness, sign: Any, body: Any, missing: str
) -> None:
    payload = body()
    headers = sign(payload)
    del headers[missing]
    response = await hooks.http.post("/webhooks/ci", content=payload, headers=headers)
    assert response.status_code == 401


async def test_any_of_several_signatures_may_match_key_rotation(
    hooks: Harness, sign: Any, body: Any
) -> None:
    payload = body()
    headers = sign(payload)
    headers["webhook-signature"] = "v1,AAAA " + headers["webhook-signature"]
    response = await hooks.http.post("/webhooks/ci", content=payload, headers=headers)
    assert response.status_code == 202


def test_a_malformed_secret_is_refused_with_the_fix() -> None:
    from lemon_gateway import GatewayConfigError

    for text in ("plain", "whsec_!!!", "whsec_c2hvcnQ="):
        with pytest.raises(GatewayConfigError, match=r"whsec_|base64|too short"):
            WebhookSecret.parse(text)
    assert SECRET.text() not in repr(WebhookSecret.parse(SECRET.text()))
    assert repr(SECRET) == "WebhookSecret()"


# -- router outcomes -------------------------------------------------------------------------


async def test_an_unavailable_router_is_503_with_nothing_reserved(
    hooks: Harness, sign: Any, body: Any
) -> None:
    hooks.port.unavailable = "the router is not running"
    response = await hooks.post(body(), sign=sign)
    assert response.status_code == 503
    assert _json(response)["error"] == "router_unavailable"
    assert "retry-after" in response.headers
    assert await hooks.records() == []
    hooks.port.unavailable = None
    assert (await hooks.post(body(), sign=sign)).status_code == 202  # the key was not burned


async def test_a_replay_needs_no_router(hooks: Harness, sign: Any, body: Any) -> None:
    first = await hooks.post(body(), sign=sign)
    hooks.port.unavailable = "the router is not running"
    replay = await hooks.post(body(), sign=sign)
    assert (replay.status_code, replay.content) == (202, first.content)
    assert (await hooks.post(body(), key="new", sign=sign)).status_code == 503


@pytest.mark.parametrize(
    ("behaviour", "status"), [("reject", 503), ("unavailable", 503), ("refuse", 400)]
)
async def test_a_definite_refusal_releases_the_key(
    hooks: Harness, sign: Any, body: Any, behaviour: Behaviour, status: int
) -> None:
    hooks.port.behaviour = behaviour
    response = await hooks.post(body(), sign=sign)
    assert response.status_code == status
    assert await hooks.records() == []
    hooks.port.behaviour = "accept"
    assert (await hooks.post(body(), sign=sign)).status_code == 202


@pytest.mark.parametrize("behaviour", ["raise", "hang", "other_id"])
async def test_an_unknown_outcome_gets_the_uncertain_receipt_and_so_does_its_replay(
    hooks: Harness, sign: Any, body: Any, behaviour: Behaviour
) -> None:
    hooks.port.behaviour = behaviour
    response = await hooks.post(body(), sign=sign)
    [request] = hooks.port.requests
    expected = {"status": "outcome_unknown", "run_id": request.run_id, "retry_safe": False}
    assert response.status_code == 202
    assert _json(response) == expected
    hooks.port.behaviour = "accept"
    replay = await hooks.post(body(), sign=sign)
    assert (replay.status_code, _json(replay)) == (202, expected)
    assert replay.headers["idempotent-replayed"] == "true"
    assert len(hooks.port.requests) == 1  # never executed again
    [record] = await hooks.records()
    assert record.state == "outcome_unknown"


# -- store faults at each step ---------------------------------------------------------------


@pytest.mark.parametrize("step", ["lookup", "reserve"])
async def test_a_store_failure_before_submission_fails_closed_and_keeps_the_key(
    hooks: Harness, sign: Any, body: Any, step: Step
) -> None:
    hooks.store.failing = {step}
    response = await hooks.post(body(), sign=sign)
    assert response.status_code == 503
    assert _json(response)["error"] == "store_unavailable"
    assert hooks.port.requests == []
    assert await hooks.records() == []
    hooks.store.failing = set()
    assert (await hooks.post(body(), sign=sign)).status_code == 202


async def test_a_replay_lookup_failure_is_503_never_a_generic_success(
    hooks: Harness, sign: Any, body: Any
) -> None:
    assert (await hooks.post(body(), sign=sign)).status_code == 202
    hooks.store.failing = {"lookup"}
    response = await hooks.post(body(), sign=sign)
    assert response.status_code == 503
    assert len(hooks.port.requests) == 1


async def test_a_receipt_store_failure_claims_no_acceptance(
    hooks: Harness, sign: Any, body: Any
) -> None:
    hooks.store.failing = {"complete"}
    response = await hooks.post(body(), sign=sign)
    [request] = hooks.port.requests
    assert _json(response) == {
        "status": "outcome_unknown",
        "run_id": request.run_id,
        "retry_safe": False,
    }
    hooks.store.failing = set()
    replay = await hooks.post(body(), sign=sign)
    assert _json(replay)["status"] == "outcome_unknown"
    assert len(hooks.port.requests) == 1


async def test_when_even_marking_unknown_fails_the_fence_stays_until_its_lease_ends(
    hooks: Harness, sign: Any, body: Any
) -> None:
    hooks.store.failing = {"complete", "mark_unknown"}
    first = await hooks.post(body(), sign=sign)
    assert _json(first)["status"] == "outcome_unknown"
    hooks.store.failing = set()
    in_lease = await hooks.post(body(), sign=sign)
    assert in_lease.status_code == 409  # pending: may still be in flight
    hooks.clock.now_ms += hooks.app.lease_ms
    after = await hooks.post(body(), sign=sign)
    assert (after.status_code, _json(after)["status"]) == (202, "outcome_unknown")
    assert len(hooks.port.requests) == 1


async def test_a_failed_release_after_a_refusal_never_lets_the_key_run_twice(
    hooks: Harness, sign: Any, body: Any
) -> None:
    hooks.port.behaviour = "reject"
    hooks.store.failing = {"release"}
    assert (await hooks.post(body(), sign=sign)).status_code == 503
    hooks.store.failing = set()
    hooks.port.behaviour = "accept"
    assert (await hooks.post(body(), sign=sign)).status_code == 409
    assert len(hooks.port.requests) == 1


# -- expiry and legacy fences ----------------------------------------------------------------


async def test_after_the_ttl_the_key_runs_again_with_a_new_run_id(
    hooks: Harness, sign: Any, body: Any
) -> None:
    first = _json(await hooks.post(body(), sign=sign))
    hooks.clock.now_ms += hooks.app.ttl_ms
    second = _json(await hooks.post(body(), sign=sign))
    assert second["status"] == "accepted"
    assert second["run_id"] != first["run_id"]
    assert len(hooks.port.requests) == 2


async def test_legacy_fences_answer_by_what_is_known_of_them(
    tmp_path: Path, hooks: Harness, sign: Any, body: Any
) -> None:
    now = hooks.clock()
    exact = '{"run_id":"run-legacy","session_key":"s","mode":"async"}'
    with sqlite3.connect(hooks.store.inner.path) as conn:
        create_legacy_table(conn)
        conn.executemany(
            f"INSERT INTO {LEGACY_TABLE} VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                ("ci", "done", "completed", "run-legacy", "s", exact, now),
                ("ci", "sent", "submitted", "run-sent", "s", None, now),
                ("ci", "ambiguous", "pending", None, None, None, now),
            ],
        )
    # no migration pass yet: the reservation itself migrates the raw row it finds
    done = await hooks.post(body("any body"), key="done", sign=sign)
    assert (done.status_code, done.content) == (202, exact.encode())
    assert done.headers["idempotent-replayed"] == "true"
    sent = await hooks.post(body(), key="sent", sign=sign)
    assert _json(sent) == {"status": "outcome_unknown", "run_id": "run-sent", "retry_safe": False}
    ambiguous = await hooks.post(body(), key="ambiguous", sign=sign)
    assert ambiguous.status_code == 409
    assert _json(ambiguous)["error"] == "ambiguous_reservation"
    assert hooks.port.requests == []


# -- routing ---------------------------------------------------------------------------------


async def test_unknown_webhooks_and_other_methods_are_refused(hooks: Harness, sign: Any) -> None:
    assert (await hooks.post(b"{}", path="/webhooks/nope", sign=sign)).status_code == 404
    assert (await hooks.post(b"{}", path="/webhooks/ci/x", sign=sign)).status_code == 404
    get = await hooks.http.get("/webhooks/ci")
    assert (get.status_code, get.headers["allow"]) == (405, "POST")
    doc = await hooks.http.get("/webhooks/openapi.json")
    assert doc.status_code == 200
    assert "/webhooks/{webhook_id}" in _json(doc)["paths"]


# -- configuration ---------------------------------------------------------------------------


def test_webhook_config_refuses_a_duplicated_id_and_bad_entries() -> None:
    from lemon_gateway import GatewayConfig, GatewayConfigError

    entry = {"id": "ci", "secret_env": "HOOK_SECRET"}
    with pytest.raises(GatewayConfigError, match="used twice"):
        GatewayConfig.from_mapping({"webhooks": [entry, entry]})
    with pytest.raises(GatewayConfigError, match=r"webhooks\[0\]"):
        GatewayConfig.from_mapping({"webhooks": [{"id": "ci"}]})
    config = GatewayConfig.from_mapping({"webhooks": [entry], "idempotency_ttl_s": 60})
    assert [w.id for w in config.webhooks] == ["ci"]


def test_secrets_resolve_from_the_environment_first_then_secrets_env(tmp_path: Path) -> None:
    from lemon_core.config import WebhookConfig
    from lemon_gateway import GatewayConfigError, resolve_webhooks

    config = (WebhookConfig(id="ci", secret_env="HOOK_SECRET"),)
    (tmp_path / "secrets.env").write_text(f"HOOK_SECRET={SECRET.text()}\n")
    [hook] = resolve_webhooks(config, environ={}, home=tmp_path).values()
    assert hook.secret == SECRET
    other = WebhookSecret(b"o" * 32)
    [hook] = resolve_webhooks(config, environ={"HOOK_SECRET": other.text()}, home=tmp_path).values()
    assert hook.secret == other
    with pytest.raises(GatewayConfigError, match="HOOK_SECRET is not set"):
        resolve_webhooks(config, environ={}, home=tmp_path / "nowhere")
    with pytest.raises(GatewayConfigError, match="whsec_"):
        resolve_webhooks(config, environ={"HOOK_SECRET": "hunter2"}, home=tmp_path)


# -- the invariant, over random sequences ----------------------------------------------------

_Op = tuple[str, int, Behaviour, Step | None, bool]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.sampled_from([1, 2]),
            st.sampled_from(["accept", "accept", "raise", "reject"]),
            st.sampled_from([None, None, "lookup", "reserve", "complete", "release"]),
            st.booleans(),  # first let every lease run out
        ),
        min_size=1,
        max_size=12,
    )
)
def test_any_sequence_runs_each_key_at_most_once_and_replays_exactly(
    sign: Callable[..., dict[str, str]], ops: list[_Op]
) -> None:
    """Per key: at most one submission that was not definitely refused; every accepted answer
    is the same bytes; after an unknown outcome, never an acceptance; only documented codes."""
    asyncio.run(_run_sequence(ops, sign))


async def _run_sequence(ops: list[_Op], sign: Callable[..., dict[str, str]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        inner = await SQLiteIdempotencyStore.open(Path(directory) / "idempotency.sqlite3")
        store = FailingStore(inner)
        port = ScriptedSubmitter()
        clock = Clock()
        app = WebhookIngress(
            webhooks={"ci": Webhook(id="ci", secret=SECRET)},
            store=store,
            submitter=port,
            clock_ms=clock,
        )
        harness = Harness(app, store, port, clock)
        live: dict[str, int] = {}
        accepted: dict[str, bytes] = {}
        unknown: set[str] = set()
        try:
            for key, prompt, behaviour, failing, wait in ops:
                if wait:
                    clock.now_ms += app.lease_ms
                port.behaviour = behaviour
                store.failing = set() if failing is None else {failing}
                before = len(port.requests)
                payload = msgspec.json.encode({"prompt": f"p{prompt}"})
                response = await harness.post(payload, key=key, sign=sign)
                assert response.status_code in (202, 400, 409, 422, 503)
                if len(port.requests) > before and behaviour != "reject":
                    live[key] = live.get(key, 0) + 1
                assert live.get(key, 0) <= 1, f"key {key!r} ran twice"
                if response.status_code != 202:
                    continue
                status = _json(response)["status"]
                if status == "outcome_unknown":
                    assert key not in accepted, "an acceptance was claimed, then unknown"
                    unknown.add(key)
                else:
                    assert key not in unknown, "an unknown outcome became an acceptance"
                    assert accepted.setdefault(key, response.content) == response.content
        finally:
            await harness.http.aclose()
            await inner.close()
