"""``lemon memory`` as a real subprocess against a real daemon (``lemon daemon start``): the
daemon's memory status, an empty list and search, a forget of an unknown id, and no daemon: one
clear line and an exit code, never a traceback."""

from __future__ import annotations

import json

from lemon_platform_test.lemon_process import run_lemon


def test_memory_without_a_daemon_says_how_to_start_one(env: dict[str, str]) -> None:
    proc = run_lemon(env, "memory", "status")
    assert proc.returncode == 1
    assert "lemon daemon start" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_memory_status_list_search_and_forget_on_the_running_daemon(
    env: dict[str, str], started: str
) -> None:
    status = run_lemon(env, "memory", "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["available"] is True
    listed = run_lemon(env, "memory", "list")
    assert (listed.returncode, listed.stdout.strip()) == (0, "no documents")
    assert json.loads(run_lemon(env, "memory", "list", "--json").stdout) == {"documents": []}
    found = run_lemon(env, "memory", "search", "release notes")
    assert (found.returncode, found.stdout.strip()) == (0, "nothing found")
    gone = run_lemon(env, "memory", "forget", "mem_unknown")
    assert gone.returncode == 1
    assert "no document mem_unknown" in gone.stderr
    too_many = run_lemon(env, "memory", "list", "--limit", "0")
    assert too_many.returncode == 2  # typer's own range check
    for proc in (status, listed, found, gone, too_many):
        assert "Traceback" not in proc.stderr
