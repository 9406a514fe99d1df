"""Configuration: the typed schema of ``config.toml`` and the layered loader.

See :mod:`lemon_core.config._loader` for the layering order and the error contract.
"""

from __future__ import annotations

from lemon_core.config._loader import (
    BUILTIN_PROVIDERS,
    ConfigDeprecation,
    ConfigError,
    ConfigIssue,
    LoadedConfig,
    find_project_config,
    lemon_home,
    load_config,
)
from lemon_core.config._redact import redact_config, redact_text
from lemon_core.config._schema import (
    BashToolConfig,
    BusConfig,
    ChannelsConfig,
    Config,
    ControlPlaneSection,
    DefaultsConfig,
    FileAccessConfig,
    GatewayConfig,
    LoggingConfig,
    ProfileConfig,
    ProviderConfig,
    RuntimeConfig,
    StoreConfig,
    TelegramChannelConfig,
    ToolPolicyConfig,
    ToolsConfig,
    WebhookEndpointConfig,
    WebhooksConfig,
)
from lemon_core.config._secrets import SECRETS_FILENAME, read_secrets
from lemon_core.config._servers import redact_url, resolve_bus_url, resolve_store_dsn

__all__ = [
    "BUILTIN_PROVIDERS",
    "SECRETS_FILENAME",
    "BashToolConfig",
    "BusConfig",
    "ChannelsConfig",
    "Config",
    "ConfigDeprecation",
    "ConfigError",
    "ConfigIssue",
    "ControlPlaneSection",
    "DefaultsConfig",
    "FileAccessConfig",
    "GatewayConfig",
    "LoadedConfig",
    "LoggingConfig",
    "ProfileConfig",
    "ProviderConfig",
    "RuntimeConfig",
    "StoreConfig",
    "TelegramChannelConfig",
    "ToolPolicyConfig",
    "ToolsConfig",
    "WebhookEndpointConfig",
    "WebhooksConfig",
    "find_project_config",
    "lemon_home",
    "load_config",
    "read_secrets",
    "redact_config",
    "redact_text",
    "redact_url",
    "resolve_bus_url",
    "resolve_store_dsn",
]
