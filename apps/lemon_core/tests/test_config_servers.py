"""``[store]`` and ``[bus]``: validated with clear errors, addresses resolved from the file or a
variable, passwords never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from lemon_core.config import (
    ConfigError,
    load_config,
    redact_url,
    resolve_bus_url,
    resolve_store_dsn,
)


def load(tmp_path: Path, text: str) -> object:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(text, encoding="utf-8")
    return load_config(home=home, cwd=tmp_path, environ={})


def issues(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, text)
    return [f"{i.key}: {i.message} {i.hint}" for i in caught.value.issues]


def test_defaults_are_sqlite_and_the_local_bus(tmp_path: Path) -> None:
    config = load_config(home=tmp_path / "none", cwd=tmp_path, environ={}).config
    assert (config.store.backend, config.store.schema, config.bus.backend) == (
        "sqlite",
        "lemon",
        "local",
    )


def test_postgres_and_redis_with_addresses_load(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        '[store]\nbackend = "postgres"\ndsn = "postgresql://postgres@127.0.0.1:5432/test"\n'
        'schema = "team_a"\n[bus]\nbackend = "redis"\nurl_env = "LEMON_REDIS_URL"\n',
    )
    config = loaded.config  # type: ignore[attr-defined]  # load() returns LoadedConfig
    assert resolve_store_dsn(config.store, {}) == "postgresql://postgres@127.0.0.1:5432/test"
    assert resolve_bus_url(config.bus, {"LEMON_REDIS_URL": "redis://h:6379/1"}) == (
        "redis://h:6379/1"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[store]\nbackend = "postgres"\n', "store.dsn: backend = 'postgres' needs dsn or dsn_env"),
        (
            '[store]\nbackend = "mysql"\n',
            "store.backend: Invalid enum value 'mysql' one of sqlite, postgres, memory",
        ),
        ('[store]\ndsn = "postgresql://h/db"\n', "store.dsn: only used with backend = 'postgres'"),
        (
            '[store]\nbackend = "postgres"\ndsn = "mysql://h/db"\n',
            "store.dsn: mysql://h/db: must be a postgresql:// or postgres:// URL",
        ),
        (
            '[store]\nbackend = "postgres"\ndsn = "postgresql://h/db"\ndsn_env = "X"\n',
            "store.dsn: set dsn or dsn_env, not both",
        ),
        (
            '[store]\nbackend = "postgres"\ndsn_env = "postgresql://h/db"\n',
            "store.dsn_env: 'postgresql://h/db' is not a variable name",
        ),
        ('[store]\nschema = "Bad-Name"\n', "store.schema: 'Bad-Name' is not a usable schema"),
        ('[store]\nschema = "pg_x"\n', "store.schema: 'pg_x' is not a usable schema"),
        ("[store]\ntimeout_s = 0\n", "store.timeout_s: Expected `float` >"),
        ('[bus]\nbackend = "redis"\n', "bus.url: backend = 'redis' needs url or url_env"),
        (
            '[bus]\nbackend = "redis"\nurl = "http://127.0.0.1:6379"\n',
            "bus.url: http://127.0.0.1:6379: must be a redis:// or rediss:// or unix:// URL",
        ),
        (
            '[bus]\nbackend = "redis"\nurl = "redis://127.0.0.1:99999"\n',
            "bus.url: redis://127.0.0.1:99999: has a bad port",
        ),
        ('[bus]\nurl = "redis://h"\n', "bus.url: only used with backend = 'redis'"),
        ('[bus]\nbackend = "redis"\nuri = "redis://h"\n', "bus.uri: unknown key"),
    ],
)
def test_bad_store_and_bus_sections_are_clear_errors(
    tmp_path: Path, text: str, expected: str
) -> None:
    found = issues(tmp_path, text)
    assert any(line.startswith(expected) for line in found), found


def test_a_password_never_appears_in_an_error(tmp_path: Path) -> None:
    found = issues(tmp_path, '[store]\nbackend = "postgres"\ndsn = "mysql://u:hunter2@h/db"\n')
    assert found
    assert not any("hunter2" in line for line in found)
    assert redact_url("postgresql://u:hunter2@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redact_url("redis://h:6379/0") == "redis://h:6379/0"


def test_a_missing_variable_is_named_in_the_error(tmp_path: Path) -> None:
    loaded = load(tmp_path, '[store]\nbackend = "postgres"\ndsn_env = "LEMON_PG"\n')
    config = loaded.config  # type: ignore[attr-defined]  # load() returns LoadedConfig
    with pytest.raises(ConfigError, match="the variable LEMON_PG is not set"):
        resolve_store_dsn(config.store, {})
    with pytest.raises(ConfigError, match="must be a postgresql://"):
        resolve_store_dsn(config.store, {"LEMON_PG": "redis://h"})
