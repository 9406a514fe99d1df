"""``lemon setup``, ``lemon doctor`` and ``lemon sessions`` through the Typer app."""

from __future__ import annotations

import json
import socket
import stat
import tomllib
from pathlib import Path

from typer.testing import CliRunner

from lemon_cli.main import app
from lemon_platform_test.providers import ScriptedProviderServer

SECRET = "sk-test-0123456789abcdef"


def run(args: list[str], home: Path, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(
        app, args, input=stdin, env={"LEMON_HOME": str(home), "LEMON_MODEL": ""}
    )
    return result.exit_code, result.output


def test_setup_writes_an_openai_compatible_provider_and_a_0600_secret(tmp_path: Path) -> None:
    home = tmp_path / "home"
    code, out = run(
        [
            "setup",
            "--kind", "openai_completions",
            "--name", "local",
            "--base-url", "http://127.0.0.1:9/v1",
            "--model", "qwen2.5-coder",
            "--key-store", "file",
            "--api-key-stdin",
        ],
        home,
        stdin=SECRET + "\n",
    )  # fmt: skip
    assert code == 0, out
    assert SECRET not in out  # never echoed
    config = tomllib.loads((home / "config.toml").read_text())
    assert config["defaults"]["model"] == "local:qwen2.5-coder"
    assert config["providers"]["local"] == {
        "kind": "openai_completions",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": "LOCAL_API_KEY",
    }
    secrets = home / "secrets.env"
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    assert secrets.read_text() == f"LOCAL_API_KEY={SECRET}\n"
    assert SECRET not in (home / "config.toml").read_text()
    code, out = run(["config", "validate"], home)
    assert code == 0, out


def test_setup_anthropic_with_the_key_left_in_the_environment(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home).mkdir()
    (home / "config.toml").write_text("[gateway]\nmax_concurrent_runs = 3\n")
    code, out = run(["setup", "--kind", "anthropic_messages", "--model", "claude-sonnet-4-5"], home)
    assert code == 0, out
    assert "export ANTHROPIC_API_KEY" in out
    config = tomllib.loads((home / "config.toml").read_text())
    assert config["gateway"]["max_concurrent_runs"] == 3  # the rest is kept
    assert config["defaults"]["model"] == "anthropic:claude-sonnet-4-5"
    assert config["providers"]["anthropic"]["kind"] == "anthropic_messages"
    assert not (home / "secrets.env").exists()


def test_setup_refuses_missing_flags_without_a_terminal(tmp_path: Path) -> None:
    code, out = run(["setup", "--kind", "openai_completions", "--model", "m"], tmp_path)
    assert code == 2
    assert "--base-url is required" in out
    code, out = run(["setup", "--kind", "gemini"], tmp_path)
    assert code == 2
    assert "openai_completions or anthropic_messages" in out


def test_doctor_reports_each_check_as_json(tmp_path: Path) -> None:
    code, out = run(["doctor", "--json"], tmp_path / "home")
    assert code == 0, out
    report = json.loads(out)
    names = [c["name"] for c in report["checks"]]
    assert names == ["config", "store", "executor", "provider", "bus", "memory", "web", "daemon"]
    by_name = {c["name"]: c for c in report["checks"]}
    assert by_name["executor"]["status"] == "ok"
    assert "coding_agent" in by_name["executor"]["detail"]
    assert "offline" in by_name["provider"]["detail"]


def test_doctor_lists_config_problems_and_fails(tmp_path: Path) -> None:
    tmp_path.joinpath("config.toml").write_text("[gateway]\nbogus = 1\n")
    code, out = run(["doctor", "--json"], tmp_path)
    assert code == 1
    report = json.loads(out)
    assert report["checks"][0]["status"] == "fail"
    assert "gateway.bogus" in report["checks"][0]["detail"]


def test_doctor_probes_an_http_provider(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    config = (
        '[defaults]\nmodel = "local:m"\n[providers.local]\nkind = "openai_completions"\n'
        'base_url = "{url}"\n'
    )
    (home / "config.toml").write_text(config.format(url=scripted_provider.openai_base_url))
    code, out = run(["doctor", "--json"], home)
    assert code == 0, out
    provider = json.loads(out)["checks"][3]
    assert provider["status"] == "ok"
    assert "answered HTTP" in provider["detail"]

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    (home / "config.toml").write_text(config.format(url=f"http://127.0.0.1:{closed}/v1"))
    code, out = run(["doctor", "--json"], home)
    assert code == 1
    provider = json.loads(out)["checks"][3]
    assert provider["status"] == "fail"
    assert "unreachable" in provider["detail"]


def test_sessions_list_and_show_after_a_chat(tmp_path: Path) -> None:
    home = tmp_path / "home"
    code, out = run(["sessions", "list"], home)
    assert code == 0
    assert "no sessions yet" in out
    code, out = run(["chat", "/echo first words"], home)
    assert code == 0, out
    assert "first words" in out
    code, out = run(["sessions", "list", "--json"], home)
    rows = json.loads(out)
    # The default session is the working directory's own.
    assert rows[0]["session_key"].startswith("agent:default:main:sub:cwd-")
    assert rows[0]["runs"] == 1
    code, out = run(["sessions", "show"], home)
    assert code == 0, out
    assert "you: /echo first words" in out
    assert "lemon: first words" in out
    code, out = run(["sessions", "show", "agent:default:other"], home)
    assert code == 1


def test_doctor_probes_a_catalogue_provider_with_no_section(tmp_path: Path) -> None:
    # `model = "ollama:llama3.2"` needs no [providers] section: doctor resolves it the way a
    # run does (the catalogue's local Ollama URL) and probes it; nothing listens there here.
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[defaults]\nmodel = "ollama:llama3.2"\n')
    code, out = run(["doctor", "--json"], home)
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    provider = checks["provider"]
    assert "127.0.0.1:11434" in provider["detail"] or "localhost:11434" in provider["detail"]
    assert provider["status"] == "fail"  # unreachable, said plainly
    assert code == 1
