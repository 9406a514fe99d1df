"""The ``[store]`` and ``[bus]`` sections: cross-checks, and resolving the server addresses.

A PostgreSQL DSN or a Redis URL may hold a password, so each may come from a variable
(``dsn_env`` / ``url_env``) instead of the file, and :func:`redact_url` is the only form of one
that goes into a message or a log.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final
from urllib.parse import urlsplit, urlunsplit

from lemon_core.config._schema import BusConfig, Config, StoreConfig

__all__ = [
    "POSTGRES_SCHEMES",
    "REDIS_SCHEMES",
    "check_servers",
    "redact_url",
    "resolve_bus_url",
    "resolve_store_dsn",
]

#: URL schemes a ``[store] dsn`` may use.
POSTGRES_SCHEMES: Final = ("postgresql", "postgres")
#: URL schemes a ``[bus] url`` may use.
REDIS_SCHEMES: Final = ("redis", "rediss", "unix")
_SCHEMA_RE: Final = re.compile(r"^[a-z_][a-z0-9_]{0,47}$")
_VAR_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (what messages and logs show)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable url>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _check_url(url: str, schemes: tuple[str, ...], example: str) -> str | None:
    """The problem with ``url`` (None when it is a URL of one of ``schemes``)."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        return f"not a URL ({exc}); e.g. {example!r}"
    if parts.scheme not in schemes:
        return f"must be a {' or '.join(s + '://' for s in schemes)} URL, e.g. {example!r}"
    if parts.scheme != "unix" and not parts.hostname:
        return f"names no host; e.g. {example!r}"
    try:
        _ = parts.port  # reading it validates it
    except ValueError as exc:
        return f"has a bad port ({exc})"
    return None


_PG_EXAMPLE: Final = "postgresql://postgres@127.0.0.1:5432/lemon"
_REDIS_EXAMPLE: Final = "redis://127.0.0.1:6379/0"


def _pair_issues(
    section: str,
    backend: str,
    wanted: str,
    direct: tuple[str, str | None],
    env: tuple[str, str | None],
    schemes: tuple[str, ...],
    example: str,
) -> list[tuple[str, str, str]]:
    """(key, message, hint) for a ``<direct> | <env>`` pair of a section."""
    found: list[tuple[str, str, str]] = []
    (dkey, dval), (ekey, evalue) = direct, env
    if backend != wanted:
        for key, value in (direct, env):
            if value is not None:
                found.append(
                    (
                        f"{section}.{key}",
                        f"only used with backend = {wanted!r} (backend is {backend!r})",
                        f'remove it or set backend = "{wanted}"',
                    )
                )
        return found
    if dval is None and evalue is None:
        found.append(
            (
                f"{section}.{dkey}",
                f"backend = {wanted!r} needs {dkey} or {ekey}",
                f'e.g. {dkey} = "{example}" or {ekey} = "NAME_OF_A_VARIABLE"',
            )
        )
    elif dval is not None and evalue is not None:
        found.append((f"{section}.{dkey}", f"set {dkey} or {ekey}, not both", ""))
    if dval is not None:
        problem = _check_url(dval, schemes, example)
        if problem is not None:
            found.append((f"{section}.{dkey}", f"{redact_url(dval)}: {problem}", ""))
    if evalue is not None and not _VAR_RE.match(evalue):
        found.append(
            (
                f"{section}.{ekey}",
                f"{evalue!r} is not a variable name",
                "the NAME of the variable that holds the address, never the address itself",
            )
        )
    return found


def check_servers(config: Config) -> list[tuple[str, str, str]]:
    """Problems of ``[store]`` and ``[bus]`` as ``(dotted key, message, hint)``."""
    store, bus = config.store, config.bus
    found: list[tuple[str, str, str]] = []
    if not _SCHEMA_RE.match(store.schema) or store.schema.startswith("pg_"):
        found.append(
            (
                "store.schema",
                f"{store.schema!r} is not a usable schema name",
                "1-48 characters of a-z, 0-9 and '_', starting with a letter or '_', not 'pg_'",
            )
        )
    found += _pair_issues(
        "store",
        store.backend,
        "postgres",
        ("dsn", store.dsn),
        ("dsn_env", store.dsn_env),
        POSTGRES_SCHEMES,
        _PG_EXAMPLE,
    )
    found += _pair_issues(
        "bus",
        bus.backend,
        "redis",
        ("url", bus.url),
        ("url_env", bus.url_env),
        REDIS_SCHEMES,
        _REDIS_EXAMPLE,
    )
    return found


def _resolve(
    section: str,
    direct_key: str,
    direct: str | None,
    env_key: str,
    env_name: str | None,
    environ: Mapping[str, str],
    schemes: tuple[str, ...],
    example: str,
) -> str:
    from lemon_core.config._loader import ConfigError, ConfigIssue

    if direct is not None:
        return direct
    if env_name is None:
        raise ConfigError(
            [
                ConfigIssue(
                    source="config",
                    key=f"{section}.{direct_key}",
                    message=f"no {direct_key} or {env_key} is set",
                )
            ]
        )
    value = environ.get(env_name, "").strip()
    if not value:
        raise ConfigError(
            [
                ConfigIssue(
                    source=env_name,
                    key=f"{section}.{env_key}",
                    message=f"the variable {env_name} is not set (or empty)",
                    hint=f"export {env_name}={example}",
                )
            ]
        )
    problem = _check_url(value, schemes, example)
    if problem is not None:
        raise ConfigError(
            [
                ConfigIssue(
                    source=env_name,
                    key=f"{section}.{env_key}",
                    message=f"{redact_url(value)}: {problem}",
                )
            ]
        )
    return value


def resolve_store_dsn(store: StoreConfig, environ: Mapping[str, str]) -> str:
    """The PostgreSQL DSN of ``[store]`` (from ``dsn`` or the variable ``dsn_env`` names);
    a ``ConfigError`` when it is missing or not a postgresql:// URL."""
    return _resolve(
        "store",
        "dsn",
        store.dsn,
        "dsn_env",
        store.dsn_env,
        environ,
        POSTGRES_SCHEMES,
        _PG_EXAMPLE,
    )


def resolve_bus_url(bus: BusConfig, environ: Mapping[str, str]) -> str:
    """The Redis URL of ``[bus]`` (from ``url`` or the variable ``url_env`` names); a
    ``ConfigError`` when it is missing or not a redis:// URL."""
    return _resolve(
        "bus", "url", bus.url, "url_env", bus.url_env, environ, REDIS_SCHEMES, _REDIS_EXAMPLE
    )
