"""``lemon mcp``: a project's server needs approval bound to its definition; a change lapses
it; ``tools`` starts a real server and lists what the model would see."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from lemon_cli.main import app

SCRIPTED = Path(__file__).parents[2] / "lemon_mcp" / "tests" / "servers" / "scripted_mcp_server.py"


def _server(mode: str = "ok") -> str:
    return f'[mcp.servers.proj]\ncommand = "{sys.executable}"\nargs = ["{SCRIPTED}", "{mode}"]\n'


def _lemon(home: Path, cwd: Path, *args: str) -> Result:
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(app, ["mcp", *args], env={"LEMON_HOME": str(home)})
    finally:
        os.chdir(old)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    home, work = tmp_path / "home", tmp_path / "work"
    (work / ".lemon").mkdir(parents=True)
    home.mkdir()
    (home / "config.toml").write_text("", encoding="utf-8")
    (work / ".lemon" / "config.toml").write_text(_server(), encoding="utf-8")
    return home, work


def _state(home: Path, work: Path) -> str:
    result = _lemon(home, work, "list", "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["servers"]
    return str(row["state"])


def test_a_project_server_needs_approval_and_a_change_lapses_it(dirs: tuple[Path, Path]) -> None:
    home, work = dirs
    assert _state(home, work).startswith("needs approval")
    approved = _lemon(home, work, "approve", "proj")
    assert approved.exit_code == 0, approved.output
    assert "scripted_mcp_server.py ok" in approved.output  # says what it approved
    assert _state(home, work) == "ready to start"
    (work / ".lemon" / "config.toml").write_text(_server("pages"), encoding="utf-8")
    assert _state(home, work).startswith("needs approval")
    assert (home / "mcp" / "approvals.json").stat().st_mode & 0o777 == 0o600


def test_revoke_withdraws_the_approval(dirs: tuple[Path, Path]) -> None:
    home, work = dirs
    _lemon(home, work, "approve", "proj")
    assert _lemon(home, work, "revoke", "proj").exit_code == 0
    assert _state(home, work).startswith("needs approval")
    again = _lemon(home, work, "revoke", "proj")
    assert again.exit_code == 1
    assert "was not approved" in again.output


def test_tools_lists_what_the_model_sees_once_approved(dirs: tuple[Path, Path]) -> None:
    home, work = dirs
    refused = _lemon(home, work, "tools", "proj")
    assert refused.exit_code == 1
    assert "lemon mcp approve proj" in refused.output
    _lemon(home, work, "approve", "proj")
    listed = _lemon(home, work, "tools", "proj")
    assert listed.exit_code == 0, listed.output
    assert "mcp_proj_echo  approval=ask" in listed.output
    assert "mcp_proj_add" in listed.output


def test_a_home_server_needs_no_approval(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(_server(), encoding="utf-8")
    assert _state(home, work) == "ready to start"
    result = _lemon(home, work, "approve", "proj")
    assert result.exit_code == 1
    assert "needs no approval" in result.output


def test_a_bad_section_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text('[mcp.servers.x]\nurl = "ftp://nope"\n', encoding="utf-8")
    result = _lemon(home, work, "list")
    assert result.exit_code == 2
    assert "http:// or https://" in result.output
    assert "Traceback" not in result.output


def test_test_starts_lists_pings_and_stops_with_timings(dirs: tuple[Path, Path]) -> None:
    home, work = dirs
    assert _lemon(home, work, "test", "proj").exit_code == 1  # not approved yet
    _lemon(home, work, "approve", "proj")
    result = _lemon(home, work, "test", "proj")
    assert result.exit_code == 0, result.output
    for step in ("start (initialize): ", "tools/list (2 tools): ", "ping: ", "stop: "):
        assert step in result.output


SDK = Path(__file__).parents[2] / "lemon_mcp" / "tests" / "servers" / "sdk_mcp_server.py"
OAUTH = Path(__file__).parents[2] / "lemon_mcp" / "tests" / "servers" / "oauth_mcp_server.py"


def _root(home: Path, cwd: Path, *args: str) -> Result:
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(app, list(args), env={"LEMON_HOME": str(home)})
    finally:
        os.chdir(old)


def test_tools_all_lists_resources_and_prompts_too(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(
        f'[mcp.servers.sdk]\ncommand = "{sys.executable}"\nargs = ["{SDK}", "stdio", "extras"]\n',
        encoding="utf-8",
    )
    result = _lemon(home, work, "tools", "sdk", "--all")
    assert result.exit_code == 0, result.output
    assert "tool echo: Echo the text back." in result.output
    assert "resource note://readme (readme): A short note." in result.output
    assert "prompt greet: Greet someone." in result.output


def test_doctor_reports_each_mcp_server_without_starting_it(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(
        f'[mcp.servers.ok]\ncommand = "{sys.executable}"\nargs = ["{SCRIPTED}"]\n'
        '[mcp.servers.gone]\ncommand = "no-such-mcp-server-here"\n'
        '[mcp.servers.env]\ncommand = "true"\nenv_from = { T = "MCP_TEST_UNSET_VAR" }\n'
        '[mcp.servers.web]\nurl = "https://example.com/mcp"\nauth = "oauth"\n',
        encoding="utf-8",
    )
    result = _root(home, work, "doctor", "--json")
    lines = {
        c["detail"].split(":")[0]: c
        for c in json.loads(result.output)["checks"]
        if c["name"] == "mcp"
    }
    assert lines["ok"]["status"] == "ok"
    assert "ready (starts on first use)" in lines["ok"]["detail"]
    assert lines["gone"]["status"] == "warn"
    assert "command 'no-such-mcp-server-here' not found" in lines["gone"]["detail"]
    assert "unset variable(s): MCP_TEST_UNSET_VAR" in lines["env"]["detail"]
    assert "run `lemon mcp login web`" in lines["web"]["detail"]


def test_logs_without_a_daemon_is_one_clear_line(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(_server(), encoding="utf-8")
    for args in (("logs", "proj"), ("status",)):
        result = _lemon(home, work, *args)
        assert result.exit_code == 1
        assert "no daemon runs" in result.output
        assert "Traceback" not in result.output


def test_login_and_logout_against_a_loopback_authorization_server(tmp_path: Path) -> None:
    import socket
    import subprocess
    import time

    import httpx

    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    (home / "config.toml").write_text(
        f'[mcp.servers.web]\nurl = "{base}/mcp"\nauth = "oauth"\n', encoding="utf-8"
    )
    server = subprocess.Popen(
        [sys.executable, str(OAUTH), str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.1)
        login = subprocess.Popen(
            [str(Path(sys.executable).with_name("lemon")), "mcp", "login", "web", "--no-browser",
             "--timeout", "60"],
            cwd=work, env={**os.environ, "LEMON_HOME": str(home)}, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert login.stderr is not None
        url = ""
        for line in login.stderr:  # "Open this URL to log in to web:" then the URL
            if line.startswith(f"{base}/authorize?"):
                url = line.strip()
                break
        assert url, "the login URL was not printed"
        with httpx.Client(follow_redirects=False) as http:  # the person's browser
            landed = http.get(http.get(url).headers["location"])
            assert "login is done" in landed.text
        out, _ = login.communicate(timeout=60)
        assert login.returncode == 0
        assert f"logged in to web (issuer {base})" in out
        assert (home / "mcp" / "tokens" / "web.json").stat().st_mode & 0o777 == 0o600
        logged_out = _lemon(home, work, "logout", "web")
        assert logged_out.exit_code == 0
        assert not (home / "mcp" / "tokens" / "web.json").exists()
        assert _lemon(home, work, "logout", "web").exit_code == 1
    finally:
        server.terminate()
        server.wait(10)


def test_conformance_client_refuses_bad_input_in_one_line(tmp_path: Path) -> None:
    cases = [
        ({}, ["conformance-client", "ftp://x"], "is not an http(s):// URL"),
        ({"MCP_CONFORMANCE_CONTEXT": "{no"}, ["conformance-client", "http://127.0.0.1:9/mcp"],
         "MCP_CONFORMANCE_CONTEXT is not JSON"),
        ({"MCP_CONFORMANCE_SCENARIO": "auth/basic-cimd"},
         ["conformance-client", "http://127.0.0.1:9/mcp"], "scenario auth/basic-cimd: "),
        ({}, ["conformance-client", "http://127.0.0.1:9/mcp"], "scenario (none): HTTP error"),
    ]  # fmt: skip
    for env, args, says in cases:
        result = CliRunner().invoke(app, ["mcp", *args], env={"LEMON_HOME": str(tmp_path), **env})
        assert result.exit_code == 1, result.output
        assert says in result.output
        assert "Traceback" not in result.output
