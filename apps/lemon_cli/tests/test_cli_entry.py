from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

import lemon_cli
from lemon_cli.main import app


def test_all_names_are_defined() -> None:
    for name in lemon_cli.__all__:
        assert hasattr(lemon_cli, name)
    assert sorted(lemon_cli.__all__) == lemon_cli.__all__


def test_no_arguments_prints_help_and_status(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [], env={"LEMON_HOME": str(tmp_path / "home")})
    assert result.exit_code == 0
    assert "quality" in result.output
    assert str(tmp_path / "home") in result.output
    assert "none found" in result.output


def test_status_reports_a_config_that_exists(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[defaults]\n")
    result = CliRunner().invoke(app, ["status"], env={"LEMON_HOME": str(tmp_path)})
    assert result.exit_code == 0
    assert "none found" not in result.output
    assert "config.toml" in result.output


def test_console_script_runs_as_a_subprocess() -> None:
    exe = Path(sys.executable).with_name("lemon")
    proc = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "architecture" in proc.stdout


def test_config_validate_lists_each_problem_and_fails(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[gateway]\nfoo = 1\n[defaults]\nmodel = "x"\n')
    result = CliRunner().invoke(
        app, ["config", "validate"], env={"LEMON_HOME": str(tmp_path), "LEMON_MODEL": ""}
    )
    assert result.exit_code == 1
    assert "gateway.foo: unknown key" in result.output


def test_config_validate_warns_of_a_deprecated_key_with_its_new_spelling_and_passes(
    tmp_path: Path,
) -> None:
    (tmp_path / "config.toml").write_text(
        '[gateway]\ningress_enabled = true\n[[gateway.webhooks]]\nid = "ci"\nsecret_env = "S"\n'
    )
    result = CliRunner().invoke(
        app, ["config", "validate"], env={"LEMON_HOME": str(tmp_path), "LEMON_MODEL": ""}
    )
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # the console wraps long lines
    assert text.count("warning ") == 3, result.output  # two keys, and the endpoint's secret
    assert "its secret variable S is not set" in text
    assert "gateway.ingress_enabled: deprecated, still read; use webhooks.enabled" in text
    assert "gateway.webhooks: deprecated, still read; use webhooks.endpoints" in text
    assert "config ok" in text


def test_config_show_prints_the_effective_config(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[gateway]\nmax_concurrent_runs = 5\n")
    result = CliRunner().invoke(
        app, ["config", "show"], env={"LEMON_HOME": str(tmp_path), "LEMON_MODEL": "offline:x"}
    )
    assert result.exit_code == 0, result.output
    assert '"max_concurrent_runs": 5' in result.output
    assert '"model": "offline:x"' in result.output


def test_status_shows_an_invalid_config_without_crashing(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[gateway\n")
    result = CliRunner().invoke(app, [], env={"LEMON_HOME": str(tmp_path)})
    assert result.exit_code == 0
    assert "invalid" in result.output
    assert "not valid TOML" in result.output


def test_events_docs_check_reports_the_committed_catalog_current() -> None:
    root = Path(__file__).resolve().parents[3]
    result = CliRunner().invoke(
        app, ["events", "docs", "--check", "--path", str(root / "docs" / "bus_events.md")]
    )
    assert result.exit_code == 0, result.output


def test_config_built_in_providers_are_the_catalogue_providers() -> None:
    from lemon_ai.models import default_catalogue
    from lemon_core.config import BUILTIN_PROVIDERS

    assert set(default_catalogue().providers()) == set(BUILTIN_PROVIDERS)


def test_config_errors_keep_their_brackets_and_model_names_stay_text(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[defaults]\nmodel = "ghost:m"\n')
    result = CliRunner().invoke(
        app, ["config", "validate"], env={"LEMON_HOME": str(tmp_path), "LEMON_MODEL": ""}
    )
    assert result.exit_code == 1
    assert "add [providers.ghost]" in result.output

    (tmp_path / "config.toml").write_text(
        '[defaults]\nmodel = "local:llama"\n'
        '[providers.local]\nkind = "openai_completions"\nbase_url = "http://127.0.0.1:9/v1"\n'
    )
    result = CliRunner().invoke(app, ["status"], env={"LEMON_HOME": str(tmp_path)})
    assert result.exit_code == 0
    assert "local:llama" in result.output


def test_tui_without_a_daemon_on_an_unusable_home_says_what_is_wrong(tmp_path: Path) -> None:
    # Without a daemon the UI hosts the runtime itself (test_cli_tui_pty.py): on this home.
    home = tmp_path / "a-file"
    home.write_text("")
    result = CliRunner().invoke(app, ["tui"], env={"LEMON_HOME": str(home)})
    assert result.exit_code == 2
    assert "it is a file, not a directory" in result.output
    assert "Traceback" not in result.output


def test_tui_refuses_a_url_that_is_not_a_websocket(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["tui", "--url", "http://127.0.0.1:1"], env={"LEMON_HOME": str(tmp_path)}
    )
    assert result.exit_code == 2
    assert "ws://HOST:PORT/ws" in result.output


def test_tui_refuses_a_bad_session_key(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["tui", "--session", "not a key"], env={"LEMON_HOME": str(tmp_path)}
    )
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_tui_refuses_an_unknown_theme(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["tui", "--theme", "sepia"], env={"LEMON_HOME": str(tmp_path)})
    assert result.exit_code == 2
    assert "use light or dark" in result.output
    assert "Traceback" not in result.output


def test_tui_is_listed_in_help() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert "tui" in result.output


def test_config_show_redacts_the_store_dsn_password_and_url_userinfo(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        '[store]\nbackend = "postgres"\n'
        'dsn = "postgresql://lemon:hunter2@db.internal:5432/lemon?sslpassword=pem-pass"\n'
        '[bus]\nbackend = "redis"\nurl = "redis://:redis-pw@cache:6379/0"\n'
        '[providers.corp]\nkind = "openai_completions"\n'
        'base_url = "https://ghp_tokenasusername@llm.example/v1"\n'
    )
    result = CliRunner().invoke(
        app, ["config", "show"], env={"LEMON_HOME": str(tmp_path), "LEMON_MODEL": "offline:x"}
    )
    assert result.exit_code == 0, result.output
    for secret in ("hunter2", "pem-pass", "redis-pw", "ghp_tokenasusername", "lemon:"):
        assert secret not in result.output, secret
    assert '"dsn": "postgresql://***@db.internal:5432/lemon?sslpassword=***"' in result.output
    assert '"url": "redis://***@cache:6379/0"' in result.output
    assert '"base_url": "https://***@llm.example/v1"' in result.output
