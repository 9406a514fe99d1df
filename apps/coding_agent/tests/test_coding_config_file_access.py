"""``[file_access]``: extra secret patterns anywhere; exemptions only from the home config."""

from __future__ import annotations

from pathlib import Path

import pytest

from coding_agent import FileAccessConfig
from lemon_core.config import ConfigError, load_config


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_file_access_defaults_to_no_extra_patterns(tmp_path: Path) -> None:
    loaded = load_config(home=tmp_path / "home", cwd=tmp_path, environ={})
    assert loaded.section(FileAccessConfig) == FileAccessConfig()


def test_the_home_config_sets_patterns_and_exemptions(tmp_path: Path) -> None:
    write(
        tmp_path / "home" / "config.toml",
        '[file_access]\nsecret_patterns = ["*.secret"]\nallow_secrets = ["tests/fixtures/*.pem"]\n',
    )
    access = load_config(home=tmp_path / "home", cwd=tmp_path, environ={}).section(FileAccessConfig)
    assert access.secret_patterns == ("*.secret",)
    assert access.allow_secrets == ("tests/fixtures/*.pem",)


def test_a_project_config_may_add_patterns_but_never_exempt_secrets(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    write(project / ".lemon" / "config.toml", '[file_access]\nsecret_patterns = ["*.vault"]\n')
    loaded = load_config(home=tmp_path / "home", cwd=project, environ={})
    assert loaded.section(FileAccessConfig).secret_patterns == ("*.vault",)

    write(project / ".lemon" / "config.toml", '[file_access]\nallow_secrets = [".env"]\n')
    with pytest.raises(ConfigError) as info:
        load_config(home=tmp_path / "home", cwd=project, environ={})
    (issue,) = info.value.issues
    assert issue.key == "file_access.allow_secrets"
    assert issue.source.endswith("config.toml")
    assert ".lemon" in issue.source
    assert "only the home config" in issue.message


def test_unknown_file_access_keys_are_refused(tmp_path: Path) -> None:
    write(tmp_path / "home" / "config.toml", "[file_access]\nallow_everything = true\n")
    with pytest.raises(ConfigError, match=r"file_access\.allow_everything: unknown key"):
        load_config(home=tmp_path / "home", cwd=tmp_path, environ={})
