"""Webhook ingress: ``POST /webhooks/<id>``, signed, exactly once or honestly "unknown".

A client of the session port (``SESSION_PORT``) like the channels: it submits runs through
the port and hears of runs a dead process left in flight through the runtime's
``VANISHED_RUN_LISTENER``; it imports nothing of the gateway. See the README.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lemon_core.facade import lazy_exports

if TYPE_CHECKING:
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

#: Where each facade name lives (the lazy loader reads it; the TYPE_CHECKING imports
#: repeat it for type checkers, ``__all__`` for the architecture gate).
_EXPORTS: Final[dict[str, tuple[str, str]]] = {
    "WEBHOOK_PREFIX": ("lemon_webhooks._boot", "WEBHOOK_PREFIX"),
    "Webhooks": ("lemon_webhooks._boot", "Webhooks"),
    "lemon_webhooks_app": ("lemon_webhooks._boot", "lemon_webhooks_app"),
    "resolve_webhooks": ("lemon_webhooks._boot", "resolve_webhooks"),
    "webhook_ingress": ("lemon_webhooks._boot", "webhook_ingress"),
    "webhook_problems": ("lemon_webhooks._boot", "webhook_problems"),
    "webhooks_app": ("lemon_webhooks._boot", "webhooks_app"),
    "REPLAY_WINDOW_MS": ("lemon_webhooks._ingress", "REPLAY_WINDOW_MS"),
    "WEBHOOK_ID_GUARD_SUFFIX": ("lemon_webhooks._ingress", "WEBHOOK_ID_GUARD_SUFFIX"),
    "IngressFaults": ("lemon_webhooks._ingress", "IngressFaults"),
    "SessionPortSubmitter": ("lemon_webhooks._ingress", "SessionPortSubmitter"),
    "Submitter": ("lemon_webhooks._ingress", "Submitter"),
    "Webhook": ("lemon_webhooks._ingress", "Webhook"),
    "WebhookIngress": ("lemon_webhooks._ingress", "WebhookIngress"),
    "webhook_openapi": ("lemon_webhooks._openapi", "webhook_openapi"),
    "WebhookEndpointConfig": ("lemon_webhooks._section", "WebhookEndpointConfig"),
    "WebhookQueueMode": ("lemon_webhooks._section", "WebhookQueueMode"),
    "WebhooksConfig": ("lemon_webhooks._section", "WebhooksConfig"),
    "TOLERANCE_S": ("lemon_webhooks._signature", "TOLERANCE_S"),
    "WebhookSecret": ("lemon_webhooks._signature", "WebhookSecret"),
    "sign_webhook": ("lemon_webhooks._signature", "sign_webhook"),
    "verify_webhook": ("lemon_webhooks._signature", "verify_webhook"),
    "idempotency_store_path": ("lemon_webhooks._store", "idempotency_store_path"),
    "WebhooksConfigError": ("lemon_webhooks.errors", "WebhooksConfigError"),
    "WebhooksError": ("lemon_webhooks.errors", "WebhooksError"),
}

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

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
