"""An unusable ``LEMON_HOME`` (a regular file, a path under one, ``/proc/...``, a read-only
directory, a store path taken by a file) through real ``lemon`` subprocesses: one clear line and
exit 2 for every command that keeps state there, the store check failing in ``lemon doctor``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

LEMON = str(Path(sys.executable).with_name("lemon"))

COMMANDS = {
    "chat": ["chat", "/echo hi"],
    "sessions list": ["sessions", "list"],
    "sessions show": ["sessions", "show"],
    "approvals list": ["approvals", "list"],
    "approvals revoke": ["approvals", "revoke", "--all"],
    "setup": ["setup", "--kind", "anthropic_messages", "--model", "claude-sonnet-4-5"],
    "tokens create": ["tokens", "create", "ci"],
    "tokens list": ["tokens", "list"],
    "tokens local": ["tokens", "local"],
    "daemon logs": ["daemon", "logs"],
}


def _a_file(tmp_path: Path) -> Path:
    path = tmp_path / "home-is-a-file"
    path.write_text("not a directory\n")
    return path


def _under_a_file(tmp_path: Path) -> Path:
    return _a_file(tmp_path) / "lemon"


def _proc_missing(tmp_path: Path) -> Path:
    return Path("/proc") / f"lemon-home-{os.getpid()}"  # /proc refuses new entries, even to root


def _proc_self(tmp_path: Path) -> Path:
    return Path("/proc/self")  # an existing directory nobody can create files in


def _read_only(tmp_path: Path) -> Path:
    if os.geteuid() == 0:
        pytest.skip("root writes into a 0555 directory anyway")
    path = tmp_path / "read-only"
    path.mkdir()
    path.chmod(0o555)
    return path


HOMES: dict[str, Callable[[Path], Path]] = {
    "a regular file": _a_file,
    "a path under a regular file": _under_a_file,
    "a missing entry of /proc": _proc_missing,
    "/proc/self": _proc_self,
    "a read-only directory": _read_only,
}


def run(args: list[str], home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEMON_")}
    env.update(LEMON_HOME=str(home), NO_COLOR="1", COLUMNS="300")
    return subprocess.run(
        [LEMON, *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.fixture(params=list(HOMES), ids=list(HOMES))
def bad_home(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return HOMES[request.param](tmp_path)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_needing_the_home_says_so_in_one_line_and_exits_2(
    bad_home: Path, command: str, tmp_path: Path
) -> None:
    proc = run(COMMANDS[command], bad_home, tmp_path)
    output = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 2, output
    assert "Traceback" not in output
    assert len(output.splitlines()) == 1, output
    assert f"cannot use {bad_home} as the Lemon home" in output
    assert "Set LEMON_HOME to a directory you can write to" in output


def test_doctor_fails_the_store_check_with_the_reason(bad_home: Path, tmp_path: Path) -> None:
    proc = run(["doctor", "--json"], bad_home, tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["config"]["status"] == "ok"  # no config file there: not a config problem
    assert checks["store"]["status"] == "fail"
    assert f"the home {bad_home} cannot be used" in checks["store"]["detail"]


def test_status_shows_whether_the_home_can_be_used_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "not" / "yet"
    for args in (["status"], ["doctor"], ["approvals", "list"]):
        run(args, missing, tmp_path)
        assert not (tmp_path / "not").exists()  # the probe removes what it made
    assert "(not created yet)" in run(["status"], missing, tmp_path).stdout
    home = _under_a_file(tmp_path)
    proc = run(["status"], home, tmp_path)
    assert proc.returncode == 0
    assert f"cannot be used: {home.parent} is a file, not a directory" in proc.stdout


def test_a_store_path_taken_by_a_file_is_one_line_from_the_runtime_boot(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "store").write_text("in the way\n")
    for args in (COMMANDS["chat"], COMMANDS["sessions list"]):
        proc = run(args, home, tmp_path)
        output = (proc.stdout + proc.stderr).strip()
        assert proc.returncode == 2, output
        assert "Traceback" not in output
        assert len(output.splitlines()) == 1, output
        assert f"cannot open the store {home / 'store' / 'lemon.sqlite3'}" in output
    proc = run(["doctor", "--json"], home, tmp_path)
    assert proc.returncode == 1
    store = json.loads(proc.stdout)["checks"][1]
    assert store["status"] == "fail"
    assert str(home / "store") in store["detail"]
