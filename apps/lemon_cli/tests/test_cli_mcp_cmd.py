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
