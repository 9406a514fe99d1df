"""``[channels.telegram]``: defaults, and a clear error for each mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from lemon_channels import ChannelsConfig
from lemon_core.config import ConfigError, load_config


def load(tmp_path: Path, body: str) -> object:
    (tmp_path / "config.toml").write_text(body)
    return load_config(home=tmp_path, cwd=tmp_path, environ={})


def issues(tmp_path: Path, body: str) -> dict[str, str]:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, body)
    return {i.key: f"{i.message} ({i.hint})" for i in caught.value.issues}


def test_no_section_means_no_channel(tmp_path: Path) -> None:
    loaded = load_config(home=tmp_path, cwd=tmp_path, environ={})
    assert loaded.section(ChannelsConfig).telegram is None


def test_a_minimal_section_takes_the_defaults(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[channels.telegram]\nallowed_users = [12345]\n")
    telegram = load_config(home=tmp_path, cwd=tmp_path, environ={}).section(ChannelsConfig).telegram
    assert telegram is not None
    assert telegram.token_env == "TELEGRAM_BOT_TOKEN"
    assert telegram.api_base_url == "https://api.telegram.org"
    assert telegram.mode == "polling"
    assert telegram.allowed_users == (12345,)


def test_a_token_instead_of_its_variable_name_is_refused(tmp_path: Path) -> None:
    found = issues(tmp_path, '[channels.telegram]\ntoken_env = "123:ABC-secret"\n')
    assert "not a variable name" in found["channels.telegram.token_env"]
    assert "never the secret itself" in found["channels.telegram.token_env"]


def test_webhook_mode_needs_an_https_url_and_a_secret(tmp_path: Path) -> None:
    found = issues(
        tmp_path, '[channels.telegram]\nmode = "webhook"\nwebhook_url = "http://x.org"\n'
    )
    assert "https URL" in found["channels.telegram.webhook_url"]
    assert "secret" in found["channels.telegram.webhook_secret_env"]


def test_bad_values_and_unknown_keys_are_named(tmp_path: Path) -> None:
    found = issues(
        tmp_path,
        '[channels.telegram]\nallowed_users = [0]\napi_base_url = "api.telegram.org"\n',
    )
    assert "positive integers" in found["channels.telegram.allowed_users"]
    assert "http(s) URL" in found["channels.telegram.api_base_url"]
    unknown = issues(tmp_path, "[channels.telegram]\nallowed_user = [1]\n")
    assert "unknown key" in unknown["channels.telegram.allowed_user"]
    mode = issues(tmp_path, '[channels.telegram]\nmode = "push"\n')
    assert "channels.telegram.mode" in mode
