"""The base sections of ``config.toml``: those the runtime composition itself uses
(``[runtime]``, ``[store]``, ``[bus]``, ``[logging]``) and the agent-wide ones (``[defaults]``,
``[providers.*]``, ``[profiles.*]``), and :class:`Config`, which holds them and every app's
own section (each app declares its section in its own package: :class:`Section`).

Unknown keys are rejected (a typo must not be silently ignored), every field has a default so a
partial file is valid on its own, and legacy sections of other Lemon versions are refused with a
hint naming their replacement.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

import msgspec

from lemon_core.config._section import Section
from lemon_core.errors import LemonCoreError

ProviderKind = Literal["openai_completions", "anthropic_messages", "offline"]
RuntimeEnv = Literal["dev", "test", "prod"]
LogLevel = Literal["debug", "info", "warning", "error"]


S = TypeVar("S", bound=Section)


class ProviderConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[providers.<name>]``: how to reach one model provider."""

    kind: ProviderKind
    base_url: str | None = None
    api_key_env: str | None = None
    models: tuple[str, ...] = ()
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 600.0


class DefaultsConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[defaults]``: the model used when a request names none (``"<provider>:<model>"``)."""

    model: str | None = None
    thinking_level: Literal["off", "low", "medium", "high"] = "off"


class ToolPolicyConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[profiles.<id>.tool_policy]``: which tools run, ask, or are refused."""

    allow: tuple[str, ...] = ()
    require_approval: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()


StoreBackend = Literal["sqlite", "postgres", "memory"]
BusBackendName = Literal["local", "redis"]


class StoreConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
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


class BusConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[bus]``: how publications travel. ``local`` (in process, the default) or ``redis``
    (fan-out across daemons: ``url``, or ``url_env`` naming the variable that holds it)."""

    backend: BusBackendName = "local"
    url: str | None = None
    url_env: str | None = None


class RuntimeConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[runtime]``: which environment the process runs as (selects e.g. bus validation)."""

    env: RuntimeEnv = "dev"
    profile: str = "full"


class ProfileConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[profiles.<agent_id>]``: an agent's name, prompt, model and tool policy."""

    name: str | None = None
    system_prompt: str | None = None
    model: str | None = None
    tool_policy: ToolPolicyConfig | None = None


class LoggingConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[logging]``: log level and optional file."""

    level: LogLevel = "info"
    file: str | None = None


class Config(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The whole configuration after layering (home file, project file, environment): the base
    sections here, and every app's section (:meth:`section`; the loader builds them from the
    sections it was given, see :func:`~lemon_core.config.installed_sections`)."""

    defaults: DefaultsConfig = DefaultsConfig()
    providers: dict[str, ProviderConfig] = msgspec.field(default_factory=dict)
    runtime: RuntimeConfig = RuntimeConfig()
    profiles: dict[str, ProfileConfig] = msgspec.field(default_factory=dict)
    logging: LoggingConfig = LoggingConfig()
    store: StoreConfig = StoreConfig()
    bus: BusConfig = BusConfig()
    sections: dict[str, Section] = msgspec.field(default_factory=dict)
    """The apps' sections by name (``"gateway"``, ...); read them with :meth:`section`."""

    def section(self, cls: type[S]) -> S:
        """The loaded section of type ``cls`` (its defaults when no file set it, or when the
        loader was not given that section)."""
        for value in self.sections.values():
            if type(value) is cls:
                return value
        return cls()

    def with_section(self, value: Section, *, name: str | None = None) -> Config:
        """This configuration with ``value`` in place of the section of its type (an
        override: ``config.with_section(msgspec.structs.replace(section, port=0))``); ``name``
        is needed only when the loader was not given that section."""
        if name is None:
            name = next((n for n, v in self.sections.items() if type(v) is type(value)), None)
        if name is None:
            raise LemonCoreError(
                f"no config section of type {type(value).__name__} is loaded; pass its name"
            )
        return msgspec.structs.replace(self, sections={**self.sections, name: value})

    def to_builtins(self) -> dict[str, Any]:
        """Plain data, one table per section as in ``config.toml`` (``config show``)."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        out.pop("sections", None)
        for name, value in self.sections.items():
            out[name] = msgspec.to_builtins(value)
        return out

    def secret_env_names(self) -> frozenset[str]:
        """Every variable the configuration names as holding a secret (providers' keys, the
        store's DSN, the bus's URL and what each app's section names)."""
        names: set[str | None] = {p.api_key_env for p in self.providers.values()}
        names.update((self.store.dsn_env, self.bus.url_env))
        for value in self.sections.values():
            names.update(value.secret_env_names())
        return frozenset(name for name in names if name)


# Legacy sections refused with what to use instead.
LEGACY_KEYS: dict[str, str] = {
    "agent": "use [profiles.<agent_id>] instead of [agent]",
    "agents": "use [profiles.<agent_id>] instead of [agents.<id>]",
    "engine": "there is exactly one native engine; remove the engine key",
    "default_engine": "there is exactly one native engine; remove default_engine",
}
