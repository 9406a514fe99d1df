"""``[tools.bash]``: which of the daemon's secret variables the tools may still see; set only
by the home config, names checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from coding_agent import BashToolConfig, ToolsConfig
from lemon_core.config import ConfigError, load_config


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_tools_default_to_passing_no_secret_variable(tmp_path: Path) -> None:
    loaded = load_config(home=tmp_path / "home", cwd=tmp_path, environ={})
    assert loaded.section(ToolsConfig) == ToolsConfig()
    assert loaded.section(ToolsConfig).bash == BashToolConfig(pass_env=())


def test_the_home_config_names_variables_bash_may_see(tmp_path: Path) -> None:
    write(
        tmp_path / "home" / "config.toml",
        '[tools.bash]\npass_env = ["GITHUB_TOKEN", "NPM_TOKEN"]\n',
    )
    loaded = load_config(home=tmp_path / "home", cwd=tmp_path, environ={})
    assert loaded.section(ToolsConfig).bash.pass_env == ("GITHUB_TOKEN", "NPM_TOKEN")


def test_a_pass_env_entry_must_be_a_variable_name(tmp_path: Path) -> None:
    write(tmp_path / "home" / "config.toml", '[tools.bash]\npass_env = ["ghp_abc=123"]\n')
    with pytest.raises(ConfigError) as info:
        load_config(home=tmp_path / "home", cwd=tmp_path, environ={})
    (issue,) = info.value.issues
    assert issue.key == "tools.bash.pass_env"
    assert "the NAME of an environment variable" in issue.hint


def test_a_project_config_may_not_pass_secrets_to_bash(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    write(project / ".lemon" / "config.toml", '[tools.bash]\npass_env = ["OPENAI_API_KEY"]\n')
    with pytest.raises(ConfigError) as info:
        load_config(home=tmp_path / "home", cwd=project, environ={})
    (issue,) = info.value.issues
    assert issue.key == "tools.bash.pass_env"
    assert ".lemon" in issue.source
    assert "only the home config" in issue.message


def test_the_old_tools_section_is_still_refused_with_where_the_policy_went(tmp_path: Path) -> None:
    write(tmp_path / "home" / "config.toml", '[tools]\nallow = ["bash"]\n')
    with pytest.raises(ConfigError) as info:
        load_config(home=tmp_path / "home", cwd=tmp_path, environ={})
    (issue,) = info.value.issues
    assert issue.key == "tools.allow"
    assert "[profiles.<agent_id>.tool_policy]" in issue.hint
