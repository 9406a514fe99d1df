"""The webhook ingress on a booted runtime: the gateway's ingress factory.

Entered by :meth:`Gateway.start` only when ``[gateway] ingress_enabled`` is set (disabled: no
store is opened, nothing is mounted, ``/webhooks/...`` is the control plane's 404). Entering
it resolves every webhook's secret (a missing or malformed one refuses startup, naming the
variable), opens the idempotency store, migrates legacy raw-key rows, mounts the application
at ``/webhooks`` and starts the expiry sweep. Leaving it undoes all of that.

The store: with a shared (PostgreSQL) runtime store, the PostgreSQL idempotency store in its
schema, on its pool (every daemon of the schema shares the reservations: a key sent to any of
them executes once); otherwise ``$LEMON_HOME/store/idempotency.sqlite3``. Only with the SQLite
file (one daemon per home) are the fences a previous process left pending turned into
``outcome_unknown`` at once; on a shared schema another daemon may still be submitting its
pending fences, so they are left alone, and each reads as ``outcome_unknown`` once its lease
has run out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Final, cast, get_args

from lemon_core.config import WebhookConfig, read_secrets
from lemon_core.idempotency import (
    IdempotencyStore,
    IdempotencyStoreError,
    SQLiteIdempotencyStore,
    open_shared_idempotency_store,
)
from lemon_core.runtime import HTTP_MOUNTS, Runtime
from lemon_core.sessions import InvalidSessionKeyError, check_session_key
from lemon_core.store import system_clock_ms
from lemon_gateway._ingress import FaultPoint, SessionPortSubmitter, Webhook, WebhookIngress
from lemon_gateway._signature import WebhookSecret
from lemon_gateway.errors import GatewayConfigError

if TYPE_CHECKING:
    from lemon_gateway._gateway import Gateway

__all__ = [
    "FAULT_ENV",
    "WEBHOOK_PREFIX",
    "idempotency_store_path",
    "resolve_webhooks",
    "webhook_ingress",
]

log = logging.getLogger("lemon_gateway.ingress")

#: Where the ingress is mounted.
WEBHOOK_PREFIX: Final = "/webhooks"
#: Test-only: the name of a fault point to arm (see the README); never set it in production.
FAULT_ENV: Final = "LEMON_WEBHOOK_FAULT"


def idempotency_store_path(home: Path) -> Path:
    """The idempotency store's SQLite file under ``home``."""
    return home / "store" / "idempotency.sqlite3"


def resolve_webhooks(
    configs: tuple[WebhookConfig, ...], *, environ: Mapping[str, str], home: Path
) -> dict[str, Webhook]:
    """Every webhook with its secret (the environment wins over ``secrets.env``); raise
    :class:`GatewayConfigError` for the first unset or malformed secret."""
    secrets: dict[str, str] | None = None
    out: dict[str, Webhook] = {}
    for index, config in enumerate(configs):
        where = f"gateway.webhooks[{index}] ({config.id!r})"
        value = environ.get(config.secret_env, "").strip()
        if not value:
            if secrets is None:
                secrets = read_secrets(home)
            value = secrets.get(config.secret_env, "").strip()
        if not value:
            raise GatewayConfigError(
                f"{where}: its secret variable {config.secret_env} is not set; set it in the "
                f"environment or in {home / 'secrets.env'} to the webhook's Standard Webhooks "
                "secret (whsec_<base64>), or remove the webhook"
            )
        secret = WebhookSecret.parse(value, name=f"{where}: {config.secret_env}")
        _check_session_keys(config, where)
        out[config.id] = Webhook.from_config(config, secret)
    return out


def _check_session_keys(config: WebhookConfig, where: str) -> None:
    """Every key the entry names must be a session key of the webhook's agent."""
    named = [("session_key", config.session_key)] if config.session_key is not None else []
    named += [("allowed_session_keys", key) for key in config.allowed_session_keys]
    for field, key in named:
        try:
            parsed = check_session_key(key)
        except InvalidSessionKeyError as exc:
            raise GatewayConfigError(f"{where}: {field}: {exc}") from exc
        if parsed is not None and parsed.agent_id != config.agent_id:
            raise GatewayConfigError(
                f"{where}: {field}: {key!r} belongs to agent {parsed.agent_id!r}, this webhook "
                f"runs agent {config.agent_id!r}; name a key of agent:{config.agent_id}:..."
            )


def _fault(environ: Mapping[str, str]) -> FaultPoint | None:
    value = environ.get(FAULT_ENV, "").strip()
    if not value:
        return None
    if value not in get_args(FaultPoint):
        raise GatewayConfigError(
            f"{FAULT_ENV}={value!r} is not a fault point ({', '.join(get_args(FaultPoint))}); "
            "it is for tests only: unset it"
        )
    log.warning("%s=%s is set: a test-only fault point is armed", FAULT_ENV, value)
    return cast(FaultPoint, value)


async def _sweep_forever(store: IdempotencyStore, interval_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            report = await store.sweep(now_ms=system_clock_ms())
        except IdempotencyStoreError as exc:  # nothing removed, watermark kept: retried later
            log.warning("idempotency sweep failed (retried in %ss): %s", interval_s, exc)
            continue
        if report.fences_removed:
            log.info("idempotency sweep removed %d fences", report.fences_removed)


def webhook_ingress(
    runtime: Runtime, *, environ: Mapping[str, str] | None = None
) -> Callable[[Gateway], AbstractAsyncContextManager[WebhookIngress]]:
    """The ingress factory for ``runtime`` (see the module docstring)."""

    @contextlib.asynccontextmanager
    async def factory(gateway: Gateway) -> AsyncIterator[WebhookIngress]:
        env = os.environ if environ is None else environ
        config = gateway.config
        webhooks = resolve_webhooks(config.webhooks, environ=env, home=runtime.home)
        fault = _fault(env)
        mounts = runtime.context.capabilities.require(HTTP_MOUNTS)
        shared = await open_shared_idempotency_store(runtime.store)
        store: IdempotencyStore = (
            shared
            if shared is not None
            else await SQLiteIdempotencyStore.open(idempotency_store_path(runtime.home))
        )
        try:
            now = system_clock_ms()
            ttl_ms = int(config.idempotency_ttl_s * 1000)
            migrated = await store.migrate_legacy(now_ms=now, ttl_ms=ttl_ms)
            if migrated.seen:
                log.warning("idempotency: migrated legacy raw-key rows: %s", migrated)
            if shared is None:  # the only writer of this file: nothing can be in flight
                await store.recover(now_ms=now)
            ingress = WebhookIngress(
                webhooks=webhooks,
                store=store,
                submitter=SessionPortSubmitter(runtime.context.capabilities),
                ttl_s=config.idempotency_ttl_s,
                max_body_bytes=config.webhook_max_body_bytes,
                submit_timeout_s=config.webhook_submit_timeout_s,
                prefix=WEBHOOK_PREFIX,
                fault=fault,
            )
            mounts.mount(
                WEBHOOK_PREFIX, ingress, owner="lemon_gateway", description="webhook ingress"
            )
            # A run of a webhook whose process died mid-run: its key answers outcome_unknown.
            forget_hook = gateway.on_vanished(ingress.run_vanished)
            sweeper: asyncio.Task[None] | None = None
            if config.store_sweep_interval_s > 0:
                sweeper = asyncio.get_running_loop().create_task(
                    _sweep_forever(store, config.store_sweep_interval_s),
                    name="gateway:idempotency-sweep",
                )
            try:
                yield ingress
            finally:
                forget_hook()
                mounts.unmount(WEBHOOK_PREFIX)
                if sweeper is not None:
                    sweeper.cancel()
                    await asyncio.wait({sweeper})
        finally:
            await store.close()

    return factory
