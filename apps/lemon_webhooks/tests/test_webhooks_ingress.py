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

from lemon_core.execution import Receipt, RouterUnavailableError, RunRequest, VanishedRun
from lemon_core.idempotency import (
    IdempotencyRecord,
    IdempotencyStore,
    IdempotencyStoreError,
    MigrationReport,
    Reservation,
    SweepReport,
)
from lemon_infra import LEGACY_TABLE, SQLiteIdempotencyStore, create_legacy_table
from lemon_webhooks import Webhook, WebhookIngress, WebhookSecret

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

    async def mark_vanished(self, **kw: Any) -> int:
        return await self.inner.mark_vanished(**kw)

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

    async def use(self, app: WebhookIngress) -> None:
        """Send to ``app`` from now on (another configuration over the same store)."""
        await self.http.aclose()
        self.app = app
        self.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://webhooks.test"
        )

    async def records(self) -> list[IdempotencyRecord]:
        return await self.store.inner.records(integration="ci")


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


async def test_a_run_that_vanished_turns_its_accepted_key_outcome_unknown(
    hooks: Harness, sign: Any, body: Any
) -> None:
    first = await hooks.post(body(), sign=sign)
    run_id = _json(first)["run_id"]
    session = _json(first)["session_key"]
    other = await hooks.post(body("another"), key="key-2", sign=sign)
    # a run of another origin, or of another webhook, changes nothing
    await hooks.app.run_vanished(VanishedRun(run_id=run_id, session_key=session, origin="tui"))
    await hooks.app.run_vanished(
        VanishedRun(run_id=run_id, session_key=session, origin="webhook:deploy")
    )
    assert (await hooks.post(body(), sign=sign)).content == first.content
    # the engine completed it as vanished (a retry attempt names the run as submitted)
    vanished = VanishedRun(
        run_id="attempt-2", session_key=session, origin="webhook:ci", retry_of=run_id
    )
    await hooks.app.run_vanished(vanished)
    await hooks.app.run_vanished(vanished)  # idempotent
    replay = await hooks.post(body(), sign=sign)
    assert replay.status_code == 202
    assert _json(replay) == {"status": "outcome_unknown", "run_id": run_id, "retry_safe": False}
    assert replay.headers["idempotent-replayed"] == "true"
    assert (await hooks.post(body("another"), key="key-2", sign=sign)).content == other.content
    assert len(hooks.port.requests) == 2


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


async def test_the_body_may_choose_a_session_of_the_webhooks_own_namespace_only(
    hooks: Harness, sign: Any, body: Any
) -> None:
    own = "agent:default:webhook:ci:dm:alice"
    ok = await hooks.post(body(session_key=own), key="a", sign=sign)
    assert _json(ok)["session_key"] == own
    private = await hooks.post(body(session_key="agent:default:main"), key="a2", sign=sign)
    assert private.status_code == 403
    assert _json(private)["error"] == "session_key_not_allowed"
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
    from lemon_webhooks import WebhooksConfigError

    for text in ("plain", "whsec_!!!", "whsec_c2hvcnQ="):
        with pytest.raises(WebhooksConfigError, match=r"whsec_|base64|too short"):
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
    assert (await hooks.post(b"{}", path="/webhooksci", sign=sign)).status_code == 404
    get = await hooks.http.get("/webhooks/ci")
    assert (get.status_code, get.headers["allow"]) == (405, "POST")
    doc = await hooks.http.get("/webhooks/openapi.json")
    assert doc.status_code == 200
    assert "/webhooks/{webhook_id}" in _json(doc)["paths"]


# -- configuration ---------------------------------------------------------------------------


def test_webhook_config_refuses_a_duplicated_id(tmp_path: Path) -> None:
    from lemon_webhooks import WebhookEndpointConfig, WebhooksConfigError, resolve_webhooks

    entry = WebhookEndpointConfig(id="ci", secret_env="HOOK_SECRET")
    environ = {"HOOK_SECRET": SECRET.text()}
    with pytest.raises(WebhooksConfigError, match=r"endpoints: the id 'ci' is used twice"):
        resolve_webhooks((entry, entry), environ=environ, home=tmp_path)
    assert list(resolve_webhooks((entry,), environ=environ, home=tmp_path)) == ["ci"]


def test_secrets_resolve_from_the_environment_first_then_secrets_env(tmp_path: Path) -> None:
    from lemon_webhooks import WebhookEndpointConfig, WebhooksConfigError, resolve_webhooks

    config = (WebhookEndpointConfig(id="ci", secret_env="HOOK_SECRET"),)
    (tmp_path / "secrets.env").write_text(f"HOOK_SECRET={SECRET.text()}\n")
    [hook] = resolve_webhooks(config, environ={}, home=tmp_path).values()
    assert hook.secret == SECRET
    other = WebhookSecret(b"o" * 32)
    [hook] = resolve_webhooks(config, environ={"HOOK_SECRET": other.text()}, home=tmp_path).values()
    assert hook.secret == other
    with pytest.raises(WebhooksConfigError, match="HOOK_SECRET is not set"):
        resolve_webhooks(config, environ={}, home=tmp_path / "nowhere")
    with pytest.raises(WebhooksConfigError, match="whsec_"):
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


# -- adversarial cases -----------------------------------------------------------------------


@pytest.mark.parametrize("timestamp", ["9" * 25, "9" * 400, "9" * 5000, "0" * 400 + "1"])
async def test_an_overlong_timestamp_is_401_not_a_server_error(
    hooks: Harness, sign: Any, body: Any, timestamp: str
) -> None:
    payload = body()
    headers = sign(payload)
    headers["webhook-timestamp"] = timestamp
    response = await hooks.http.post("/webhooks/ci", content=payload, headers=headers)
    assert response.status_code == 401
    assert "webhook-timestamp" in _json(response)["message"]
    assert await hooks.records() == []


def _captured(hooks: Harness, sign: Any, payload: bytes, key: str) -> dict[str, str]:
    """The headers of one signed message, as an eavesdropper would copy them."""
    headers: dict[str, str] = sign(
        payload, key=key, timestamp=hooks.clock() // 1000, msg_id="msg_captured"
    )
    return headers


async def test_a_captured_message_resent_with_a_fresh_key_does_not_run_again(
    hooks: Harness, sign: Any, body: Any
) -> None:
    """The Idempotency-Key is not signed: within the timestamp tolerance an eavesdropper could
    resend a captured message under a key of their own. The webhook-id (signed) is bound to the
    first key, so the message runs once."""
    payload = body()
    captured = _captured(hooks, sign, payload, "key-1")
    first = await hooks.http.post("/webhooks/ci", content=payload, headers=captured)
    assert first.status_code == 202
    hooks.clock.now_ms += 60_000  # still inside the 5 min tolerance
    forged = {**captured, "idempotency-key": "attacker-key"}
    resent = await hooks.http.post("/webhooks/ci", content=payload, headers=forged)
    assert resent.status_code == 422
    assert _json(resent)["error"] == "webhook_id_reused"
    assert len(hooks.port.requests) == 1
    # the sender's own retry of the message (same key) still replays byte for byte
    retry = await hooks.http.post(
        "/webhooks/ci", content=payload, headers=_captured(hooks, sign, payload, "key-1")
    )
    assert (retry.status_code, retry.content) == (202, first.content)
    assert len(hooks.port.requests) == 1


async def test_one_webhook_id_under_two_keys_at_once_runs_once(
    hooks: Harness, sign: Any, body: Any
) -> None:
    payload = body()
    hooks.port.gate = asyncio.Event()
    first = asyncio.create_task(
        hooks.http.post(
            "/webhooks/ci", content=payload, headers=_captured(hooks, sign, payload, "key-1")
        )
    )
    await hooks.port.entered.wait()
    second = await hooks.http.post(
        "/webhooks/ci", content=payload, headers=_captured(hooks, sign, payload, "key-2")
    )
    hooks.port.gate.set()
    assert (await first).status_code == 202
    assert second.status_code == 422
    assert len(hooks.port.requests) == 1


async def test_the_same_key_and_message_id_on_two_webhooks_do_not_collide(
    tmp_path: Path, sign: Any, body: Any
) -> None:
    store = await SQLiteIdempotencyStore.open(tmp_path / "idempotency.sqlite3")
    port = ScriptedSubmitter()
    other = WebhookSecret(b"o" * 32)
    app = WebhookIngress(
        webhooks={
            "ci": Webhook(id="ci", secret=SECRET),
            "cd": Webhook(id="cd", secret=other),
        },
        store=store,
        submitter=port,
    )
    payload = body()
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://webhooks.test"
        ) as http:
            answers = [
                await http.post(
                    f"/webhooks/{hook}",
                    content=payload,
                    headers=sign(payload, key="shared", secret=secret, msg_id="msg_shared"),
                )
                for hook, secret in (("ci", SECRET), ("cd", other))
            ]
        assert [a.status_code for a in answers] == [202, 202]
        assert "idempotent-replayed" not in answers[1].headers
        assert len(port.requests) == 2
        assert {r.origin for r in port.requests} == {"webhook:ci", "webhook:cd"}
    finally:
        await store.close()


async def test_a_ttl_shorter_than_the_submission_never_lets_a_key_run_twice(
    hooks: Harness, sign: Any, body: Any
) -> None:
    """``idempotency_ttl_s`` may be as low as 1 s while a submission may take its timeout: the
    fence must outlive the submission, and the window in which a signed message is valid."""
    app = WebhookIngress(
        webhooks=hooks.app.webhooks,
        store=hooks.store,
        submitter=hooks.port,
        ttl_s=1.0,
        submit_timeout_s=0.5,
        clock_ms=hooks.clock,
    )
    await hooks.use(app)
    hooks.port.gate = asyncio.Event()
    first = asyncio.create_task(hooks.post(body(), sign=sign))
    await hooks.port.entered.wait()
    hooks.clock.now_ms += 2_000  # past the configured ttl, inside the submission
    second = await hooks.post(body(), sign=sign)
    assert second.status_code == 409
    hooks.port.gate.set()
    accepted = await first
    assert accepted.status_code == 202
    hooks.clock.now_ms += 200_000  # a message signed before still verifies: still a replay
    replay = await hooks.post(body(), sign=sign)
    assert (replay.status_code, replay.content) == (202, accepted.content)
    assert len(hooks.port.requests) == 1


class GatedReserve(FailingStore):
    """Reserves (durably), then holds the answer until the gate opens."""

    def __init__(self, inner: SQLiteIdempotencyStore) -> None:
        super().__init__(inner)
        self.reserved = asyncio.Event()
        self.gate = asyncio.Event()

    async def reserve(self, **kw: Any) -> Reservation:
        reservation = await self.inner.reserve(**kw)
        if kw["integration"] == "ci":
            self.reserved.set()
            await self.gate.wait()
        return reservation


async def test_a_request_cancelled_while_reserving_does_not_burn_the_key(
    hooks: Harness, sign: Any, body: Any
) -> None:
    """The client goes away (or the server stops) while the reservation is being written:
    nothing was submitted, so the key must not be left as a fence that answers 409 and then
    ``outcome_unknown`` for a run that never existed."""
    store = GatedReserve(hooks.store.inner)
    app = WebhookIngress(
        webhooks=hooks.app.webhooks, store=store, submitter=hooks.port, clock_ms=hooks.clock
    )
    await hooks.use(app)
    task = asyncio.create_task(hooks.post(body(), sign=sign))
    await store.reserved.wait()
    task.cancel()
    store.gate.set()  # the write itself finishes (it runs on the store's thread)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert hooks.port.requests == []
    assert await hooks.records() == []
    store.reserved = asyncio.Event()
    retry = await hooks.post(body(), sign=sign)
    assert _json(retry)["status"] == "accepted"
    assert len(hooks.port.requests) == 1


def _good_signature(sign: Any, payload: bytes) -> tuple[dict[str, str], str]:
    headers: dict[str, str] = sign(payload)
    return headers, headers["webhook-signature"].removeprefix("v1,")


@pytest.mark.parametrize(
    "variant",
    [
        "",
        " ",
        "v1,",
        "v1",
        "{mac}",
        ",{mac}",
        "v2,{mac}",
        "V1,{mac}",
        "v1a,{mac}",
        "v1,{mac_short}",
        "v1,{mac}=",
        "v1,{mac_lower}",
        "v1 ,{mac}",
        "v1,,{mac}",
        "v1,{mac}\u00e9",
        "v1,AAAA " * 200 + "v1,bad",
    ],
)
async def test_malformed_or_foreign_signatures_are_401(
    hooks: Harness, sign: Any, body: Any, variant: str
) -> None:
    payload = body()
    headers, mac = _good_signature(sign, payload)
    value = variant.format(mac=mac, mac_short=mac[:-4], mac_lower=mac.lower())
    raw = [(k, v) for k, v in headers.items() if k != "webhook-signature"]
    encoded = [(k.encode(), v.encode()) for k, v in raw]
    response = await hooks.http.post(
        "/webhooks/ci",
        content=payload,
        headers=[*encoded, (b"webhook-signature", value.encode("utf-8"))],
    )
    assert response.status_code == 401
    assert hooks.port.requests == []


async def test_signature_headers_in_any_case_verify_and_duplicates_are_refused(
    hooks: Harness, sign: Any, body: Any
) -> None:
    payload = body()
    headers = sign(payload)
    upper = [(k.upper(), v) for k, v in headers.items()]
    assert (
        await hooks.http.post("/webhooks/ci", content=payload, headers=upper)
    ).status_code == 202
    for name in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        again = sign(payload, key=f"dup-{name}")
        doubled = [*again.items(), (name.title(), again[name])]
        response = await hooks.http.post("/webhooks/ci", content=payload, headers=doubled)
        assert response.status_code == 401, name
    assert len(hooks.port.requests) == 1


@pytest.mark.parametrize(
    "timestamp", ["", "1e9", "-1", "+{now}", "{now}.0", " {now}", "\u0661{now}"]
)
async def test_a_timestamp_that_is_not_plain_seconds_is_401(
    hooks: Harness, sign: Any, body: Any, timestamp: str
) -> None:
    payload = body()
    headers = sign(payload)
    headers.pop("webhook-timestamp")
    value = timestamp.format(now=hooks.clock() // 1000)
    response = await hooks.http.post(
        "/webhooks/ci",
        content=payload,
        headers=[*headers.items(), ("webhook-timestamp", value.encode("utf-8"))],
    )
    assert response.status_code == 401


@pytest.mark.parametrize(
    "payload",
    [
        b"\xef\xbb\xbf" + b'{"prompt": "with a BOM"}',
        b'{"prompt": "\xff\xfe not utf-8"}',
        b'{"prompt": 12345678901234567890123456789}',
        b'{"prompt": ["a"]}',
        b'{"prompt": null}',
        b'{"prompt": "x", "extra": ' + b"[" * 2000 + b"]" * 2000 + b"}",
        b'{"prompt": ' + b"[" * 1900 + b"]" * 1900 + b"}",
        b'{"prompt": "x", "queue_mode": "' + b"z" * 100 + b'"}',
        b'{"prompt": "x", "session_key": 1}',
        b'{"prompt": "\\ud800"}',
    ],
)
async def test_json_edge_cases_are_400_and_reserve_nothing(
    hooks: Harness, sign: Any, payload: bytes
) -> None:
    response = await hooks.post(payload, sign=sign)
    assert response.status_code == 400, response.content
    assert _json(response)["error"] == "invalid_body"
    assert await hooks.records() == []
    assert hooks.port.requests == []


async def test_duplicate_json_keys_are_one_request_bound_to_the_exact_bytes(
    hooks: Harness, sign: Any
) -> None:
    """Whichever duplicate the parser keeps, the fence fingerprints the signed bytes: a body
    that differs only in the order of the duplicates is another body (422), never a replay."""
    first = b'{"prompt": "a", "prompt": "b"}'
    second = b'{"prompt": "b", "prompt": "a"}'
    assert (await hooks.post(first, sign=sign)).status_code == 202
    assert (await hooks.post(second, sign=sign)).status_code == 422
    assert len(hooks.port.requests) == 1


@pytest.mark.parametrize(
    "key", ["a\x00b", "a\tb", "a\u200bb", "a\u2028b", "k" * 256, "\u00a0", "a\x7fb"]
)
async def test_keys_with_control_or_invisible_characters_or_overlong_are_400(
    hooks: Harness, sign: Any, body: Any, key: str
) -> None:
    payload = body()
    headers = [(k, v) for k, v in sign(payload, key=None).items()]
    response = await hooks.http.post(
        "/webhooks/ci", content=payload, headers=[*headers, ("idempotency-key", key.encode())]
    )
    assert response.status_code == 400
    assert await hooks.records() == []


async def test_keys_are_exact_text_no_normalisation_makes_two_keys_one(
    hooks: Harness, sign: Any, body: Any
) -> None:
    """Keys are opaque: the NFC and NFD spellings of one word, or a key with a space at its
    end, are other keys (byte-exact, as the caller sent them); none collides with another."""
    payload = body()
    keys = ["caf\u00e9", "cafe\u0301", "key", "key ", "KEY", "k" * 255]
    for key in keys:
        headers = [(k, v) for k, v in sign(payload, key=None).items()]
        response = await hooks.http.post(
            "/webhooks/ci", content=payload, headers=[*headers, ("idempotency-key", key.encode())]
        )
        assert (response.status_code, _json(response)["status"]) == (202, "accepted"), key
    assert len(hooks.port.requests) == len(keys)
    assert len({r.key_hash for r in await hooks.records()}) == len(keys)


async def test_a_slow_body_holds_no_reservation_and_a_disconnect_mid_body_stores_nothing(
    hooks: Harness, sign: Any, body: Any
) -> None:
    payload = body()
    headers = sign(payload)
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/webhooks/ci",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
    }
    half = asyncio.Event()
    sent: list[Any] = []
    parts = [
        {"type": "http.request", "body": payload[:10], "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> dict[str, Any]:
        if len(parts) == 1:
            half.set()
            await release.wait()
        return parts.pop(0)

    async def send(message: Any) -> None:
        sent.append(message)

    release = asyncio.Event()
    slow = asyncio.create_task(hooks.app(scope, receive, send))
    await half.wait()  # the slow client has sent a tenth of its body
    assert await hooks.records() == []
    same_key = await hooks.post(body(), sign=sign)  # the key is free meanwhile
    assert same_key.status_code == 202
    release.set()
    await slow
    assert sent[0]["status"] == 401  # the partial body does not verify
    assert len(hooks.port.requests) == 1


async def test_neither_the_raw_key_nor_the_secret_reaches_a_log_record(
    hooks: Harness, sign: Any, body: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    raw_key = "caller-raw-key-9f8e7d"
    for behaviour in ("raise", "reject", "other_id", "accept"):
        hooks.port.behaviour = behaviour
        await hooks.post(body(behaviour), key=f"{raw_key}-{behaviour}", sign=sign)
    for step in ("lookup", "reserve", "complete", "mark_unknown", "release"):
        hooks.store.failing = {step}
        hooks.port.behaviour = "reject" if step == "release" else "raise"
        await hooks.post(body(step), key=f"{raw_key}-{step}", sign=sign)
    text = "\n".join(f"{r.getMessage()} {r.args!r} {r.exc_text}" for r in caplog.records)
    assert caplog.records  # the failures above were logged
    assert raw_key not in text
    assert SECRET.text() not in text
    assert SECRET.text()[6:] not in text


async def test_the_public_openapi_document_names_no_configured_webhook(
    tmp_path: Path, body: Any
) -> None:
    """``GET /webhooks/openapi.json`` needs no signature: it must not list the integrations."""
    store = await SQLiteIdempotencyStore.open(tmp_path / "idempotency.sqlite3")
    app = WebhookIngress(
        webhooks={"payroll-prod-7": Webhook(id="payroll-prod-7", secret=SECRET)},
        store=store,
        submitter=ScriptedSubmitter(),
    )
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://webhooks.test"
        ) as http:
            doc = await http.get("/webhooks/openapi.json")
        assert doc.status_code == 200
        assert b"payroll-prod-7" not in doc.content
        assert "/webhooks/{webhook_id}" in _json(doc)["paths"]
    finally:
        await store.close()


async def test_a_body_that_never_finishes_is_408_and_frees_the_connection(
    hooks: Harness, sign: Any, body: Any
) -> None:
    """Nothing is authenticated before the whole body is in: a client trickling (or never
    finishing) its body must not hold the handler, and its buffer, forever."""
    app = WebhookIngress(
        webhooks=hooks.app.webhooks,
        store=hooks.store,
        submitter=hooks.port,
        clock_ms=hooks.clock,
        body_timeout_s=0.01,
    )
    payload = body()
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/webhooks/ci",
        "headers": [(k.encode(), v.encode()) for k, v in sign(payload).items()],
    }
    first = True
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": payload[:5], "more_body": True}
        await asyncio.Event().wait()  # the rest never comes
        raise AssertionError("unreachable")

    async def send(message: Any) -> None:
        sent.append(message)

    await app(scope, receive, send)
    assert sent[0]["status"] == 408
    assert _json(httpx.Response(200, content=sent[1]["body"]))["error"] == "body_timeout"
    assert await hooks.records() == []


async def test_a_key_that_answered_unknown_never_answers_accepted_later(
    hooks: Harness, sign: Any, body: Any
) -> None:
    """The first submission outlives its lease (a slow router, a store lock): a replay meanwhile
    is told ``outcome_unknown``. When the submission then succeeds, the key must keep that
    answer (for the first caller too), never switch to an acceptance for later replays."""
    hooks.port.gate = asyncio.Event()
    first = asyncio.create_task(hooks.post(body(), sign=sign))
    await hooks.port.entered.wait()
    hooks.clock.now_ms += hooks.app.lease_ms
    during = await hooks.post(body(), sign=sign)
    assert (during.status_code, _json(during)["status"]) == (202, "outcome_unknown")
    hooks.port.gate.set()
    late = await first
    after = await hooks.post(body(), sign=sign)
    assert _json(late)["status"] == "outcome_unknown"
    assert after.content == during.content
    assert len(hooks.port.requests) == 1
    [record] = await hooks.records()
    assert (record.state, record.response) == ("outcome_unknown", None)


class HeldLookup(FailingStore):
    """Answers a lookup, then holds it (the replay is in flight) until the gate opens."""

    def __init__(self, inner: SQLiteIdempotencyStore) -> None:
        super().__init__(inner)
        self.looked = asyncio.Event()
        self.gate = asyncio.Event()

    async def lookup(self, key_hash: str, *, now_ms: int) -> IdempotencyRecord | None:
        record = await self.inner.lookup(key_hash, now_ms=now_ms)
        self.looked.set()
        await self.gate.wait()
        return record


async def test_a_sweep_during_a_replay_in_flight_neither_breaks_it_nor_replays_an_expired_key(
    hooks: Harness, sign: Any, body: Any
) -> None:
    accepted = await hooks.post(body(), sign=sign)
    store = HeldLookup(hooks.store.inner)
    app = WebhookIngress(
        webhooks=hooks.app.webhooks, store=store, submitter=hooks.port, clock_ms=hooks.clock
    )
    await hooks.use(app)
    hooks.clock.now_ms += app.ttl_ms - 1  # the last millisecond of the fence
    replay = asyncio.create_task(hooks.post(body(), sign=sign))
    await store.looked.wait()
    report = await store.sweep(now_ms=hooks.clock.now_ms + 1)  # the sweep runs meanwhile
    assert report.responses_removed == 1  # the key's fence and snapshot are gone
    store.gate.set()
    answered = await replay
    assert (answered.status_code, answered.content) == (202, accepted.content)
    assert answered.headers["idempotent-replayed"] == "true"
    # once swept (expired), the key is new: it runs again with a new run id, never a replay
    hooks.clock.now_ms += 1
    store.looked, store.gate = asyncio.Event(), asyncio.Event()
    store.gate.set()
    again = await hooks.post(body(), sign=sign)
    assert "idempotent-replayed" not in again.headers
    assert _json(again)["run_id"] != _json(accepted)["run_id"]
    assert len(hooks.port.requests) == 2


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("webhook-id", "msg_\u00e9".encode(), "ASCII"),
        ("webhook-signature", b"v1,\xff", "ASCII"),
        ("webhook-id", None, "once"),
        ("webhook-timestamp", None, "once"),
    ],
)
async def test_a_duplicated_or_non_ascii_signature_header_is_401_saying_so(
    hooks: Harness, sign: Any, body: Any, name: str, value: bytes | None, says: str
) -> None:
    payload = body()
    headers = [(k.encode(), v.encode()) for k, v in sign(payload).items()]
    if value is None:  # sent twice
        headers.append(next(h for h in headers if h[0] == name.encode()))
    else:
        headers = [(k, value if k == name.encode() else v) for k, v in headers]
    response = await hooks.http.post("/webhooks/ci", content=payload, headers=headers)
    assert response.status_code == 401
    message = _json(response)["message"]
    assert name in message
    assert says in message


async def test_a_request_cancelled_mid_submission_is_outcome_unknown_never_released(
    hooks: Harness, sign: Any, body: Any
) -> None:
    """Cancelled while the router has the request (it may have queued it): the key is burned
    as ``outcome_unknown`` with the fixed run id, never released for a second execution."""
    hooks.port.gate = asyncio.Event()
    task = asyncio.create_task(hooks.post(body(), sign=sign))
    await hooks.port.entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [request] = hooks.port.requests
    [record] = await hooks.records()
    assert (record.state, record.run_id) == ("outcome_unknown", request.run_id)
    hooks.port.gate.set()
    replay = await hooks.post(body(), sign=sign)
    assert _json(replay) == {
        "status": "outcome_unknown",
        "run_id": request.run_id,
        "retry_safe": False,
    }
    assert len(hooks.port.requests) == 1
