"""Loading the layered configuration: home file, then project file, then environment.

Lowest priority first:

1. ``$LEMON_HOME/config.toml`` (``LEMON_HOME`` defaults to ``~/.lemon``);
2. the nearest ``.lemon/config.toml`` found walking up from the working directory;
3. environment variables: ``LEMON_MODEL`` (``[defaults] model``), ``LEMON_ENV`` (``[runtime] env``)
   and those an app's section declares (``LEMON_MAX_CONCURRENT_RUNS``: ``[gateway]
   max_concurrent_runs``).

The schema is assembled: the base sections (:mod:`lemon_core.config._schema`) and the sections
the installed apps declare (:class:`~lemon_core.config.Section`, passed as ``sections``).

Each file is validated on its own first, so an error names the file that holds the bad key; the
merged result is validated again for cross-section rules (the default model's provider exists).
All problems found are reported together in one :class:`ConfigError`. A key still read under
an old spelling (``[gateway] ingress_enabled``, ``[[gateway.webhooks]]``, ...: the
``deprecated`` keys a section declares, here lemon_webhooks' ``[webhooks]``) is checked under
the name the file uses, moved to its new place, and reported as a :class:`ConfigDeprecation`
in :attr:`LoadedConfig.deprecations`: a finding, never an error.
"""

from __future__ import annotations

import os
import re
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from lemon_core.config._issues import ConfigDeprecation, ConfigError, ConfigIssue
from lemon_core.config._schema import LEGACY_KEYS, Config
from lemon_core.config._section import CheckContext, Section, installed_sections
from lemon_core.config._servers import check_servers
from lemon_core.home import Home

__all__ = [
    "BUILTIN_PROVIDERS",
    "ConfigDeprecation",
    "ConfigError",
    "ConfigIssue",
    "LoadedConfig",
    "find_project_config",
    "lemon_home",
    "load_config",
]

# Providers a model reference may name without a [providers.<name>] section: the offline
# provider and the hosted/local servers lemon_ai's catalogue knows how to reach (a test in
# lemon_cli keeps this list equal to the catalogue's).
BUILTIN_PROVIDERS = frozenset(
    {"anthropic", "llamacpp", "lmstudio", "offline", "ollama", "openai", "vllm"}
)
_S = TypeVar("_S", bound=Section)
_PATH_RE = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_ENV_KEYS: dict[str, tuple[str, str]] = {
    "LEMON_MODEL": ("defaults", "model"),
    "LEMON_ENV": ("runtime", "env"),
}
#: The base sections (fields of :class:`Config`); every other one is an app's.
_BASE_FIELDS = tuple(n for n in Config.__struct_fields__ if n != "sections")


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

    def section(self, cls: type[_S]) -> _S:
        """The loaded section of type ``cls`` (see :meth:`Config.section`)."""
        return self.config.section(cls)

    def with_section(self, value: Section, *, name: str | None = None) -> LoadedConfig:
        """This configuration with ``value`` in place of its section (an override)."""
        return replace(self, config=self.config.with_section(value, name=name))


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


@dataclass(frozen=True, slots=True)
class _Schema:
    """The schema assembled from the base sections and the apps' sections."""

    sections: Mapping[str, type[Section]]
    deprecated_keys: dict[tuple[str, str], tuple[str, str]]
    deprecated_sections: dict[str, type[msgspec.Struct]]
    hints: dict[str, str]
    env_keys: dict[str, tuple[str, str]]

    @classmethod
    def of(cls, sections: Mapping[str, type[Section]]) -> _Schema:
        deprecated: dict[tuple[str, str], tuple[str, str]] = {}
        old_schemas: dict[str, type[msgspec.Struct]] = {}
        hints: dict[str, str] = {}
        env_keys = dict(_ENV_KEYS)
        for name, section in sections.items():
            for (old_section, old_key), new_key in section.deprecated.items():
                deprecated[(old_section, old_key)] = (name, new_key)
                if section.deprecated_schema is not None:
                    old_schemas[old_section] = section.deprecated_schema
            hints.update(section.hints)
            env_keys.update({var: (name, key) for var, key in section.env_keys.items()})
        return cls(dict(sections), deprecated, old_schemas, hints, env_keys)

    def fields(self) -> dict[str, tuple[Any, bool]]:
        """The top-level tables: base sections first, then the apps' (type, required)."""
        base = {f.name: f for f in msgspec.structs.fields(Config)}
        out: dict[str, tuple[Any, bool]] = {n: (base[n].type, False) for n in _BASE_FIELDS}
        out.update({n: (s, False) for n, s in self.sections.items()})
        return out


def load_config(
    *,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    home: Path | None = None,
    sections: Mapping[str, type[Section]] | None = None,
) -> LoadedConfig:
    """Load, layer and validate the configuration; raise :class:`ConfigError` listing all issues.

    ``sections`` are the apps' sections (``{name: Section subclass}``) the schema is assembled
    from, besides the base ones; default :func:`installed_sections` (every installed app's).
    A table that is neither a base section nor one of these is an unknown key."""
    env = os.environ if environ is None else environ
    home_dir = home if home is not None else lemon_home(env)
    schema = _Schema.of(installed_sections() if sections is None else sections)
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
    for var, (section, key) in schema.env_keys.items():
        value = env.get(var, "").strip()
        if value:
            coerced: Any = value
            if _is_int_key(schema, section, key):
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
        issues.extend(_validate_layer(source, raw, schema))
        moved, found = _move_deprecated(source, raw, issues, schema)
        migrated.append((source, moved))
        deprecations.extend(found)
    if issues:
        raise ConfigError(issues)
    layers = migrated

    merged: dict[str, Any] = {}
    for _, raw in layers:
        _deep_merge(merged, raw)
    base = msgspec.convert(
        {k: v for k, v in merged.items() if k in _BASE_FIELDS}, Config, strict=True
    )
    config = msgspec.structs.replace(
        base,
        sections={
            name: msgspec.convert(merged.get(name, {}), cls, strict=True)
            for name, cls in schema.sections.items()
        },
    )
    issues.extend(_cross_checks(config, layers))
    ctx = CheckContext(home=home_dir, origin=lambda key: _origin(key, layers))
    for name, section_value in config.sections.items():
        issues.extend(section_value.check(name, ctx))
    issues.extend(_widening_checks(layers, schema, home_source=str(files[0])))
    if issues:
        raise ConfigError(issues)
    return LoadedConfig(
        config=config,
        home=home_dir,
        sources=tuple(s for s, _ in layers),
        deprecations=tuple(deprecations),
    )


def _is_int_key(schema: _Schema, section: str, key: str) -> bool:
    cls = schema.sections.get(section)
    if cls is None:
        return False
    default = next((f.default for f in msgspec.structs.fields(cls) if f.name == key), None)
    return isinstance(default, int) and not isinstance(default, bool)


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


def _validate_layer(source: str, raw: dict[str, Any], schema: _Schema) -> list[ConfigIssue]:
    found: list[ConfigIssue] = []
    for key, hint in LEGACY_KEYS.items():
        if key in raw:
            found.append(
                ConfigIssue(source=source, key=key, message="unsupported section", hint=hint)
            )
    if found:
        return found
    checked = raw
    for section, legacy in schema.deprecated_sections.items():
        body = raw.get(section)
        if not isinstance(body, dict):
            continue
        old = {k: body[k] for (s, k) in schema.deprecated_keys if s == section and k in body}
        if old:  # checked under the names the file uses, the rest as usual
            _check_struct(source, section, old, legacy, found, schema)
            checked = {**checked, section: {k: v for k, v in body.items() if k not in old}}
    _check_body(source, "", checked, schema.fields(), found, schema)
    return found


def _move_deprecated(
    source: str, raw: dict[str, Any], issues: list[ConfigIssue], schema: _Schema
) -> tuple[dict[str, Any], list[ConfigDeprecation]]:
    """``raw`` with every deprecated key moved to its new place, and a finding for each; a
    key set under both spellings in one layer is an issue (which one wins would be a guess)."""
    found: list[ConfigDeprecation] = []
    out = dict(raw)
    for (section, key), (new_section, new_key) in schema.deprecated_keys.items():
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
    source: str,
    prefix: str,
    body: Any,
    cls: type[Any],
    found: list[ConfigIssue],
    schema: _Schema,
) -> None:
    """Check ``body`` against the record type ``cls`` key by key, so that every problem of a
    table is reported, not only the first one msgspec meets."""
    if not isinstance(body, dict):
        found.append(_convert_issue(source, prefix, body, cls, schema))
        return
    fields = {f.name: (f.type, f.required) for f in msgspec.structs.fields(cls)}
    _check_body(source, prefix, body, fields, found, schema)


def _check_body(
    source: str,
    prefix: str,
    body: dict[str, Any],
    fields: dict[str, tuple[Any, bool]],
    found: list[ConfigIssue],
    schema: _Schema,
) -> None:
    for key in body:
        if key not in fields:
            found.append(
                ConfigIssue(
                    source=source,
                    key=_join(prefix, key),
                    message="unknown key",
                    hint=_legacy_hint(prefix, schema) + "known keys here: " + ", ".join(fields),
                )
            )
    for name, (tp, required) in fields.items():
        key = _join(prefix, name)
        if name not in body:
            if required:
                found.append(ConfigIssue(source=source, key=key, message="missing required key"))
            continue
        value = body[name]
        nested = _struct_in(tp)
        table_of = _table_of(tp)
        if nested is not None and isinstance(value, dict):
            _check_struct(source, key, value, nested, found, schema)
        elif (array_of := _array_of(tp)) is not None and isinstance(value, list):
            for index, entry_body in enumerate(value):  # [[section.key]] arrays of tables
                _check_struct(source, f"{key}[{index}]", entry_body, array_of, found, schema)
        elif table_of is not None:
            if not isinstance(value, dict):
                found.append(ConfigIssue(source=source, key=key, message="must be a table"))
                continue
            for entry, entry_body in value.items():
                _check_struct(source, _join(key, str(entry)), entry_body, table_of, found, schema)
        else:
            issue = _convert_issue(source, key, value, tp, schema)
            if issue.message:
                found.append(issue)


def _legacy_hint(prefix: str, schema: _Schema) -> str:
    """What a section held in other Lemon versions, before the known keys ("" if nothing)."""
    section = schema.sections.get(prefix)
    hint = section.legacy_hint if section is not None else ""
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


def _convert_issue(source: str, key: str, value: Any, tp: Any, schema: _Schema) -> ConfigIssue:
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
            hint = schema.hints.get(re.sub(r"\[\d+\]", "[]", key), "")
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
    return issues


def _widening_checks(
    layers: list[tuple[str, dict[str, Any]]], schema: _Schema, *, home_source: str
) -> list[ConfigIssue]:
    """Keys only the home config may set (a section's ``home_only``: they widen what tools
    reach, and a project's ``.lemon/config.toml`` comes with the code being worked on)."""
    paths = [(name, *key.split(".")) for name, s in schema.sections.items() for key in s.home_only]
    issues: list[ConfigIssue] = []
    for source, raw in layers:
        if source == home_source:
            continue
        for path in paths:
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
