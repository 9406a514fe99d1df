"""``lemon goal`` as a real subprocess against a real daemon (``lemon daemon start``): a goal is
set, shown, paused, resumed and cleared through the daemon's ``goal.*`` methods; bad input and
no daemon get one clear line and an exit code, never a traceback."""

from __future__ import annotations

import json

from lemon_platform_test.lemon_process import run_lemon

SESSION = "agent:default:main"


def test_goal_without_a_daemon_says_how_to_start_one(env: dict[str, str]) -> None:
    proc = run_lemon(env, "goal", "status", SESSION)
    assert proc.returncode == 1
    assert "lemon daemon start" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_goal_is_set_shown_paused_resumed_and_cleared(env: dict[str, str], started: str) -> None:
    assert run_lemon(env, "goal", "status", SESSION).stdout.strip() == "no goal"
    made = run_lemon(env, "goal", "set", SESSION, "ship the release notes", "--json")
    assert made.returncode == 0, made.stderr
    goal = json.loads(made.stdout)["goal"]
    assert (goal["objective"], goal["status"], goal["sessionKey"]) == (
        "ship the release notes",
        "active",
        SESSION,
    )
    shown = run_lemon(env, "goal", "status", SESSION)
    assert shown.stdout.startswith("active: ship the release notes"), shown.stdout
    paused = run_lemon(env, "goal", "pause", SESSION, "--json")
    assert json.loads(paused.stdout)["goal"]["status"] == "paused"
    resumed = run_lemon(env, "goal", "resume", SESSION, "--json")
    assert json.loads(resumed.stdout)["goal"]["status"] == "active"
    assert run_lemon(env, "goal", "clear", SESSION).returncode == 0
    assert run_lemon(env, "goal", "status", SESSION).stdout.strip() == "no goal"
    # Bad input: the daemon's own message, exit 2.
    empty = run_lemon(env, "goal", "set", SESSION, "   ")
    assert empty.returncode == 2
    assert "objective is required" in empty.stderr
    none = run_lemon(env, "goal", "pause", SESSION)
    assert none.returncode == 2
    assert "has no goal" in none.stderr
    bad_key = run_lemon(env, "goal", "status", "not a key")
    assert bad_key.returncode == 2
    assert "lemon goal:" in bad_key.stderr
    for proc in (empty, none, bad_key):
        assert "Traceback" not in proc.stderr
