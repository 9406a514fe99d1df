"""The OpenAPI document of the webhook route (served at ``/webhooks/openapi.json``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["webhook_openapi"]

_QUEUE_MODES = ["collect", "followup", "steer", "steer_backlog", "redirect", "interrupt"]


def _error_response(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def _header(name: str, description: str, **schema: Any) -> dict[str, Any]:
    return {
        "name": name,
        "in": "header",
        "required": True,
        "description": description,
        "schema": {"type": "string", **schema},
    }


#: The shape of a webhook id (``[[webhooks.endpoints]] id``).
WEBHOOK_ID_PATTERN = "^[a-z0-9][a-z0-9_-]{0,63}$"


def webhook_openapi(
    webhook_ids: Sequence[str] | None = None, *, prefix: str = "/webhooks"
) -> dict[str, Any]:
    """An OpenAPI 3.0 document for ``POST <prefix>/{webhook_id}``: with ``webhook_ids`` the
    path parameter enumerates them (for a test generating requests); without, it gives only
    their shape. The ingress serves the latter: the document is public (no signature guards a
    GET), and the ids would tell anyone which integrations the daemon has."""
    id_schema: dict[str, Any] = (
        {"type": "string", "pattern": WEBHOOK_ID_PATTERN}
        if webhook_ids is None
        else {"type": "string", "enum": list(webhook_ids) or ["none-configured"]}
    )
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Lemon webhook ingress",
            "version": "1",
            "description": (
                "Signed (Standard Webhooks) and idempotent (Idempotency-Key) submission of a "
                "prompt to a Lemon session."
            ),
        },
        "paths": {
            f"{prefix}/{{webhook_id}}": {
                "post": {
                    "operationId": "submitWebhook",
                    "parameters": [
                        {
                            "name": "webhook_id",
                            "in": "path",
                            "required": True,
                            "schema": id_schema,
                        },
                        _header(
                            "Idempotency-Key",
                            "The caller's key: the same key and body answer the same response",
                            minLength=1,
                            maxLength=255,
                        ),
                        _header("webhook-id", "Standard Webhooks message id", maxLength=256),
                        _header(
                            "webhook-timestamp",
                            "Standard Webhooks timestamp (seconds since the epoch)",
                            pattern="^[0-9]+$",
                        ),
                        _header(
                            "webhook-signature",
                            "Standard Webhooks signature(s): v1,<base64 HMAC-SHA256>",
                        ),
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/WebhookRequest"}
                            }
                        },
                    },
                    "responses": {
                        "202": {
                            "description": (
                                "Accepted (a replay carries Idempotent-Replayed: true), or the "
                                "bounded uncertain receipt when the outcome is not known"
                            ),
                            "headers": {
                                "Idempotent-Replayed": {
                                    "schema": {"type": "string", "enum": ["true"]}
                                }
                            },
                            "content": {
                                "application/json": {
                                    "schema": {
                                        "oneOf": [
                                            {"$ref": "#/components/schemas/Accepted"},
                                            {"$ref": "#/components/schemas/OutcomeUnknown"},
                                        ]
                                    }
                                }
                            },
                        },
                        "400": _error_response("Missing or blank key, or an invalid body"),
                        "401": _error_response("Missing or bad signature, or a stale timestamp"),
                        "403": _error_response(
                            "The session_key is outside this webhook's namespace and not one "
                            "its configuration names; nothing reserved"
                        ),
                        "404": _error_response("No webhook is configured with this id"),
                        "408": _error_response("The body did not arrive in time"),
                        "409": _error_response("The first request with this key is in flight"),
                        "413": _error_response("The body is too large"),
                        "422": _error_response(
                            "This key was used with a different body, or this webhook-id "
                            "with another key"
                        ),
                        "503": _error_response("Router or store unavailable; nothing reserved"),
                    },
                }
            }
        },
        "components": {
            "schemas": {
                "WebhookRequest": {
                    "type": "object",
                    "required": ["prompt"],
                    "additionalProperties": False,
                    "properties": {
                        "prompt": {"type": "string", "minLength": 1},
                        "session_key": {"type": "string"},
                        "queue_mode": {"type": "string", "enum": _QUEUE_MODES},
                    },
                },
                "Accepted": {
                    "type": "object",
                    "required": ["status", "run_id", "session_key"],
                    "additionalProperties": False,
                    "properties": {
                        "status": {"type": "string", "enum": ["accepted"]},
                        "run_id": {"type": "string"},
                        "session_key": {"type": "string"},
                    },
                },
                "OutcomeUnknown": {
                    "type": "object",
                    "required": ["status", "run_id", "retry_safe"],
                    "additionalProperties": False,
                    "properties": {
                        "status": {"type": "string", "enum": ["outcome_unknown"]},
                        "run_id": {"type": "string"},
                        "retry_safe": {"type": "boolean", "enum": [False]},
                    },
                },
                "Error": {
                    "type": "object",
                    "required": ["error", "message"],
                    "properties": {
                        "error": {"type": "string"},
                        "message": {"type": "string"},
                        "retry_safe": {"type": "boolean"},
                    },
                },
            }
        },
    }
