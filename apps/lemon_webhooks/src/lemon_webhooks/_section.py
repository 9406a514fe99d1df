"""``[webhooks]``: the webhook ingress's config section (declared here, named on its AppSpec).

The deprecated ``[gateway]`` spellings it still takes are declared here too
(:attr:`WebhooksConfig.deprecated`): the gateway's own section knows nothing of webhooks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, ClassVar, Final, Literal

import msgspec

from lemon_core.config import Section, ToolPolicyConfig

__all__ = ["WebhookEndpointConfig", "WebhookQueueMode", "WebhooksConfig"]

WebhookQueueMode = Literal["collect", "followup", "steer", "steer_backlog", "redirect", "interrupt"]
_WebhookId = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")]
_EnvName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
_Seconds = Annotated[float, msgspec.Meta(ge=0)]
_ID_HINT = "1-64 characters of a-z, 0-9, '_' and '-', starting with a-z or 0-9"
_ENV_HINT = "the NAME of an environment variable, e.g. CI_WEBHOOK_SECRET"


class WebhookEndpointConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[[webhooks.endpoints]]``: one webhook integration, served at ``POST /webhooks/<id>``
    (read from the deprecated ``[[gateway.webhooks]]`` too).

    ``secret_env`` names the variable (environment, else ``$LEMON_HOME/secrets.env``) holding
    its Standard Webhooks secret (``whsec_<base64>``); the secret never sits in this file.

    A request body's ``session_key`` may name only a key under the webhook's own namespace
    (``agent:<agent_id>:webhook:<id>:...``), ``session_key`` (the default when the body names
    none) or one of ``allowed_session_keys``: a webhook secret does not reach the person's
    other sessions unless this entry says so.
    """

    id: _WebhookId
    secret_env: _EnvName
    session_key: str | None = None
    allowed_session_keys: tuple[str, ...] = ()
    agent_id: str = "default"
    queue_mode: WebhookQueueMode = "collect"
    tool_policy: ToolPolicyConfig | None = None


class _DeprecatedGatewayWebhookKeys(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True
):
    """The ``[gateway]`` keys the webhook ingress used to read: checked under their old names
    (an error names the key the file holds), then moved to ``[webhooks]``."""

    ingress_enabled: bool = False
    idempotency_ttl_s: Annotated[float, msgspec.Meta(ge=1)] = 86_400.0
    webhook_max_body_bytes: Annotated[int, msgspec.Meta(ge=1, le=16 * 1024 * 1024)] = 262_144
    webhook_submit_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=600)] = 10.0
    webhooks: tuple[WebhookEndpointConfig, ...] = ()


class WebhooksConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[webhooks]``: the webhook ingress (this app's README documents each key).

    Off by default. The deprecated ``[gateway]`` spellings (:attr:`deprecated`) are still
    read, and ``lemon config validate`` names each with its replacement.
    """

    #: Keys still read under their old spelling: (old section, old key) -> key here.
    deprecated: ClassVar[Mapping[tuple[str, str], str]] = {
        ("gateway", "ingress_enabled"): "enabled",
        ("gateway", "webhooks"): "endpoints",
        ("gateway", "idempotency_ttl_s"): "idempotency_ttl_s",
        ("gateway", "webhook_max_body_bytes"): "max_body_bytes",
        ("gateway", "webhook_submit_timeout_s"): "submit_timeout_s",
    }
    deprecated_schema: ClassVar[type[msgspec.Struct] | None] = _DeprecatedGatewayWebhookKeys
    hints: ClassVar[Mapping[str, str]] = {
        "gateway.webhooks[].id": _ID_HINT,
        "gateway.webhooks[].secret_env": _ENV_HINT,
        "webhooks.endpoints[].id": _ID_HINT,
        "webhooks.endpoints[].secret_env": _ENV_HINT,
    }

    enabled: bool = False
    idempotency_ttl_s: Annotated[float, msgspec.Meta(ge=1)] = 86_400.0
    max_body_bytes: Annotated[int, msgspec.Meta(ge=1, le=16 * 1024 * 1024)] = 262_144
    submit_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=600)] = 10.0
    sweep_interval_s: _Seconds = 300.0
    endpoints: tuple[WebhookEndpointConfig, ...] = ()

    def secret_env_names(self) -> Iterable[str | None]:
        return (endpoint.secret_env for endpoint in self.endpoints)


#: The config sections this app owns, by name: what the ``lemon.config`` entry point names (the
#: loader reads it without importing the rest of the app), the same as its ``AppSpec`` declares.
SECTIONS: Final[Mapping[str, type[Section]]] = {"webhooks": WebhooksConfig}
