"""lemon_webhooks' error hierarchy.

Only misuse is raised: a request that fails is *answered* (a status and a JSON error), never
raised to the server::

    WebhooksError
    └── WebhooksConfigError (ValueError)   an endpoint's secret, session keys or id: no start

A test (``test_webhooks_public_api.py``) keeps this drawing equal to the classes.
"""

from __future__ import annotations

__all__ = ["WebhooksConfigError", "WebhooksError"]


class WebhooksError(Exception):
    """Base class of every lemon_webhooks error."""


class WebhooksConfigError(WebhooksError, ValueError):
    """Misuse: a ``[[webhooks.endpoints]]`` entry cannot be served (the message names the
    entry, the key and the fix)."""
