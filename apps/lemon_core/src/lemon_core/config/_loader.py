"""Loading the layered configuration: home file, then project file, then environment.

Lowest priority first:

1. ``$LEMON_HOME/config.toml`` (``LEMON_HOME`` defaults to ``~/.lemon``);
2. the nearest ``.lemon/config.toml`` found walking up from the working directory;
3. environment variables: ``LEMON_MODEL`` (``[defaults] model``), ``LEMON_ENV`` (``[runtime] env``),
   ``LEMON_MAX_CONCURRENT_RUNS`` (``[gateway] max_concurrent_runs``).

Each file is validated on its own first, so an error names the file that holds the bad key; the
merged result is validated again for cross-section rules (the default model's provider exists).
All problems found are reported together in one :class:`ConfigError`. A key still read under
an old spelling (``[gateway] ingress_enabled``, ``[[gateway.webhooks]]``, ...: ``DEPRECATED_KEYS``)
is checked under the name the file uses, moved to its new place, and reported as a
:class:`ConfigDeprecation` in :attr:`LoadedConfig.deprecations`: a finding, never an error.
"""

from __future__ import annotations

import os
import re
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from lemon_core.config._schema import (
    DEPRECATED_KEYS,
    DEPRECATED_SECTIONS,
    LEGACY_KEYS,
    LEGACY_SECTION_HINTS,
    Config,
)
from lemon_core.config._servers import check_servers
from lemon_core.errors import LemonCoreError
from lemon_core.home import Home

# Providers a model reference may name without a [providers.<name>] section: the offline
# provider and the hosted/local servers lemon_ai's catalogue knows how to reach (a test in
# lemon_cli keeps this list equal to the catalogue's).
BUILTIN_PROVIDERS = frozenset(
    {"anthropic", "llamacpp", "lmstudio", "offline", "ollama", "openai", "vllm"}
)
_PATH_RE = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_HINTS: dict[str, str] = {
    "gateway.webhooks[].id": "1-64 characters of a-z, 0-9, '_' and '-', starting with a-z or 0-9",
    "gateway.webhooks[].secret_env": "the NAME of an environment variable, e.g. CI_WEBHOOK_SECRET",
    "webhooks.endpoints[].id": "1-64 characters of a-z, 0-9, '_' and '-', starting with a-z or 0-9",
    "webhooks.endpoints[].secret_env": "the NAME of an environment variable, e.g. "
    "CI_WEBHOOK_SECRET",
    "tools.bash.pass_env": "the NAME of an environment variable, e.g. GITHUB_TOKEN",
}
_ENV_KEYS: dict[str, tuple[str, str]] = {
    "LEMON_MODEL": ("defaults", "model"),
    "LEMON_ENV": ("runtime", "env"),
    "LEMON_MAX_CONCURRENT_RUNS": ("gateway", "max_concurrent_runs"),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfigIssue:
    """One problem: where it is (``source`` file or env var, dotted ``key``), what, how to fix."""

    source: str
    key: str
    message: str
    hint: str = ""

    def render(self) -> str:
        where = f"{self.source}: {self.key}" if self.key else self.source
        return f"{where}: {self.message}" + (f" ({self.hint})" if self.hint else "")


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfigDeprecation:
    """A key read under its old spelling: where (``source`` file, dotted ``key``) and the
    spelling to use instead (``replacement``, dotted). Reported, never an error."""

    source: str
    key: str
    replacement: str

    def render(self) -> str:
        return f"{self.source}: {self.key}: deprecated, still read; use {self.replacement}"


class ConfigError(LemonCoreError, ValueError):
    """The configuration is invalid; ``issues`` lists every problem found."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        self.issues = tuple(issues)
        super().__init__("invalid configuration:\n" + "\n".join(f"  {i.render()}" for i in issues))


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadedConfig:
    """The validated configuration with where it came from."""

    config: Config
    home: Path
    sources: tuple[str, ...] = field(default=())
    #: Keys read under an old spelling, in layer order (see :class:`ConfigDeprecation`).
    deprecations: tuple[ConfigDeprecation, ...] = field(default=())

    @property
    def home_config_path(self) -> Path:
        return Home(root=self.home).config


def lemon_home(environ: Mapping[str, str] | None = None) -> Path:
    """Where Lemon keeps its state: ``$LEMON_HOME`` or ``~/.lemon`` (see :class:`lemon_core.Home`,
    which also names every path below it)."""
    return Home.from_env(environ).root


def find_project_config(cwd: Path, home: Path) -> Path | None:
    """The nearest ``.lemon/config.toml`` at or above ``cwd`` (the home config never counts)."""
    home_cfg = (home / "config.toml").resolve()
    for directory in (cwd.resolve(), *cwd.resolve().parents):
        candidate = directory / ".lemon" / "config.toml"
        if candidate.is_file() and candidate.resolve() != home_cfg:
            return candidate
    return None


def load_config(
    *,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    home: Path | None = None,
) -> LoadedConfig:
    """Load, layer and validate the configuration; raise :class:`ConfigError` listing all issues."""
    env = os.environ if environ is None else environ
    home_dir = home if home is not None else lemon_home(env)
    issues: list[ConfigIssue] = []
    layers: list[tuple[str, dict[str, Any]]] = []

    files = [home_dir / "config.toml"]
    project = find_project_config(cwd if cwd is not None else Path.cwd(), home_dir)
    if project is not None:
        files.append(project)
    for path in files:
        raw = _read_toml(path, issues)
        if raw is not None:
            layers.append((str(path), raw))

    env_layer: dict[str, Any] = {}
    for var, (section, key) in _ENV_KEYS.items():
        value = env.get(var, "").strip()
        if value:
            coerced: Any = value
            if key == "max_concurrent_runs":
                try:
                    coerced = int(value)
                except ValueError:
                    issues.append(
                        ConfigIssue(source=var, key="", message=f"not an integer: {value!r}")
                    )
                    continue
            env_layer.setdefault(section, {})[key] = coerced
    if env_layer:
        layers.append(("environment", env_layer))

    deprecations: list[ConfigDeprecation] = []
    migrated: list[tuple[str, dict[str, Any]]] = []
    for source, raw in layers:
        issues.extend(_validate_layer(source, raw))
        moved, found = _move_deprecated(source, raw, issues)
        migrated.append((source, moved))
        deprecations.extend(found)
    if issues:
        raise ConfigError(issues)
    layers = migrated

    merged: dict[str, Any] = {}
    for _, raw in layers:
        _deep_merge(merged, raw)
    config = msgspec.convert(merged, Config, strict=True)
    issues.extend(_cross_checks(config, layers))
    issues.extend(_control_plane_checks(config, layers, home_dir))
    issues.extend(_widening_checks(layers, home_source=str(files[0])))
    if issues:
        raise ConfigError(issues)
    return LoadedConfig(
        config=config,
        home=home_dir,
        sources=tuple(s for s, _ in layers),
        deprecations=tuple(deprecations),
    )


def _read_toml(path: Path, issues: list[ConfigIssue]) -> dict[str, Any] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        # no such file; a home that is itself a file is reported by the commands that need it
        return None
    except (OSError, UnicodeDecodeError) as exc:
        issues.append(ConfigIssue(source=str(path), key="", message=f"cannot read: {exc}"))
        return None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        issues.append(
            ConfigIssue(
                source=str(path), key="", message=f"not valid TOML: {exc}", hint="fix the syntax"
            )
        )
        return None


def _validate_layer(source: str, raw: dict[str, Any]) -> list[ConfigIssue]:
    found: list[ConfigIssue] = []
    for key, hint in LEGACY_KEYS.items():
        if key in raw:
            found.append(
                ConfigIssue(source=source, key=key, message="unsupported section", hint=hint)
            )
    if found:
        return found
    checked = raw
    for section, legacy in DEPRECATED_SECTIONS.items():
        body = raw.get(section)
        if not isinstance(body, dict):
            continue
        old = {k: body[k] for (s, k) in DEPRECATED_KEYS if s == section and k in body}
        if old:  # checked under the names the file uses, the rest as usual
            _check_struct(source, section, old, legacy, found)
            checked = {**checked, section: {k: v for k, v in body.items() if k not in old}}
    _check_struct(source, "", checked, Config, found)
    return found


def _move_deprecated(
    source: str, raw: dict[str, Any], issues: list[ConfigIssue]
) -> tuple[dict[str, Any], list[ConfigDeprecation]]:
    """``raw`` with every deprecated key moved to its new place, and a finding for each; a
    key set under both spellings in one layer is an issue (which one wins would be a guess)."""
    found: list[ConfigDeprecation] = []
    out = dict(raw)
    for (section, key), (new_section, new_key) in DEPRECATED_KEYS.items():
        body = out.get(section)
        if not isinstance(body, dict) or key not in body:
            continue
        target = out.get(new_section, {})
        if not isinstance(target, dict):
            continue  # already an issue: the new section must be a table
        old, new = f"{section}.{key}", f"{new_section}.{new_key}"
        if new_key in target:
            issues.append(
                ConfigIssue(
                    source=source,
                    key=old,
                    message=f"deprecated, and {new} is set too",
                    hint=f"remove {old} (its new spelling is {new})",
                )
            )
            continue
        out[section] = {k: v for k, v in body.items() if k != key}
        out[new_section] = {**target, new_key: body[key]}
        found.append(ConfigDeprecation(source=source, key=old, replacement=new))
    return out, found


def _check_struct(
    source: str, prefix: str, body: Any, cls: type[Any], found: list[ConfigIssue]
) -> None:
    """Check ``body`` against the record type ``cls`` key by key, so that every problem of a
    table is reported, not only the first one msgspec meets."""
    if not isinstance(body, dict):
        found.append(_convert_issue(source, prefix, body, cls))
        return
    fields = {f.name: f for f in msgspec.structs.fields(cls)}
    for key in body:
        if key not in fields:
            found.append(
                ConfigIssue(
                    source=source,
                    key=_join(prefix, key),
                    message="unknown key",
                    hint=_legacy_hint(prefix) + "known keys here: " + ", ".join(fields),
                )
            )
    for name, info in fields.items():
        key = _join(prefix, name)
        if name not in body:
            if info.required:
                found.append(ConfigIssue(source=source, key=key, message="missing required key"))
            continue
        value = body[name]
        nested = _struct_in(info.type)
        table_of = _table_of(info.type)
        if nested is not None and isinstance(value, dict):
            _check_struct(source, key, value, nested, found)
        elif (array_of := _array_of(info.type)) is not None and isinstance(value, list):
            for index, entry_body in enumerate(value):  # [[section.key]] arrays of tables
                _check_struct(source, f"{key}[{index}]", entry_body, array_of, found)
        elif table_of is not None:
            if not isinstance(value, dict):
                found.append(ConfigIssue(source=source, key=key, message="must be a table"))
                continue
            for entry, entry_body in value.items():
                _check_struct(source, _join(key, str(entry)), entry_body, table_of, found)
        else:
            issue = _convert_issue(source, key, value, info.type)
            if issue.message:
                found.append(issue)


def _legacy_hint(prefix: str) -> str:
    """What a section held in other Lemon versions, before the known keys ("" if nothing)."""
    hint = LEGACY_SECTION_HINTS.get(prefix)
    return f"{hint}; " if hint else ""


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _struct_in(tp: Any) -> type[Any] | None:
    """The record type in ``tp`` (``Struct`` or ``Struct | None``), if any."""
    candidates = (
        typing.get_args(tp) if typing.get_origin(tp) in (typing.Union, types.UnionType) else (tp,)
    )
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, msgspec.Struct):
            return candidate
    return None


def _array_of(tp: Any) -> type[Any] | None:
    """The record type of a ``tuple[Struct, ...]`` field (an array of tables), if it is one."""
    if typing.get_origin(tp) is tuple:
        return _struct_in(typing.get_args(tp)[0])
    return None


def _table_of(tp: Any) -> type[Any] | None:
    """The record type of a ``dict[str, Struct]`` field (a table of tables), if it is one."""
    if typing.get_origin(tp) is dict:
        return _struct_in(typing.get_args(tp)[1])
    return None


def _convert_issue(source: str, key: str, value: Any, tp: Any) -> ConfigIssue:
    """An issue for ``value`` not converting to ``tp`` (an empty message when it converts)."""
    try:
        msgspec.convert(value, tp, strict=True)
    except msgspec.ValidationError as exc:
        message = str(exc)
        match = _PATH_RE.search(message)
        text = message[: match.start()] if match else message
        choices = typing.get_args(tp) if typing.get_origin(tp) is typing.Literal else ()
        if key.endswith(".kind"):
            hint = "one of openai_completions, anthropic_messages, offline"
        elif choices:
            hint = "one of " + ", ".join(str(c) for c in choices)
        else:
            hint = _HINTS.get(re.sub(r"\[\d+\]", "[]", key), "")
        return ConfigIssue(source=source, key=key, message=text, hint=hint)
    return ConfigIssue(source=source, key=key, message="")


def _cross_checks(config: Config, layers: list[tuple[str, dict[str, Any]]]) -> list[ConfigIssue]:
    issues: list[ConfigIssue] = []
    models = [("defaults.model", config.defaults.model)] + [
        (f"profiles.{name}.model", p.model) for name, p in config.profiles.items()
    ]
    for key, spec in models:
        if spec is None:
            continue
        source = _origin(key, layers)
        provider, sep, model = spec.partition(":")
        if not sep or not provider or not model:
            issues.append(
                ConfigIssue(
                    source=source,
                    key=key,
                    message=f"model {spec!r} is not of the form '<provider>:<model>'",
                    hint='e.g. "openai:gpt-4o-mini" with a [providers.openai] section',
                )
            )
        elif provider not in config.providers and provider not in BUILTIN_PROVIDERS:
            known = ", ".join(sorted({*config.providers, *BUILTIN_PROVIDERS}))
            issues.append(
                ConfigIssue(
                    source=source,
                    key=key,
                    message=f"provider {provider!r} is not configured",
                    hint=f"add [providers.{provider}] or use one of: {known}",
                )
            )
    for name, provider_cfg in config.providers.items():
        if provider_cfg.kind == "openai_completions" and not provider_cfg.base_url:
            issues.append(
                ConfigIssue(
                    source=_origin(f"providers.{name}", layers),
                    key=f"providers.{name}.base_url",
                    message="an openai_completions provider needs base_url",
                    hint='e.g. "https://api.openai.com/v1" or "http://127.0.0.1:11434/v1"',
                )
            )
    for key, message, hint in check_servers(config):
        issues.append(ConfigIssue(source=_origin(key, layers), key=key, message=message, hint=hint))
    issues.extend(_channel_checks(config, layers))
    return issues


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _control_plane_checks(
    config: Config, layers: list[tuple[str, dict[str, Any]]], home: Path
) -> list[ConfigIssue]:
    """``[control_plane]``: TLS files both or neither, and each one a readable file."""
    section = config.control_plane
    issues: list[ConfigIssue] = []
    if (section.tls_cert is None) != (section.tls_key is None):
        key = "control_plane.tls_key" if section.tls_key is None else "control_plane.tls_cert"
        issues.append(
            ConfigIssue(
                source=_origin(key, layers),
                key=key,
                message="TLS needs both tls_cert and tls_key",
                hint="a PEM certificate (chain) and its private key, e.g. from your CA or "
                "`openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem`",
            )
        )
    paths = section.tls_paths(home)
    for name, path in zip(("tls_cert", "tls_key"), paths or (), strict=False):
        if not path.is_file() or not os.access(path, os.R_OK):
            key = f"control_plane.{name}"
            issues.append(
                ConfigIssue(
                    source=_origin(key, layers),
                    key=key,
                    message=f"{path} is not a readable file",
                    hint="a relative path is under $LEMON_HOME",
                )
            )
    return issues


def _channel_checks(config: Config, layers: list[tuple[str, dict[str, Any]]]) -> list[ConfigIssue]:
    telegram = config.channels.telegram
    if telegram is None:
        return []
    issues: list[ConfigIssue] = []

    def issue(key: str, message: str, hint: str) -> None:
        full = f"channels.telegram.{key}"
        issues.append(
            ConfigIssue(source=_origin(full, layers), key=full, message=message, hint=hint)
        )

    for key in ("token_env", "webhook_secret_env"):
        name = getattr(telegram, key)
        if name is not None and not _ENV_NAME.match(name):
            issue(
                key,
                f"{name!r} is not a variable name",
                'give the NAME of the variable holding the secret, e.g. "TELEGRAM_BOT_TOKEN", '
                "never the secret itself",
            )
    if not telegram.api_base_url.startswith(("http://", "https://")):
        issue(
            "api_base_url",
            f"{telegram.api_base_url!r} is not an http(s) URL",
            'e.g. "https://api.telegram.org" (or your self-hosted Bot API server)',
        )
    if any(user <= 0 for user in telegram.allowed_users):
        issue(
            "allowed_users",
            "Telegram user ids are positive integers",
            "e.g. allowed_users = [123456789] (ask @userinfobot for yours)",
        )
    if telegram.mode == "webhook":
        if not telegram.webhook_url or not telegram.webhook_url.startswith("https://"):
            issue(
                "webhook_url",
                "webhook mode needs the public https URL Telegram posts to",
                'e.g. webhook_url = "https://bot.example.org/channels/telegram", '
                'or use mode = "polling"',
            )
        if not telegram.webhook_secret_env:
            issue(
                "webhook_secret_env",
                "webhook mode needs a secret Telegram sends back with every update",
                'name the variable holding it, e.g. webhook_secret_env = "TELEGRAM_WEBHOOK_SECRET"',
            )
    return issues


#: Keys that widen what the coding tools may reach: a project's ``.lemon/config.toml`` comes
#: with the code being worked on, so only the user's own home config may set them.
_HOME_ONLY_KEYS: tuple[tuple[str, ...], ...] = (
    ("file_access", "allow_secrets"),
    ("tools", "bash", "pass_env"),
)


def _widening_checks(
    layers: list[tuple[str, dict[str, Any]]], *, home_source: str
) -> list[ConfigIssue]:
    issues: list[ConfigIssue] = []
    for source, raw in layers:
        if source == home_source:
            continue
        for path in _HOME_ONLY_KEYS:
            body: Any = raw
            for part in path[:-1]:
                body = body.get(part) if isinstance(body, dict) else None
            if isinstance(body, dict) and path[-1] in body:
                issues.append(
                    ConfigIssue(
                        source=source,
                        key=".".join(path),
                        message="only the home config may set this (it widens what tools reach)",
                        hint=f"move it to {home_source}",
                    )
                )
    return issues


def _origin(key: str, layers: list[tuple[str, dict[str, Any]]]) -> str:
    """The last layer (highest priority) that sets ``key``."""
    for layer_source, raw in reversed(layers):
        node: Any = raw
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            return str(layer_source)
    return "config"


def _deep_merge(into: dict[str, Any], layer: Mapping[str, Any]) -> None:
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _deep_merge(into[key], value)
        elif isinstance(value, Mapping):
            into[key] = {}
            _deep_merge(into[key], value)
        else:
            into[key] = value
