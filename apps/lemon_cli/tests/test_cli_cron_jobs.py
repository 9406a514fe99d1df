"""``lemon cron`` and ``lemon heartbeat`` as real subprocesses: on the store directly when no
daemon runs (a daemon started after it runs the job), and against a running daemon (``lemon
daemon start``); every command's ``--json`` shape, and bad input as one line naming the field
with exit 2 and nothing stored."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from lemon_platform_test.lemon_process import lemon_env, run_lemon

JOB_KEYS = {"id", "name", "schedule", "timezone", "next_due_at_ms", "enabled", "agent_id"}
RUN_KEYS = {
    "cron_run_id",
    "job_id",
    "due_at_ms",
    "status",
    "triggered_by",
    "router_run_id",
    "owner",
    "started_at_ms",
    "finished_at_ms",
    "suppressed",
    "reason",
    "error",
}


def lemon_json(env: dict[str, str], *args: str) -> object:
    proc = run_lemon(env, *args, "--json")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--cron", "61 * * * *"], "cron:"),
        (["--cron", "*/0 * * * *"], "cron:"),
        (["--cron", "0 0 31 2 *"], "cron:"),
        (["--cron", "0 9 * *"], "cron:"),
        (["--cron", "0 9 * * *", "--tz", "Mars/Base"], "timezone:"),
        (["--every", "500ms"], "every:"),
        (["--every", "soon"], "every:"),
        (["--at", "2020-01-01T00:00:00+00:00"], "at:"),
        (["--every", "10s", "--jitter", "20s"], "jitter:"),
        (["--every", "10s", "--session", "agent:x"], "session_key:"),
        ([], "schedule:"),
        (["--every", "10s", "--cron", "* * * * *"], "schedule:"),
        (["--every", "10s", "--channel", "nope"], "channel:"),
    ],
)
def test_bad_input_is_one_line_naming_the_field_exit_2_and_nothing_stored(
    env: dict[str, str], args: list[str], field: str
) -> None:
    proc = run_lemon(env, "cron", "add", "j", "--prompt", "p", *args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert field in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr
    assert lemon_json(env, "cron", "list") == {"jobs": [], "quarantined": []}


def test_on_the_store_without_a_daemon(env: dict[str, str]) -> None:
    job = lemon_json(env, "cron", "add", "nightly", "--cron", "30 2 * * *", "--tz",
                     "America/New_York", "--prompt", "/echo night")  # fmt: skip
    assert isinstance(job, dict)
    assert set(job) >= JOB_KEYS
    assert (job["schedule"], job["timezone"]) == ("30 2 * * *", "America/New_York")
    delivered = lemon_json(env, "cron", "add", "told", "--every", "1h", "--prompt", "x",
                           "--channel", "telegram:42")  # fmt: skip
    assert isinstance(delivered, dict)
    assert delivered["channel"] == "telegram:42"
    assert lemon_json(env, "cron", "remove", delivered["id"])
    dup = run_lemon(env, "cron", "add", "nightly", "--every", "1h", "--prompt", "x")
    assert dup.returncode == 2
    assert "exists" in dup.stderr
    listed = lemon_json(env, "cron", "list")
    assert isinstance(listed, dict)
    assert [j["id"] for j in listed["jobs"]] == [job["id"]]
    paused = lemon_json(env, "cron", "pause", job["id"])
    assert isinstance(paused, dict)
    assert paused["job"]["enabled"] is False
    assert paused["job"]["next_due_at_ms"] is None
    resumed = lemon_json(env, "cron", "resume", job["id"])
    assert isinstance(resumed, dict)
    assert resumed["job"]["enabled"] is True
    assert lemon_json(env, "cron", "history") == {"runs": []}
    run = run_lemon(env, "cron", "run", job["id"])
    assert run.returncode == 2
    assert "needs the daemon" in run.stderr
    hb = lemon_json(env, "heartbeat", "set", "--every", "30m")
    assert isinstance(hb, dict)
    assert hb["heartbeat"]["schedule"] == "every 30m"
    assert hb["heartbeat"]["purpose"] == "heartbeat"
    assert lemon_json(env, "heartbeat", "off") == {"ok": True, "heartbeat": None}
    shown = lemon_json(env, "heartbeat", "show")
    assert isinstance(shown, dict)
    assert shown["heartbeat"] is None
    removed = lemon_json(env, "cron", "remove", job["id"])
    assert removed == {"removed": True, "id": job["id"], "name": "nightly"}
    missing = run_lemon(env, "cron", "remove", job["id"])
    assert missing.returncode == 2
    assert "no job" in missing.stderr


def test_against_the_running_daemon(env: dict[str, str], started: str) -> None:
    job = lemon_json(env, "cron", "add", "hello", "--every", "1h", "--prompt", "/echo hi there")
    assert isinstance(job, dict)
    ran = lemon_json(env, "cron", "run", job["id"], "--wait")
    assert isinstance(ran, dict)
    assert ran["status"] == "completed"
    assert ran["output"] == "hi there"
    plain = run_lemon(env, "cron", "run", job["id"], "--wait")
    assert plain.stdout.strip() == "hi there"
    history = lemon_json(env, "cron", "history", job["id"], "--limit", "5")
    assert isinstance(history, dict)
    runs = history["runs"]
    assert len(runs) == 2
    assert set(runs[0]) >= RUN_KEYS
    assert runs[0]["due_at_ms"] > runs[1]["due_at_ms"]  # newest first
    assert {r["triggered_by"] for r in runs} == {"manual"}
    listed = lemon_json(env, "cron", "list")
    assert isinstance(listed, dict)
    assert listed["jobs"][0]["last_status"] == "completed"
    # a job added on the store while the daemon runs is the daemon's within poll_ms: here
    # through the daemon itself, a timer job fires on its own
    tick = lemon_json(env, "cron", "add", "tick", "--every", "1s", "--prompt", "/echo tock")
    assert isinstance(tick, dict)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        seen = lemon_json(env, "cron", "history", tick["id"])
        assert isinstance(seen, dict)
        if any(r["status"] == "completed" for r in seen["runs"]):
            break
        time.sleep(0.5)
    else:
        raise AssertionError("the every-1s job never completed on the daemon")
    assert {r["triggered_by"] for r in seen["runs"]} == {"schedule"}
    lemon_json(env, "cron", "remove", tick["id"])
    bad = run_lemon(env, "cron", "add", "x", "--cron", "61 * * * *", "--prompt", "p")
    assert bad.returncode == 2
    assert bad.stderr.startswith("lemon cron add: ")
    assert "Traceback" not in bad.stderr


def test_url_names_the_daemon_which_gets_only_the_token_env(
    env: dict[str, str], started: str, tmp_path: Path
) -> None:
    from lemon_control_plane.local_token import read_local_token

    job = lemon_json(env, "cron", "add", "far", "--every", "1h", "--prompt", "/echo far away")
    assert isinstance(job, dict)
    ws = started.replace("http://", "ws://") + "/ws"
    # another home entirely: only --url leads to the daemon (and its store)
    other = lemon_env(tmp_path / "elsewhere")
    refused = run_lemon(other, "cron", "--url", ws, "list")
    assert refused.returncode == 1, (refused.stdout, refused.stderr)
    assert "Traceback" not in refused.stderr
    token = read_local_token(Path(env["LEMON_HOME"]))
    assert token
    other["LEMON_CONTROL_PLANE_TOKEN"] = token
    listed = lemon_json(other, "cron", "--url", ws, "list")
    assert isinstance(listed, dict)
    assert [j["id"] for j in listed["jobs"]] == [job["id"]]
    ran = lemon_json(other, "cron", "--url", ws, "run", job["id"], "--wait")
    assert isinstance(ran, dict)
    assert ran["output"] == "far away"
    audit = lemon_json(other, "cron", "--url", ws, "audit", "--job", job["id"])
    assert isinstance(audit, dict)
    assert "job_created" in [e["action"] for e in audit["events"]]
    shown = lemon_json(other, "heartbeat", "--url", ws, "show")
    assert isinstance(shown, dict)
    assert shown["heartbeat"] is None
    gone = run_lemon(other, "cron", "abort", "cron_nope", "--url", ws)
    assert gone.returncode == 2  # the option belongs to the group: lemon cron --url URL ...
    missing = run_lemon(other, "cron", "--url", ws, "abort", "cron_nope")
    assert missing.returncode == 2
    assert "no cron run" in missing.stderr
    for bad_url, code in (("http://127.0.0.1:1/ws", 2), ("ws://127.0.0.1:1/ws", 1)):
        proc = run_lemon(other, "cron", "--url", bad_url, "list")
        assert proc.returncode == code, (bad_url, proc.stdout, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1
        assert "Traceback" not in proc.stderr


def test_doctor_reports_jobs_next_due_stale_leases_and_skipped_fires(
    env: dict[str, str],
) -> None:
    import asyncio

    from lemon_infra import SQLiteFireLedger

    def automation(checks: object) -> list[dict[str, str]]:
        assert isinstance(checks, dict)
        return [c for c in checks["checks"] if c["name"] == "automation"]

    assert automation(json.loads(run_lemon(env, "doctor", "--json").stdout)) == []  # no job
    job = lemon_json(env, "cron", "add", "nightly", "--cron", "30 2 * * *", "--prompt", "p")
    assert isinstance(job, dict)

    async def seed() -> None:  # a dead daemon's fire in flight, and two skipped due times
        path = Path(env["LEMON_HOME"]) / "store" / "fires.sqlite3"
        ledger = await SQLiteFireLedger.open(path)
        try:
            dead = await ledger.claim(job["id"], 1_000, "gone:1", lease_ms=1)
            assert dead is not None
            assert await ledger.record(dead, status="submitted", run_id="run_x") is not None
            for due, why in ((2_000, "coalesced"), (3_000, "coalesced")):
                fire = await ledger.claim(job["id"], due, "d", lease_ms=1)
                assert fire is not None
                assert await ledger.record(fire, status="skipped", outcome=why) is not None
        finally:
            await ledger.close()

    asyncio.run(seed())
    proc = run_lemon(env, "doctor", "--json")
    assert "Traceback" not in proc.stderr
    lines = automation(json.loads(proc.stdout))
    head, stale, skipped = lines
    assert head["status"] == "ok"
    assert head["detail"].startswith("1 jobs (1 enabled), scheduler on; next due ")
    assert "(nightly)" in head["detail"]
    assert stale["status"] == "warn"
    assert "stale lease: nightly" in stale["detail"]
    assert "held by gone:1 (submitted" in stale["detail"]
    assert skipped["detail"] == "skipped fires (newest 200 per job): 2 coalesced"
    text = run_lemon(env, "doctor")
    assert "automation" in text.stdout


def test_heartbeat_active_hours_on_the_store(env: dict[str, str]) -> None:
    shown = lemon_json(env, "heartbeat", "set", "--active-hours", "09:00-17:30", "--tz",
                       "Europe/Paris", "--every", "15m")  # fmt: skip
    assert isinstance(shown, dict)
    assert shown["heartbeat"]["active_hours"] == "09:00-17:30"
    assert shown["heartbeat"]["timezone"] == "Europe/Paris"
    text = run_lemon(env, "heartbeat", "show")
    assert "active hours: 09:00-17:30 (Europe/Paris)" in text.stdout
    for args, needle in ((["--active-hours", "9-5"], "active_hours"),
                         (["--tz", "Mars/Base"], "timezone")):  # fmt: skip
        bad = run_lemon(env, "heartbeat", "set", *args)
        assert bad.returncode == 2, (bad.stdout, bad.stderr)
        assert needle in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1
    kept = lemon_json(env, "heartbeat", "show")
    assert isinstance(kept, dict)
    assert kept["heartbeat"]["active_hours"] == "09:00-17:30"  # nothing stored by bad input
    cleared = lemon_json(env, "heartbeat", "set", "--active-hours", "none")
    assert isinstance(cleared, dict)
    assert cleared["heartbeat"]["active_hours"] is None


def test_update_changes_the_model_pin_and_the_skills_and_refuses_bad_ones(
    env: dict[str, str],
) -> None:
    job = lemon_json(env, "cron", "add", "pinned", "--every", "1h", "--prompt", "x")
    assert isinstance(job, dict)
    assert (job["model"], job["skills"]) == (None, [])
    changed = lemon_json(env, "cron", "update", job["id"], "--model", "openai:gpt-4o-mini",
                         "--skill", "nightly-report", "--skill", "git")  # fmt: skip
    assert isinstance(changed, dict)
    assert (changed["model"], changed["skills"]) == (
        "openai:gpt-4o-mini",
        ["nightly-report", "git"],
    )
    for args, field in (
        (["--model", "gpt-4o"], "model:"),
        (["--skill", "../etc"], "skills:"),
        (["--skill", "git", "--no-skills"], "skills:"),
        ([], "give a field"),
    ):
        proc = run_lemon(env, "cron", "update", job["id"], *args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert field in proc.stderr, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1
        assert "Traceback" not in proc.stderr
    listed = lemon_json(env, "cron", "list")
    assert isinstance(listed, dict)
    (kept,) = listed["jobs"]
    assert (kept["model"], kept["skills"]) == ("openai:gpt-4o-mini", ["nightly-report", "git"])
    cleared = lemon_json(env, "cron", "update", job["id"], "--model", "", "--no-skills")
    assert isinstance(cleared, dict)
    assert (cleared["model"], cleared["skills"]) == (None, [])
