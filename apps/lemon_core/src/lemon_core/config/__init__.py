"""Configuration: the base sections of ``config.toml``, the :class:`Section` base every app's
own section derives from, and the layered loader assembling the schema from them.

See :mod:`lemon_core.config._loader` for the layering order and the error contract.
"""

from __future__ import annotations

from lemon_core.config._issues import ConfigDeprecation, ConfigError, ConfigIssue
from lemon_core.config._loader import (
    BUILTIN_PROVIDERS,
    LoadedConfig,
    find_project_config,
    lemon_home,
    load_config,
)
from lemon_core.config._redact import redact_config, redact_text
from lemon_core.config._schema import (
    BusConfig,
    Config,
    DefaultsConfig,
    LoggingConfig,
    ProfileConfig,
    ProviderConfig,
    RuntimeConfig,
    StoreConfig,
    ToolPolicyConfig,
)
from lemon_core.config._secrets import SECRETS_FILENAME, read_secrets
from lemon_core.config._section import (
    SECTIONS_ENTRY_POINT_GROUP,
    CheckContext,
    Section,
    installed_sections,
)
from lemon_core.config._servers import redact_url, resolve_bus_url, resolve_store_dsn

__all__ = [
    "BUILTIN_PROVIDERS",
    "SECRETS_FILENAME",
    "SECTIONS_ENTRY_POINT_GROUP",
    "BusConfig",
    "CheckContext",
    "Config",
    "ConfigDeprecation",
    "ConfigError",
    "ConfigIssue",
    "DefaultsConfig",
    "LoadedConfig",
    "LoggingConfig",
    "ProfileConfig",
    "ProviderConfig",
    "RuntimeConfig",
    "Section",
    "StoreConfig",
    "ToolPolicyConfig",
    "find_project_config",
    "installed_sections",
    "lemon_home",
    "load_config",
    "read_secrets",
    "redact_config",
    "redact_text",
    "redact_url",
    "resolve_bus_url",
    "resolve_store_dsn",
]
