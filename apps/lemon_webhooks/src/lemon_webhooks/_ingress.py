"""Webhook ingress: ``POST /webhooks/<id>``, exactly once, or honestly "unknown".

A plain ASGI application (no framework: it is one route) lemon_webhooks mounts on the daemon's
HTTP server (``lemon_core.mounts.HTTP_MOUNTS``) when ``[webhooks] enabled`` is set. A client of
the session port (``SESSION_PORT``) like any other: it imports nothing of the gateway.

Order of one request, and what each step guarantees:

1. The webhook id must be configured (404), the body at most ``max_body_bytes`` (413) and
   complete within ``body_timeout_s`` (408).
2. The Standard Webhooks signature is verified (constant time, 5 min tolerance) before
   anything of the request is parsed, looked up or stored (401).
3. ``Idempotency-Key``: missing, blank or not text is a 400, before it is hashed. The body must
   be ``{"prompt": ...}`` (400). Its ``session_key`` may only name a key under the webhook's
   own namespace (``agent:<agent>:webhook:<id>:...``) or one its config names (403, nothing
   reserved). The key is hashed with the webhook id; only the hash is used.
4. A live fence for the hash answers from the store: a different body is a 422; an accepted
   one replays its stored response byte for byte (``Idempotent-Replayed: true``); one still
   being submitted is a 409; one whose outcome is unknown (or whose exact response is missing)
   gets the bounded uncertain receipt ``{"status":"outcome_unknown","run_id":...,
   "retry_safe":false}`` (202), never a generic success.
5. No router: 503, nothing reserved. Else a ``pending`` fence with a fixed run id is reserved
   atomically (a lost race answers as in 4), together with the binding of the signed
   ``webhook-id`` to this key (the key is not signed: the same message under another key is a
   422, so a copy resent by someone who saw it cannot run again), and the request goes to the
   session port with that run id. Cancelled while reserving (the client gone, the server
   stopping): the fence is released once written, nothing was submitted. Accepted (within
   the fence's lease): the fence becomes ``accepted`` with its exact response, together, and
   the client gets that response (202). A definite refusal (the router is full or stopped, or
   rejects the request) releases the fence and the binding: 503 / 400, the key is not burned.
   Anything else (an exception, a timeout, a failure to store the receipt, an acceptance
   after the lease) is ``outcome_unknown``.
6. Any store failure before submission is a 503 with nothing executed and the key not burned.

``faults`` is a test seam (an :class:`IngressFaults` object a test fixture passes; production
passes none): its ``after_reserve(run_id)`` is awaited right after a reservation is written and
before anything is submitted, so a test can stop (or kill) the process at exactly that point.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, runtime_checkable

import msgspec

from lemon_core.execution import (
    ALL_TOOLS,
    ROUTER_BRIDGE,
    CapabilityRegistry,
    Receipt,
    RouterUnavailableError,
    RunRequest,
    ToolPolicy,
    VanishedRun,
)
from lemon_core.idempotency import (
    IdempotencyRecord,
    IdempotencyStore,
    IdempotencyStoreError,
    InvalidIdempotencyKeyError,
    MessageBinding,
    Reservation,
    StoredResponse,
    body_fingerprint,
    check_idempotency_key,
    hash_idempotency_key,
)
from lemon_core.sessions import SESSION_PORT, InvalidSessionKeyError, check_session_key
from lemon_core.store import system_clock_ms
from lemon_webhooks._openapi import webhook_openapi
from lemon_webhooks._section import WebhookEndpointConfig
from lemon_webhooks._signature import TOLERANCE_S, WebhookSecret, verify_webhook

__all__ = [
    "REPLAY_WINDOW_MS",
    "WEBHOOK_ID_GUARD_SUFFIX",
    "IngressFaults",
    "SessionPortSubmitter",
    "Submitter",
    "Webhook",
    "WebhookIngress",
]

log = logging.getLogger("lemon_webhooks.ingress")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

QueueModeName = Literal["collect", "followup", "steer", "steer_backlog", "redirect", "interrupt"]

_JSON: Final = b"application/json"
_ORIGIN_PREFIX: Final = "webhook:"  # RunRequest.origin of a webhook's run: webhook:<id>
#: How long a signed message can verify: its timestamp may be up to the tolerance either side
#: of now, so a message first seen now may still verify for twice the tolerance (plus a
#: margin for clock steps). Fences live at least this long, and a ``webhook-id`` is bound to
#: the Idempotency-Key it first came with for this long.
REPLAY_WINDOW_MS: Final = (2 * TOLERANCE_S + 60) * 1000
#: The integration name of the fences binding a ``webhook-id`` to its key (``#`` cannot occur
#: in a webhook id, so these never share a name with a webhook's own fences).
WEBHOOK_ID_GUARD_SUFFIX: Final = "#webhook-id"
_GUARD_DOMAIN: Final = b"lemon.webhook-id.v1"
_encoder: Final = msgspec.json.Encoder()


class _Body(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    prompt: str
    session_key: str | None = None
    queue_mode: QueueModeName | None = None


_decoder: Final = msgspec.json.Decoder(_Body)


@dataclass(frozen=True, kw_only=True, slots=True)
class Webhook:
    """One configured integration with its secret resolved."""

    id: str
    secret: WebhookSecret
    agent_id: str = "default"
    session_key: str | None = None
    allowed_session_keys: frozenset[str] = frozenset()
    queue_mode: QueueModeName = "collect"
    tool_policy: ToolPolicy | None = None

    @classmethod
    def from_config(cls, config: WebhookEndpointConfig, secret: WebhookSecret) -> Webhook:
        policy = None
        if config.tool_policy is not None:
            p = config.tool_policy
            policy = ToolPolicy(
                allow=frozenset(p.allow) or None,
                deny=frozenset(p.deny),
                require_approval=frozenset(p.require_approval),
            )
        return cls(
            id=config.id,
            secret=secret,
            agent_id=config.agent_id,
            session_key=config.session_key,
            allowed_session_keys=frozenset(config.allowed_session_keys),
            queue_mode=config.queue_mode,
            tool_policy=policy,
        )

    @property
    def default_session_key(self) -> str:
        """The configured session key, else ``agent:<agent>:webhook:<id>:channel:<id>``."""
        return self.session_key or f"agent:{self.agent_id}:webhook:{self.id}:channel:{self.id}"

    @property
    def namespace(self) -> str:
        """The prefix of the keys this webhook owns: ``agent:<agent>:webhook:<id>:``."""
        return f"agent:{self.agent_id}:webhook:{self.id}:"

    def may_address(self, session_key: str) -> bool:
        """Whether a request of this webhook may add a prompt to ``session_key``: a key under
        its own namespace, its configured ``session_key`` or one of ``allowed_session_keys``.
        A webhook secret is a credential for one integration, not for the person's other
        sessions (their interactive ones run with their own history and tools)."""
        return (
            session_key.startswith(self.namespace)
            or session_key == self.session_key
            or session_key in self.allowed_session_keys
        )


@runtime_checkable
class IngressFaults(Protocol):
    """Test-only fault points, passed by a test fixture (never armed in production)."""

    async def after_reserve(self, run_id: str) -> None:
        """Awaited once a request's fence is reserved, before it is submitted."""
        ...


@runtime_checkable
class Submitter(Protocol):
    """Where the ingress submits: the session port (a test gives its own)."""

    def unavailable_reason(self) -> str | None:
        """``None`` when submissions can be taken now; else why not (nothing is reserved)."""
        ...

    async def submit(self, request: RunRequest) -> Receipt: ...


class SessionPortSubmitter:
    """Submits through the runtime's ``SESSION_PORT``; available while the router bridge runs."""

    def __init__(self, capabilities: CapabilityRegistry) -> None:
        self._capabilities = capabilities

    def unavailable_reason(self) -> str | None:
        if self._capabilities.get(SESSION_PORT) is None:
            return "no session port is registered (the router is not running)"
        bridge = self._capabilities.get(ROUTER_BRIDGE)
        if bridge is None or not bridge.running():
            return "the router is not running"
        return None

    async def submit(self, request: RunRequest) -> Receipt:
        port = self._capabilities.get(SESSION_PORT)
        if port is None:
            raise RouterUnavailableError("no session port is registered")
        return await port.submit(request)


@dataclass(slots=True)
class _Answer:
    status: int
    body: bytes
    headers: tuple[tuple[bytes, bytes], ...] = ()


def _error(status: int, code: str, message: str, **extra: Any) -> _Answer:
    body = _encoder.encode({"error": code, "message": message, **extra})
    headers: tuple[tuple[bytes, bytes], ...] = ()
    if status == 503:
        headers = ((b"retry-after", b"5"),)
    elif status == 409:
        headers = ((b"retry-after", b"1"),)
    return _Answer(status, body, headers)


def _receipt(run_id: str) -> bytes:
    return _encoder.encode({"status": "outcome_unknown", "run_id": run_id, "retry_safe": False})


_REPLAYED: Final = ((b"idempotent-replayed", b"true"),)


class WebhookIngress:
    """The ASGI application serving ``<prefix>/<id>`` (and ``<prefix>/openapi.json``)."""

    def __init__(
        self,
        *,
        webhooks: Mapping[str, Webhook],
        store: IdempotencyStore,
        submitter: Submitter,
        ttl_s: float = 86_400.0,
        max_body_bytes: int = 262_144,
        submit_timeout_s: float = 10.0,
        body_timeout_s: float = 30.0,
        clock_ms: Callable[[], int] = system_clock_ms,
        prefix: str = "/webhooks",
        faults: IngressFaults | None = None,
        degraded: Mapping[str, str] | None = None,
    ) -> None:
        self.webhooks = dict(webhooks)
        # configured endpoints not served (their path is a 404), by id: why (said at start)
        self.degraded = dict(degraded or {})
        self.store = store
        self.submitter = submitter
        self.max_body_bytes = max_body_bytes
        self.submit_timeout_s = submit_timeout_s
        # The whole body must be in before it can be verified: a client that trickles it (or
        # never finishes) is cut off after this long instead of holding the handler forever.
        self.body_timeout_s = body_timeout_s
        # A pending fence is "in flight" for the submission bound plus a margin; past it the
        # submission is over (by timeout or by a crash) and its outcome is unknown.
        self.lease_ms = int((submit_timeout_s + 5.0) * 1000)
        # A fence must outlive its own submission (else a second request with the key would
        # find it expired and run again) and the window in which its signed message verifies
        # (else a resent copy of the message would run again): a shorter ttl is raised.
        self.ttl_ms = max(int(ttl_s * 1000), self.lease_ms, REPLAY_WINDOW_MS)
        self.clock_ms = clock_ms
        self.prefix = prefix
        self.faults = faults
        # the public document names no configured webhook (see webhook_openapi)
        self._openapi = _encoder.encode(webhook_openapi(prefix=prefix))
        self._counts: dict[str, int] = {}

    def statistics(self) -> dict[str, Any]:
        """Answers given so far, by outcome."""
        return {
            "webhooks": sorted(self.webhooks),
            "degraded": dict(self.degraded),
            "answers": dict(self._counts),
        }

    async def run_vanished(self, run: VanishedRun) -> None:
        """The runtime's ``VANISHED_RUN_LISTENER``: a webhook's run whose process died
        mid-run was completed as ``vanished``; its key's fence becomes ``outcome_unknown``, so
        a replay stops answering ``202 accepted`` for a run that never finished. Idempotent; a
        store failure raises (the engine retries the run's completion later)."""
        origin = run.origin or ""
        if not origin.startswith(_ORIGIN_PREFIX):
            return
        integration = origin[len(_ORIGIN_PREFIX) :]
        changed = await self.store.mark_vanished(
            run_id=run.retry_of or run.run_id, integration=integration, now_ms=self.clock_ms()
        )
        if changed:
            log.warning(
                "webhook %s: run %s vanished; its key now answers outcome_unknown",
                integration,
                run.run_id,
            )

    # -- ASGI --------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            return
        if scope["type"] != "http":
            return
        answer = await self._handle(scope, receive)
        self._counts[str(answer.status)] = self._counts.get(str(answer.status), 0) + 1
        headers = [
            (b"content-type", _JSON),
            (b"content-length", str(len(answer.body)).encode()),
            (b"cache-control", b"no-store"),
            *answer.headers,
        ]
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": answer.body})

    async def _handle(self, scope: Scope, receive: Receive) -> _Answer:
        path: str = scope["path"]
        inside = path == self.prefix or path.startswith(self.prefix + "/")
        rest = path[len(self.prefix) :].strip("/") if inside else None
        if rest == "openapi.json" and scope["method"] in ("GET", "HEAD"):
            return _Answer(200, self._openapi)
        webhook = self.webhooks.get(rest or "") if rest and "/" not in rest else None
        if webhook is None:
            return _error(404, "not_found", "no webhook is configured at this path")
        if scope["method"] != "POST":
            answer = _error(405, "method_not_allowed", "webhooks accept POST only")
            answer.headers = ((b"allow", b"POST"),)
            return answer
        headers = _headers(scope)
        try:
            async with asyncio.timeout(self.body_timeout_s):
                body = await self._body(headers, receive)
        except TimeoutError:
            return _error(
                408,
                "body_timeout",
                f"the body did not arrive within {self.body_timeout_s:g} s; send it at once",
            )
        if body is None:
            return _error(
                413, "body_too_large", f"the body is larger than {self.max_body_bytes} bytes"
            )
        # 1. authenticity first: nothing is parsed, looked up or stored before this
        for name in (b"webhook-id", b"webhook-timestamp", b"webhook-signature"):
            value = headers.get(name)
            if value is _DUPLICATE:
                return _error(401, "invalid_signature", f"send the {name.decode()} header once")
            if value is not None and not value.isascii():
                return _error(401, "invalid_signature", f"the {name.decode()} header must be ASCII")
        refused = verify_webhook(
            webhook.secret,
            msg_id=_text(headers.get(b"webhook-id")),
            timestamp=_text(headers.get(b"webhook-timestamp")),
            signature=_text(headers.get(b"webhook-signature")),
            body=body,
            now_s=self.clock_ms() / 1000,
        )
        if refused is not None:
            return _error(401, "invalid_signature", refused)
        # 2. the key, checked before it is hashed
        raw_key = headers.get(b"idempotency-key")
        if raw_key is None:
            return _error(400, "missing_idempotency_key", "the Idempotency-Key header is required")
        if raw_key is _DUPLICATE:
            return _error(400, "invalid_idempotency_key", "send one Idempotency-Key header")
        try:
            key = check_idempotency_key(raw_key.decode("utf-8"))
        except UnicodeDecodeError:
            return _error(400, "invalid_idempotency_key", "the Idempotency-Key is not UTF-8 text")
        except InvalidIdempotencyKeyError as exc:
            return _error(400, "invalid_idempotency_key", str(exc))
        # 3. the request itself
        run_id = f"run_{uuid.uuid4()}"  # fixed here, stored with the fence, sent to the router
        request = self._request(webhook, body, run_id)
        if isinstance(request, _Answer):
            return request
        key_hash = hash_idempotency_key(webhook.id, key)
        body_hash = body_fingerprint(body)
        now = self.clock_ms()
        try:
            existing = await self.store.lookup(key_hash, now_ms=now)
        except IdempotencyStoreError as exc:
            log.warning("webhook %s: idempotency lookup failed: %s", webhook.id, exc)
            return _error(503, "store_unavailable", "the idempotency store is unavailable")
        if existing is not None:
            return self._existing(existing, body_hash, now)
        reason = self.submitter.unavailable_reason()
        if reason is not None:
            return _error(503, "router_unavailable", reason)
        # The Idempotency-Key is not signed: the (signed) webhook-id is bound to the first key
        # it came with, in the reservation's transaction, so a copy of a message resent under
        # another key cannot run again.
        msg_id = _text(headers.get(b"webhook-id")) or ""
        binding = MessageBinding(
            key_hash=_guard_hash(webhook.id, msg_id),
            integration=webhook.id + WEBHOOK_ID_GUARD_SUFFIX,
            ttl_ms=REPLAY_WINDOW_MS,
        )
        try:
            reservation = await self._reserve(
                key_hash=key_hash,
                integration=webhook.id,
                body_hash=body_hash,
                run_id=run_id,
                session_key=request.session_key,
                now_ms=now,
                ttl_ms=self.ttl_ms,
                lease_ms=self.lease_ms,
                legacy_key=key,
                bind=binding,
            )
        except IdempotencyStoreError as exc:
            log.warning("webhook %s: reservation failed: %s", webhook.id, exc)
            return _error(503, "store_unavailable", "the idempotency store is unavailable")
        if reservation.message_reused:
            return _error(
                422,
                "webhook_id_reused",
                "this webhook-id was already delivered with another Idempotency-Key; resend "
                "a message with its original key, or send a new message",
            )
        own_guard = binding.key_hash if reservation.bound else None
        if not reservation.created:
            return self._existing(reservation.record, body_hash, self.clock_ms())
        if self.faults is not None:
            await self.faults.after_reserve(run_id)
        return await self._submit(webhook, key_hash, run_id, request, own_guard)

    async def _reserve(self, *, bind: MessageBinding, **reservation: Any) -> Reservation:
        """``store.reserve``; if the request is cancelled meanwhile (the client went away, the
        server is stopping) the write still finishes on the store's side, and since nothing
        was submitted, the fence (and binding) it made is released: the key is not burned."""
        task = asyncio.ensure_future(self.store.reserve(bind=bind, **reservation))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            await asyncio.shield(self._abandon(task, reservation["run_id"], bind.key_hash))
            raise

    async def _abandon(self, task: asyncio.Future[Reservation], run_id: str, guard: str) -> None:
        try:
            reservation = await task
        except IdempotencyStoreError:
            return
        if reservation.created:
            with contextlib.suppress(IdempotencyStoreError):
                await self.store.release(key_hash=reservation.record.key_hash, run_id=run_id)
        if reservation.bound:
            await self._release_guard(guard, run_id)

    async def _release_guard(self, guard: str | None, run_id: str) -> None:
        """Unbind a webhook-id this request bound, when nothing of it ran (best effort: a
        binding left in place only refuses the message under another key)."""
        if guard is not None:
            with contextlib.suppress(IdempotencyStoreError):
                await self.store.release(key_hash=guard, run_id=run_id)

    async def _submit(
        self,
        webhook: Webhook,
        key_hash: str,
        run_id: str,
        request: RunRequest,
        guard: str | None = None,
    ) -> _Answer:
        try:
            receipt = await asyncio.wait_for(self.submitter.submit(request), self.submit_timeout_s)
        except RouterUnavailableError as exc:
            return await self._release(
                key_hash, run_id, _error(503, "router_unavailable", str(exc)), guard
            )
        except ValueError as exc:
            answer = _error(400, "rejected", f"the router refused the request: {exc}")
            return await self._release(key_hash, run_id, answer, guard)
        except asyncio.CancelledError:
            await self._unknown(key_hash, run_id)
            raise
        except Exception as exc:  # any other failure after the reservation: it may have run
            log.warning("webhook %s: submission of %s failed: %r", webhook.id, run_id, exc)
            return await self._unknown(key_hash, run_id)
        if receipt.status == "rejected":
            answer = _error(503, "router_busy", receipt.reason or "the router refused the run")
            return await self._release(key_hash, run_id, answer, guard)
        if receipt.run_id != run_id:  # the seam fixes the run id; anything else is unknown
            log.error(
                "webhook %s: the router changed run id %s to %s", webhook.id, run_id, receipt.run_id
            )
            return await self._unknown(key_hash, run_id)
        body = _encoder.encode(
            {"status": "accepted", "run_id": run_id, "session_key": receipt.session_key}
        )
        try:
            stored = await self.store.complete(
                key_hash=key_hash,
                run_id=run_id,
                response=StoredResponse(status=202, body=body),
                now_ms=self.clock_ms(),
            )
        except IdempotencyStoreError as exc:
            log.warning("webhook %s: storing the receipt of %s failed: %s", webhook.id, run_id, exc)
            stored = False
        if not stored:  # accepted, but its exact response is not durable: claim nothing
            return await self._unknown(key_hash, run_id)
        return _Answer(202, body)

    async def _release(
        self, key_hash: str, run_id: str, answer: _Answer, guard: str | None = None
    ) -> _Answer:
        try:
            released = await self.store.release(key_hash=key_hash, run_id=run_id)
        except IdempotencyStoreError as exc:
            # the fence stays pending, then reads as outcome_unknown: safe, only less helpful
            log.warning("webhook: releasing %s failed: %s", run_id, exc)
            released = False
        if released:  # nothing ran: the message may come again, under any key
            await self._release_guard(guard, run_id)
        return answer

    async def _unknown(self, key_hash: str, run_id: str) -> _Answer:
        with contextlib.suppress(IdempotencyStoreError):
            # a failure here leaves the fence pending; its lease then makes it unknown
            await asyncio.shield(
                self.store.mark_unknown(key_hash=key_hash, run_id=run_id, now_ms=self.clock_ms())
            )
        return _Answer(202, _receipt(run_id))

    def _existing(self, record: IdempotencyRecord, body_hash: str, now_ms: int) -> _Answer:
        if record.body_hash is not None and record.body_hash != body_hash:
            return _error(
                422,
                "idempotency_key_reused",
                "this Idempotency-Key was already used with a different body; use a new key",
            )
        if record.run_id is None:  # a legacy reservation without a run id: ambiguous
            return _error(
                409,
                "ambiguous_reservation",
                "this Idempotency-Key has an earlier reservation whose outcome is not known; "
                "it cannot be retried safely",
                retry_safe=False,
            )
        if record.state == "accepted" and record.response is not None:
            return _Answer(record.response.status, record.response.body, _REPLAYED)
        if record.in_flight(now_ms):
            return _error(
                409,
                "request_in_progress",
                "the first request with this key is still being submitted",
            )
        # outcome_unknown, an abandoned pending fence, or an accepted one without its response
        return _Answer(202, _receipt(record.run_id), _REPLAYED)

    def _request(self, webhook: Webhook, body: bytes, run_id: str) -> RunRequest | _Answer:
        try:
            parsed = _decoder.decode(body)
        except msgspec.ValidationError as exc:
            return _error(400, "invalid_body", f"the body is not a valid webhook request: {exc}")
        except msgspec.DecodeError:
            return _error(400, "invalid_body", 'the body must be JSON such as {"prompt": "..."}')
        if not parsed.prompt.strip():
            return _error(400, "invalid_body", "the prompt is blank")
        session_key = parsed.session_key or webhook.default_session_key
        try:
            key = check_session_key(session_key)
        except InvalidSessionKeyError as exc:
            return _error(400, "invalid_session_key", str(exc))
        if key is not None and key.agent_id != webhook.agent_id:
            return _error(
                400,
                "invalid_session_key",
                f"the session key belongs to agent {key.agent_id!r}, this webhook runs "
                f"agent {webhook.agent_id!r}",
            )
        if not webhook.may_address(session_key):
            # Refused before anything is reserved, as a bad body is: the key is not burned.
            return _error(
                403,
                "session_key_not_allowed",
                f"webhook {webhook.id!r} may not add prompts to session {session_key!r}: it "
                f"may address keys under {webhook.namespace!r} and the keys its "
                "[[webhooks.endpoints]] entry names (session_key, allowed_session_keys)",
            )
        return RunRequest(
            origin=f"{_ORIGIN_PREFIX}{webhook.id}",
            session_key=session_key,
            prompt=parsed.prompt,
            agent_id=webhook.agent_id,
            queue_mode=parsed.queue_mode or webhook.queue_mode,
            tool_policy=webhook.tool_policy,
            # The owner's config names this webhook's policy (as a profile's): the tools it
            # does not ask about run without a question; the agent's denies still hold.
            preapproved=frozenset() if webhook.tool_policy is None else frozenset({ALL_TOOLS}),
            run_id=run_id,  # the origin names the webhook: no free meta keys
        )

    async def _body(self, headers: Mapping[bytes, bytes], receive: Receive) -> bytes | None:
        declared = headers.get(b"content-length")
        if declared is not None and declared is not _DUPLICATE:
            with contextlib.suppress(ValueError):
                if int(declared) > self.max_body_bytes:
                    return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk: bytes = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


_DUPLICATE: Final = b"\x00duplicate"


def _guard_hash(webhook_id: str, msg_id: str) -> str:
    """The durable key binding a ``webhook-id`` of ``webhook_id`` (SHA-256, length-prefixed
    parts under their own domain tag: never equal to an Idempotency-Key's hash)."""
    digest = hashlib.sha256()
    for part in (_GUARD_DOMAIN, webhook_id.encode("utf-8"), msg_id.encode("utf-8")):
        digest.update(len(part).to_bytes(4, "big"))
        digest.update(part)
    return digest.hexdigest()


def _headers(scope: Scope) -> dict[bytes, bytes]:
    """Lower-cased headers; a header sent twice maps to :data:`_DUPLICATE`."""
    out: dict[bytes, bytes] = {}
    for name, value in scope.get("headers", ()):
        lowered = bytes(name).lower()
        out[lowered] = _DUPLICATE if lowered in out else bytes(value)
    return out


def _text(value: bytes | None) -> str | None:
    if value is None or value is _DUPLICATE:
        return None
    try:
        return value.decode("ascii")
    except UnicodeDecodeError:
        return None
