"""lemon_webhooks' ``lemon.apps`` hook: the webhook ingress on a booted runtime.

Profiles ``daemon``, ``full`` and ``execution-only`` (wherever the gateway runs); it starts
*before* ``lemon_gateway`` (``before``: an ordering only), because it is the runtime's
``VANISHED_RUN_LISTENER`` and the gateway's start-up sweep of a dead process's runs must reach
it. It submits through ``SESSION_PORT``, looked up per request: until the router runs, a
request is a 503 with nothing reserved.

``[webhooks] enabled`` off (the default): no store is opened, nothing is mounted, nothing is
registered; ``/webhooks/...`` is the control plane's 404. On: start resolves every endpoint's
secret; an endpoint whose secret is missing or malformed (or whose session keys are wrong) is
left out, *degraded*: logged as a warning naming the variable, listed in
:attr:`Webhooks.degraded` and the ingress's ``statistics()``, its path a 404 (the other
endpoints, the daemon and every chat go on; ``lemon doctor`` and ``lemon config validate``
name it the same way, see :func:`webhook_problems`). Two endpoints with one id still refuse
startup. Then start opens the
idempotency store (:mod:`lemon_webhooks._store`), mounts the application at ``/webhooks``,
registers it as ``VANISHED_RUN_LISTENER`` and starts the expiry sweep; leaving the lifespan
undoes all of that. The app owns the ``[webhooks]`` section
(:class:`~lemon_webhooks.WebhooksConfig`) and the deprecated ``[gateway]`` spellings of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from lemon_core.config import read_secrets
from lemon_core.execution import VANISHED_RUN_LISTENER
from lemon_core.mounts import HTTP_MOUNTS
from lemon_core.sessions import InvalidSessionKeyError, check_session_key
from lemon_runtime import AppSpec, Runtime
from lemon_webhooks._ingress import IngressFaults, SessionPortSubmitter, Webhook, WebhookIngress
from lemon_webhooks._section import SECTIONS, WebhookEndpointConfig, WebhooksConfig
from lemon_webhooks._signature import WebhookSecret
from lemon_webhooks._store import open_idempotency_store, sweep_forever
from lemon_webhooks.errors import WebhooksConfigError

__all__ = [
    "WEBHOOK_PREFIX",
    "Webhooks",
    "lemon_webhooks_app",
    "resolve_webhooks",
    "webhook_ingress",
    "webhook_problems",
    "webhooks_app",
]

log = logging.getLogger("lemon_webhooks")

#: Where the ingress is mounted.
WEBHOOK_PREFIX: Final = "/webhooks"


def resolve_webhooks(
    configs: tuple[WebhookEndpointConfig, ...], *, environ: Mapping[str, str], home: Path
) -> dict[str, Webhook]:
    """Every endpoint with its secret (the environment wins over ``secrets.env``); raise
    :class:`WebhooksConfigError` for a reused id or the first unset or malformed secret."""
    webhooks, problems = usable_webhooks(configs, environ=environ, home=home)
    if problems:
        raise WebhooksConfigError(next(iter(problems.values())))
    return webhooks


def usable_webhooks(
    configs: tuple[WebhookEndpointConfig, ...], *, environ: Mapping[str, str], home: Path
) -> tuple[dict[str, Webhook], dict[str, str]]:
    """The endpoints that can serve (with their secrets) and, by id, why each other one
    cannot (its secret variable unset or malformed, a session key that is not its agent's);
    raise :class:`WebhooksConfigError` for a reused id."""
    ids = [config.id for config in configs]
    duplicated = sorted({i for i in ids if ids.count(i) > 1})
    if duplicated:
        raise WebhooksConfigError(
            f"webhooks.endpoints: the id {duplicated[0]!r} is used twice; each webhook needs "
            "its own id (it is its path, /webhooks/<id>)"
        )
    secrets: dict[str, str] | None = None
    out: dict[str, Webhook] = {}
    problems: dict[str, str] = {}
    for index, config in enumerate(configs):
        where = f"webhooks.endpoints[{index}] ({config.id!r})"
        value = environ.get(config.secret_env, "").strip()
        if not value:
            if secrets is None:
                secrets = read_secrets(home)
            value = secrets.get(config.secret_env, "").strip()
        if not value:
            problems[config.id] = (
                f"{where}: its secret variable {config.secret_env} is not set; set it in the "
                f"environment or in {home / 'secrets.env'} to the webhook's Standard Webhooks "
                "secret (whsec_<base64>), or remove the webhook"
            )
            continue
        try:
            secret = WebhookSecret.parse(value, name=f"{where}: {config.secret_env}")
            _check_session_keys(config, where)
        except WebhooksConfigError as exc:
            problems[config.id] = str(exc)
            continue
        out[config.id] = Webhook.from_config(config, secret)
    return out, problems


def webhook_problems(
    config: WebhooksConfig, *, environ: Mapping[str, str], home: Path
) -> list[str]:
    """What start would say of ``config`` (``lemon doctor``, ``lemon config validate``): one
    sentence per endpoint that would be degraded, or the reused id that refuses start; empty
    when the ingress is off or every endpoint can serve."""
    if not config.enabled:
        return []
    try:
        _usable, problems = usable_webhooks(config.endpoints, environ=environ, home=home)
    except WebhooksConfigError as exc:
        return [str(exc)]
    return list(problems.values())


def _check_session_keys(config: WebhookEndpointConfig, where: str) -> None:
    """Every key the entry names must be a session key of the webhook's agent."""
    named = [("session_key", config.session_key)] if config.session_key is not None else []
    named += [("allowed_session_keys", key) for key in config.allowed_session_keys]
    for field_name, key in named:
        try:
            parsed = check_session_key(key)
        except InvalidSessionKeyError as exc:
            raise WebhooksConfigError(f"{where}: {field_name}: {exc}") from exc
        if parsed is not None and parsed.agent_id != config.agent_id:
            raise WebhooksConfigError(
                f"{where}: {field_name}: {key!r} belongs to agent {parsed.agent_id!r}, this "
                f"webhook runs agent {config.agent_id!r}; name a key of "
                f"agent:{config.agent_id}:..."
            )


@contextlib.asynccontextmanager
async def webhook_ingress(
    runtime: Runtime,
    *,
    environ: Mapping[str, str] | None = None,
    faults: IngressFaults | None = None,
) -> AsyncIterator[WebhookIngress]:
    """The ingress of ``runtime``'s ``[webhooks]`` section, mounted, registered as
    ``VANISHED_RUN_LISTENER`` and swept for the block (see the module docstring; it does not
    look at ``enabled``). ``faults`` is for tests only."""
    config = runtime.section(WebhooksConfig)
    env = os.environ if environ is None else environ
    webhooks, degraded = usable_webhooks(config.endpoints, environ=env, home=runtime.home)
    for detail in degraded.values():
        log.warning("webhook endpoint degraded (not served): %s", detail)
    capabilities = runtime.context.capabilities
    mounts = capabilities.require(HTTP_MOUNTS)
    store = await open_idempotency_store(
        runtime.store, home=runtime.home, ttl_s=config.idempotency_ttl_s
    )
    try:
        ingress = WebhookIngress(
            webhooks=webhooks,
            store=store,
            submitter=SessionPortSubmitter(capabilities),
            ttl_s=config.idempotency_ttl_s,
            max_body_bytes=config.max_body_bytes,
            submit_timeout_s=config.submit_timeout_s,
            prefix=WEBHOOK_PREFIX,
            faults=faults,
            degraded=degraded,
        )
        mounts.mount(WEBHOOK_PREFIX, ingress, owner="lemon_webhooks", description="webhook ingress")
        # A run of a webhook whose process died mid-run: its key answers outcome_unknown.
        capabilities.register(VANISHED_RUN_LISTENER, ingress)
        sweeper: asyncio.Task[None] | None = None
        if config.sweep_interval_s > 0:
            sweeper = asyncio.get_running_loop().create_task(
                sweep_forever(store, config.sweep_interval_s), name="webhooks:idempotency-sweep"
            )
        try:
            yield ingress
        finally:
            capabilities.unregister(VANISHED_RUN_LISTENER, ingress)
            mounts.unmount(WEBHOOK_PREFIX)
            if sweeper is not None:
                sweeper.cancel()
                await asyncio.wait({sweeper})
    finally:
        await store.close()


@dataclass(slots=True)
class Webhooks:
    """The app's handle: the running ingress, or ``None`` when ``[webhooks] enabled`` is off."""

    ingress: WebhookIngress | None = None

    @property
    def degraded(self) -> dict[str, str]:
        """The configured endpoints not served, by id, each with why (empty when none)."""
        return {} if self.ingress is None else dict(self.ingress.degraded)


def webhooks_app(*, faults: IngressFaults | None = None) -> AppSpec[Webhooks]:
    """The app as the runtime boots it; ``faults`` is for tests only (the entry point names
    :data:`lemon_webhooks_app`, which has none)."""

    @contextlib.asynccontextmanager
    async def lifespan(runtime: Runtime) -> AsyncIterator[Webhooks]:
        for deprecation in runtime.loaded_config.deprecations:
            if deprecation.replacement.startswith("webhooks."):
                log.warning("config: %s", deprecation.render())
        if not runtime.section(WebhooksConfig).enabled:
            yield Webhooks()
            return
        async with webhook_ingress(runtime, faults=faults) as ingress:
            yield Webhooks(ingress)

    return AppSpec(
        name="lemon_webhooks",
        lifespan=lifespan,
        before=("lemon_gateway",),
        profiles=frozenset({"daemon", "execution-only", "full"}),
        description="webhook ingress on the session port (when [webhooks] enabled)",
        sections=SECTIONS,
    )


lemon_webhooks_app: Final = webhooks_app()
