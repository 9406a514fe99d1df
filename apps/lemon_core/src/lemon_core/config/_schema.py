"""The typed shape of ``config.toml``: every section is a frozen, keyword-only record.

Unknown keys are rejected (a typo must not be silently ignored), every field has a default so a
partial file is valid on its own, and legacy sections of other Lemon versions are refused with a
hint naming their replacement.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import msgspec

ProviderKind = Literal["openai_completions", "anthropic_messages", "offline"]
RuntimeEnv = Literal["dev", "test", "prod"]
LogLevel = Literal["debug", "info", "warning", "error"]


class _Section(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every config section."""


class ProviderConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[providers.<name>]``: how to reach one model provider."""

    kind: ProviderKind
    base_url: str | None = None
    api_key_env: str | None = None
    models: tuple[str, ...] = ()
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 600.0


class DefaultsConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[defaults]``: the model used when a request names none (``"<provider>:<model>"``)."""

    model: str | None = None
    thinking_level: Literal["off", "low", "medium", "high"] = "off"


_Count = Annotated[int, msgspec.Meta(ge=1)]
_Seconds = Annotated[float, msgspec.Meta(ge=0)]


class ToolPolicyConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[profiles.<id>.tool_policy]``: which tools run, ask, or are refused."""

    allow: tuple[str, ...] = ()
    require_approval: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()


WebhookQueueMode = Literal["collect", "followup", "steer", "steer_backlog", "redirect", "interrupt"]
_WebhookId = Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")]
_EnvName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]


class WebhookEndpointConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
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


class WebhooksConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[webhooks]``: the webhook ingress (lemon_webhooks; its README documents each key).

    Off by default. The deprecated ``[gateway]`` spellings are still read, and ``lemon config
    validate`` names each with its replacement (:data:`DEPRECATED_KEYS`).
    """

    enabled: bool = False
    idempotency_ttl_s: Annotated[float, msgspec.Meta(ge=1)] = 86_400.0
    max_body_bytes: Annotated[int, msgspec.Meta(ge=1, le=16 * 1024 * 1024)] = 262_144
    submit_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=600)] = 10.0
    sweep_interval_s: _Seconds = 300.0
    endpoints: tuple[WebhookEndpointConfig, ...] = ()


class _DeprecatedGatewayWebhookKeys(
    _Section, frozen=True, kw_only=True, forbid_unknown_fields=True
):
    """The ``[gateway]`` keys the webhook ingress used to read: checked under their old names
    (an error names the key the file holds), then moved to ``[webhooks]``."""

    ingress_enabled: bool = False
    idempotency_ttl_s: Annotated[float, msgspec.Meta(ge=1)] = 86_400.0
    webhook_max_body_bytes: Annotated[int, msgspec.Meta(ge=1, le=16 * 1024 * 1024)] = 262_144
    webhook_submit_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=600)] = 10.0
    webhooks: tuple[WebhookEndpointConfig, ...] = ()


class GatewayConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[gateway]``: execution slots and bounds.

    Every key reaches ``lemon_gateway.GatewayConfig`` (same names and defaults, checked by the
    gateway's tests); the gateway README's ``[gateway]`` table documents each one.
    """

    max_concurrent_runs: Annotated[int, msgspec.Meta(ge=1, le=1024)] = 2
    slot_request_timeout_s: _Seconds = 30.0
    require_engine_lock: bool = True
    engine_lock_timeout_s: _Seconds = 60.0
    max_launch_attempts: _Count = 3
    launch_retry_backoff_s: _Seconds = 0.1
    prepare_timeout_s: _Seconds = 60.0
    store_timeout_s: _Seconds = 10.0
    shutdown_grace_s: _Seconds = 10.0
    max_pending_per_conversation: _Count = 1_000
    max_pending_runs: _Count = 100_000
    record_run_history: bool = True
    store_sweep_interval_s: _Seconds = 300.0
    default_cwd: str | None = None
    shared_slots: bool = False
    lease_ttl_s: Annotated[float, msgspec.Meta(gt=0)] = 15.0


StoreBackend = Literal["sqlite", "postgres", "memory"]
BusBackendName = Literal["local", "redis"]


class StoreConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[store]``: where the stores live.

    ``sqlite`` (default: ``$LEMON_HOME/store/lemon.sqlite3``), ``memory`` (gone with the
    process) or ``postgres`` (several daemons share it: ``dsn``, or ``dsn_env`` naming the
    variable that holds it, so a password stays out of the file). ``schema`` isolates one
    deployment in a PostgreSQL database and is the bus's Redis key/channel prefix too.
    """

    backend: StoreBackend = "sqlite"
    dsn: str | None = None
    dsn_env: str | None = None
    schema: str = "lemon"
    #: PostgreSQL: how long a call waits for a pooled connection (and a connection attempt)
    #: before it fails with StoreUnavailableError.
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=300)] = 5.0


class BusConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[bus]``: how publications travel. ``local`` (in process, the default) or ``redis``
    (fan-out across daemons: ``url``, or ``url_env`` naming the variable that holds it)."""

    backend: BusBackendName = "local"
    url: str | None = None
    url_env: str | None = None


class RuntimeConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[runtime]``: which environment the process runs as (selects e.g. bus validation)."""

    env: RuntimeEnv = "dev"
    profile: str = "full"


class ProfileConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[profiles.<agent_id>]``: an agent's name, prompt, model and tool policy."""

    name: str | None = None
    system_prompt: str | None = None
    model: str | None = None
    tool_policy: ToolPolicyConfig | None = None


class FileAccessConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[file_access]``: which files the coding tools refuse as secrets.

    ``secret_patterns`` are added to the built-in list of coding_agent (glob patterns matched
    against a file's name, or, when they hold a ``/``, against the end of its path; ``~`` or
    ``/`` at the start: the whole path). ``allow_secrets`` (same syntax) exempts files from the
    refusal; only ``$LEMON_HOME/config.toml`` may set it, never a project's config.
    """

    secret_patterns: tuple[str, ...] = ()
    allow_secrets: tuple[str, ...] = ()


class BashToolConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[tools.bash]``: the coding agent's shell tool.

    The coding tools run with the daemon's environment less its secrets (the variables the
    configuration names, those of ``$LEMON_HOME/secrets.env``, and every ``*_KEY``,
    ``*_TOKEN``, ``*SECRET*``, ``*PASSWORD*``-like name: coding_agent's README has the list).
    ``pass_env`` names variables let through all the same (``GITHUB_TOKEN`` for ``gh``); it
    widens what a command sees, so only ``$LEMON_HOME/config.toml`` may set it.
    """

    pass_env: tuple[_EnvName, ...] = ()


class ToolsConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[tools]``: settings of the coding tools. Which tools run, ask or are refused is the
    tool *policy*, in ``[profiles.<agent_id>.tool_policy]``."""

    bash: BashToolConfig = BashToolConfig()


class LoggingConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[logging]``: log level and optional file."""

    level: LogLevel = "info"
    file: str | None = None


class TelegramChannelConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[channels.telegram]``: the Telegram bot (lemon_channels; its README documents each key).

    Nobody may talk to the agent by default: ``allowed_users`` lists Telegram user ids, and
    unknown users get a one-time pairing code (``lemon channels pair approve CODE``).
    """

    enabled: bool = True
    token_env: str = "TELEGRAM_BOT_TOKEN"
    """The NAME of the variable (environment or secrets.env) holding the bot token."""
    api_base_url: str = "https://api.telegram.org"
    allowed_users: tuple[int, ...] = ()
    mode: Literal["polling", "webhook"] = "polling"
    webhook_url: str | None = None
    """The public https URL Telegram posts to (webhook mode): it must end with the mount
    path ``/channels/telegram``."""
    webhook_secret_env: str | None = None
    """The NAME of the variable holding the webhook secret (webhook mode)."""
    agent_id: str = "default"
    edit_interval_s: Annotated[float, msgspec.Meta(ge=0, le=60)] = 1.0
    """The least time between two edits of a streaming answer in one chat."""
    poll_timeout_s: Annotated[int, msgspec.Meta(ge=0, le=50)] = 25


class ChannelsConfig(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[channels]``: the chat channels the daemon runs (lemon_channels)."""

    telegram: TelegramChannelConfig | None = None


class ControlPlaneSection(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[control_plane]``: who may drive the daemon's control plane, and over what (the
    server's own, fuller record is ``lemon_control_plane.ControlPlaneConfig``).

    ``local_auth = false`` lets a loopback daemon with no configured token admit every account
    of the machine as admin (unsafe wherever there is another account); by default even a
    loopback daemon requires a token, the owner's being the home's local token.
    ``tls_cert`` / ``tls_key``: PEM files (a relative path is under ``$LEMON_HOME``) to serve
    HTTPS and WSS with; both or neither. The admission bounds (``connect_timeout_s``,
    ``header_timeout_s``, ``max_connections``, ``max_connections_per_client``; unset: the
    server's defaults, 10 s, 10 s, 1024, 256) are described in lemon_control_plane's README,
    "Limits"."""

    local_auth: bool = True
    tls_cert: str | None = None
    tls_key: str | None = None
    connect_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] | None = None
    header_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] | None = None
    max_connections: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] | None = None
    max_connections_per_client: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] | None = None

    def admission(self) -> dict[str, float | int]:
        """The admission bounds this file sets (the server keeps its defaults for the rest)."""
        names = (
            "connect_timeout_s",
            "header_timeout_s",
            "max_connections",
            "max_connections_per_client",
        )
        return {n: v for n in names if (v := getattr(self, n)) is not None}

    def tls_paths(self, home: Path) -> tuple[Path, Path] | None:
        """The certificate and key files (relative ones under ``home``), or ``None``."""
        if self.tls_cert is None or self.tls_key is None:
            return None
        cert, key = (Path(p).expanduser() for p in (self.tls_cert, self.tls_key))
        return (
            cert if cert.is_absolute() else home / cert,
            key if key.is_absolute() else home / key,
        )


class Config(_Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The whole configuration after layering (home file, project file, environment)."""

    defaults: DefaultsConfig = DefaultsConfig()
    providers: dict[str, ProviderConfig] = {}
    gateway: GatewayConfig = GatewayConfig()
    webhooks: WebhooksConfig = WebhooksConfig()
    runtime: RuntimeConfig = RuntimeConfig()
    profiles: dict[str, ProfileConfig] = {}
    logging: LoggingConfig = LoggingConfig()
    file_access: FileAccessConfig = FileAccessConfig()
    tools: ToolsConfig = ToolsConfig()
    channels: ChannelsConfig = ChannelsConfig()
    store: StoreConfig = StoreConfig()
    bus: BusConfig = BusConfig()
    control_plane: ControlPlaneSection = ControlPlaneSection()


# Unknown keys of a section that once held something else: said with the usual hint.
LEGACY_SECTION_HINTS: dict[str, str] = {
    "tools": "tool policy lives in [profiles.<agent_id>.tool_policy]; [tools] holds only "
    "[tools.bash]",
}

# Legacy sections refused with what to use instead.
LEGACY_KEYS: dict[str, str] = {
    "agent": "use [profiles.<agent_id>] instead of [agent]",
    "agents": "use [profiles.<agent_id>] instead of [agents.<id>]",
    "engine": "there is exactly one native engine; remove the engine key",
    "default_engine": "there is exactly one native engine; remove default_engine",
}

# Keys still read under an old spelling: (section, old key) -> (section, new key). The loader
# moves each to its new place and reports a ConfigDeprecation (never an error).
DEPRECATED_KEYS: dict[tuple[str, str], tuple[str, str]] = {
    ("gateway", "ingress_enabled"): ("webhooks", "enabled"),
    ("gateway", "webhooks"): ("webhooks", "endpoints"),
    ("gateway", "idempotency_ttl_s"): ("webhooks", "idempotency_ttl_s"),
    ("gateway", "webhook_max_body_bytes"): ("webhooks", "max_body_bytes"),
    ("gateway", "webhook_submit_timeout_s"): ("webhooks", "submit_timeout_s"),
}
#: The record checking the deprecated keys of a section under their old names.
DEPRECATED_SECTIONS: dict[str, type[_Section]] = {"gateway": _DeprecatedGatewayWebhookKeys}
