from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lemon_core.config import ConfigError, load_config


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "proj" / "sub"
    p.mkdir(parents=True)
    return p


def test_no_files_gives_defaults(home: Path, project: Path) -> None:
    loaded = load_config(home=home, cwd=project, environ={})
    assert loaded.config.defaults.model is None
    assert loaded.config.sections["gateway"].max_concurrent_runs == 2
    assert loaded.config.runtime.env == "dev"
    assert loaded.sources == ()


def test_project_file_overrides_home_and_environment_overrides_both(
    home: Path, project: Path
) -> None:
    write(
        home / "config.toml",
        '[gateway]\nmax_concurrent_runs = 4\n[defaults]\nmodel = "offline:a"\n'
        '[providers.local]\nkind = "openai_completions"\nbase_url = "http://127.0.0.1:1/v1"\n',
    )
    proj_cfg = write(project.parent / ".lemon" / "config.toml", '[defaults]\nmodel = "local:b"\n')
    loaded = load_config(home=home, cwd=project, environ={})
    assert loaded.config.defaults.model == "local:b"
    assert loaded.config.sections["gateway"].max_concurrent_runs == 4
    assert loaded.sources == (str(home / "config.toml"), str(proj_cfg))

    loaded = load_config(
        home=home,
        cwd=project,
        environ={"LEMON_MODEL": "offline:c", "LEMON_MAX_CONCURRENT_RUNS": "7", "LEMON_ENV": "prod"},
    )
    assert loaded.config.defaults.model == "offline:c"
    assert loaded.config.sections["gateway"].max_concurrent_runs == 7
    assert loaded.config.runtime.env == "prod"
    assert loaded.sources[-1] == "environment"


def test_a_home_that_is_a_file_has_no_config_file(tmp_path: Path, project: Path) -> None:
    # the home itself being unusable is for the commands that keep state there to report
    blocker = write(tmp_path / "a-file", "not a directory\n")
    for home in (blocker, blocker / "lemon"):
        loaded = load_config(home=home, cwd=project, environ={})
        assert loaded.sources == ()


def test_lemon_home_comes_from_the_environment(tmp_path: Path, project: Path) -> None:
    write(tmp_path / "elsewhere" / "config.toml", "[gateway]\nmax_concurrent_runs = 3\n")
    loaded = load_config(cwd=project, environ={"LEMON_HOME": str(tmp_path / "elsewhere")})
    assert loaded.home == tmp_path / "elsewhere"
    assert loaded.config.sections["gateway"].max_concurrent_runs == 3


@pytest.mark.parametrize(
    ("body", "key", "fragment"),
    [
        ("[gateway]\nfoo = 1\n", "gateway.foo", "unknown key"),
        ('[gateway]\nmax_concurrent_runs = "x"\n', "gateway.max_concurrent_runs", "Expected `int`"),
        ("[gateway]\nmax_concurrent_runs = 0\n", "gateway.max_concurrent_runs", ">= 1"),
        ('[providers.x]\nkind = "openai_completion"\n', "providers.x.kind", "Invalid enum"),
        ('[providers.x]\nkind = "offline"\nbogus = 1\n', "providers.x.bogus", "unknown key"),
        ("[profiles.a.tool_policy]\nallw = []\n", "profiles.a.tool_policy.allw", "unknown key"),
        ("[agents.x]\nname = 'a'\n", "agents", "unsupported section"),
        ('[defaults]\nmodel = "gpt-4o"\n', "defaults.model", "'<provider>:<model>'"),
        ('[defaults]\nmodel = "nope:m"\n', "defaults.model", "not configured"),
        ('[providers.o]\nkind = "openai_completions"\n', "providers.o.base_url", "needs base_url"),
    ],
)
def test_bad_config_names_file_key_and_problem(
    home: Path, project: Path, body: str, key: str, fragment: str
) -> None:
    cfg = write(home / "config.toml", body)
    with pytest.raises(ConfigError) as info:
        load_config(home=home, cwd=project, environ={})
    [issue] = info.value.issues
    assert issue.source == str(cfg)
    assert issue.key == key
    assert fragment in issue.message
    assert str(cfg) in str(info.value)


def test_every_problem_in_every_layer_is_reported_together(home: Path, project: Path) -> None:
    home_cfg = write(home / "config.toml", "[gateway]\nfoo = 1\n")
    proj_cfg = write(project / ".lemon" / "config.toml", "[runtime]\nenv = 'staging'\n")
    with pytest.raises(ConfigError) as info:
        load_config(home=home, cwd=project, environ={"LEMON_MAX_CONCURRENT_RUNS": "many"})
    found = {(i.source, i.key) for i in info.value.issues}
    assert found == {
        ("LEMON_MAX_CONCURRENT_RUNS", ""),
        (str(home_cfg), "gateway.foo"),
        (str(proj_cfg), "runtime.env"),
    }


def test_broken_toml_is_reported_with_its_location(home: Path, project: Path) -> None:
    write(home / "config.toml", "[gateway\n")
    with pytest.raises(ConfigError, match=r"not valid TOML: .*line 1"):
        load_config(home=home, cwd=project, environ={})


def test_model_error_names_the_layer_that_set_it(home: Path, project: Path) -> None:
    write(home / "config.toml", '[defaults]\nmodel = "offline:x"\n')
    with pytest.raises(ConfigError) as info:
        load_config(home=home, cwd=project, environ={"LEMON_MODEL": "ghost:m"})
    [issue] = info.value.issues
    assert issue.source == "environment"
    assert "add [providers.ghost]" in issue.hint


@given(runs=st.integers(min_value=1, max_value=1024), model=st.sampled_from(["offline:a", None]))
def test_valid_values_round_trip_through_the_loader(runs: int, model: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home_dir = Path(tmp)
        body = f"[gateway]\nmax_concurrent_runs = {runs}\n"
        if model:
            body += f'[defaults]\nmodel = "{model}"\n'
        write(home_dir / "config.toml", body)
        loaded = load_config(home=home_dir, cwd=home_dir, environ={})
        assert loaded.config.sections["gateway"].max_concurrent_runs == runs
        assert loaded.config.defaults.model == model


def test_every_problem_of_one_table_is_reported(home: Path, project: Path) -> None:
    cfg = write(
        home / "config.toml",
        "[providers.p]\napi_key_env = 3\nbase_url = 5\ncolour = 'red'\n"
        "[gateway]\nmax_concurrent_runs = 0\ningress_enabled = 'yes'\n",
    )
    with pytest.raises(ConfigError) as info:
        load_config(home=home, cwd=project, environ={})
    found = {(i.key, i.message.split(",")[0]) for i in info.value.issues}
    assert found == {
        ("providers.p.colour", "unknown key"),
        ("providers.p.kind", "missing required key"),
        ("providers.p.api_key_env", "Expected `str | null`"),
        ("providers.p.base_url", "Expected `str | null`"),
        ("gateway.max_concurrent_runs", "Expected `int` >= 1"),
        ("gateway.ingress_enabled", "Expected `bool`"),
    }
    assert all(i.source == str(cfg) for i in info.value.issues)


@pytest.mark.parametrize("model", ["openai:gpt-4o-mini", "anthropic:claude-x", "ollama:llama3.2"])
def test_catalogue_providers_need_no_providers_section(
    home: Path, project: Path, model: str
) -> None:
    write(home / "config.toml", f'[defaults]\nmodel = "{model}"\n')
    assert load_config(home=home, cwd=project, environ={}).config.defaults.model == model
