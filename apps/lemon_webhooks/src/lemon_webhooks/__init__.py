"""Webhook ingress: ``POST /webhooks/<id>``, signed, exactly once or honestly "unknown".

A client of the session port (``SESSION_PORT``) like the channels: it submits runs through
the port and hears of runs a dead process left in flight through the runtime's
``VANISHED_RUN_LISTENER``; it imports nothing of the gateway. See the README.
"""

from __future__ import annotations

from lemon_webhooks._boot import (
    WEBHOOK_PREFIX,
    Webhooks,
    lemon_webhooks_app,
    resolve_webhooks,
    webhook_ingress,
    webhook_problems,
    webhooks_app,
)
from lemon_webhooks._ingress import (
    REPLAY_WINDOW_MS,
    WEBHOOK_ID_GUARD_SUFFIX,
    IngressFaults,
    SessionPortSubmitter,
    Submitter,
    Webhook,
    WebhookIngress,
)
from lemon_webhooks._openapi import webhook_openapi
from lemon_webhooks._section import WebhookEndpointConfig, WebhookQueueMode, WebhooksConfig
from lemon_webhooks._signature import TOLERANCE_S, WebhookSecret, sign_webhook, verify_webhook
from lemon_webhooks._store import idempotency_store_path
from lemon_webhooks.errors import WebhooksConfigError, WebhooksError

__all__ = [
    "REPLAY_WINDOW_MS",
    "TOLERANCE_S",
    "WEBHOOK_ID_GUARD_SUFFIX",
    "WEBHOOK_PREFIX",
    "IngressFaults",
    "SessionPortSubmitter",
    "Submitter",
    "Webhook",
    "WebhookEndpointConfig",
    "WebhookIngress",
    "WebhookQueueMode",
    "WebhookSecret",
    "Webhooks",
    "WebhooksConfig",
    "WebhooksConfigError",
    "WebhooksError",
    "idempotency_store_path",
    "lemon_webhooks_app",
    "resolve_webhooks",
    "sign_webhook",
    "verify_webhook",
    "webhook_ingress",
    "webhook_openapi",
    "webhook_problems",
    "webhooks_app",
]
