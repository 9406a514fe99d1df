"""Nothing lost, nothing mixed: two ``lemon chat`` one-shots on one session (two processes
hosting a runtime on one home, or two clients of one daemon) each keep their turn in the
session and each print only their own answer on stdout, status lines on stderr; a failed run
records its message once (real subprocesses; the scripted provider on 127.0.0.1 holds the
first answer at a gate until the second chat has started)."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from lemon_platform_test.lemon_process import LEMON, lemon_env, run_lemon
from lemon_platform_test.providers import Gate, ScriptedProviderServer, ScriptedTurn

ANSWER_A = "alpha " * 12 + "end of A."
ANSWER_B = "bravo answer."


def _config(home: Path, base_url: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        '[defaults]\nmodel = "scripted:test-model"\n\n'
        '[providers.scripted]\nkind = "openai_completions"\n'
        f'base_url = "{base_url}"\n'
    )


def _chat(
    env: dict[str, str], out: Path, message: str, *, cwd: Path
) -> tuple[subprocess.Popen[str], Path, Path]:
    """``lemon chat --session s1 MESSAGE`` started, its stdout and stderr in two files."""
    stdout, stderr = out / f"{message}.out", out / f"{message}.err"
    with stdout.open("w") as out_file, stderr.open("w") as err_file:
        proc = subprocess.Popen(
            [str(LEMON), "chat", "--session", "s1", message],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out_file,
            stderr=err_file,
            text=True,
            cwd=cwd,
        )
    return proc, stdout, stderr


def _until(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _in_flight(home: Path) -> int:
    """Runs recorded in flight in the home's store (each gateway records its runs there)."""
    path = home / "store" / "lemon.sqlite3"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=5) as db:
            row = db.execute(
                "SELECT count(*) FROM lemon_kv WHERE tbl = 'gateway_in_flight'"
            ).fetchone()
    except sqlite3.Error:
        return 0
    return int(row[0])


def _turns(env: dict[str, str], cwd: Path) -> list[str]:
    shown = run_lemon(env, "sessions", "show", "s1", cwd=cwd)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    # The transcript's lines (the first line says the session's workspace).
    lines = [line for line in shown.stdout.splitlines() if line.strip()]
    assert lines[0].startswith("workspace: "), lines
    return lines[1:]


def test_two_in_process_chats_on_one_session_keep_both_turns(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    env = {**lemon_env(tmp_path), "NO_COLOR": "1", "LEMON_DAEMON": "0"}
    home = Path(env["LEMON_HOME"])
    _config(home, scripted_provider.openai_base_url)
    gate = Gate()
    scripted_provider.script(
        ScriptedTurn(text=ANSWER_A, chunk_size=6, pause=gate), ScriptedTurn(text=ANSWER_B)
    )
    first, first_out, first_err = _chat(env, tmp_path, "A", cwd=tmp_path)
    second = None
    try:
        assert gate.wait_reached(60), first_err.read_text()  # A's answer is streaming
        second, second_out, second_err = _chat(env, tmp_path, "B", cwd=tmp_path)
        # B's runtime accepted its run (recorded in flight next to A's) while A still runs;
        # give it time to reach the model if nothing held it back.
        _until(lambda: _in_flight(home) >= 2)
        time.sleep(1.0)
        gate.open()
        assert first.wait(60) == 0, first_err.read_text()
        assert second.wait(60) == 0, second_err.read_text()
    finally:
        gate.open()
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(30)
    # Each printed its own answer and nothing else on stdout.
    assert first_out.read_text().strip() == ANSWER_A.strip()
    assert second_out.read_text().strip() == ANSWER_B
    # The second model call saw the first turn: one conversation, not two transcripts.
    assert len(scripted_provider.requests) == 2
    assert "end of A." in str(scripted_provider.requests[1].body)
    assert _turns(env, tmp_path) == [
        "you: A",
        f"lemon: {ANSWER_A.strip()}",
        "you: B",
        f"lemon: {ANSWER_B}",
    ]
    listed = run_lemon(env, "sessions", "list", cwd=tmp_path)
    assert "s1  2 runs" in listed.stdout, listed.stdout


def test_a_queued_one_shot_through_the_daemon_prints_only_its_own_answer(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    env = {**lemon_env(tmp_path), "NO_COLOR": "1"}
    home = Path(env["LEMON_HOME"])
    _config(home, scripted_provider.openai_base_url)
    gate = Gate()
    scripted_provider.script(
        ScriptedTurn(text=ANSWER_A, chunk_size=6, pause=gate), ScriptedTurn(text=ANSWER_B)
    )
    start = run_lemon(env, "daemon", "start", "--port", "0", cwd=tmp_path)
    assert start.returncode == 0, start.stdout + start.stderr
    first = second = None
    try:
        first, first_out, first_err = _chat(env, tmp_path, "A", cwd=tmp_path)
        assert gate.wait_reached(60), first_err.read_text()
        second, second_out, second_err = _chat(env, tmp_path, "B", cwd=tmp_path)
        # B is queued behind A (its status line is on one of its streams), A still streams.
        _until(lambda: "queued" in second_out.read_text() + second_err.read_text())
        gate.open()
        assert first.wait(60) == 0, first_err.read_text()
        assert second.wait(60) == 0, second_err.read_text()
    finally:
        gate.open()
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(30)
        run_lemon(env, "daemon", "stop")
    assert first_out.read_text().strip() == ANSWER_A.strip()
    # Stdout is B's answer alone: no tail of A's, no status line (x=$(lemon chat ...)).
    assert second_out.read_text().strip() == ANSWER_B
    assert "queued (position 1)" in second_err.read_text()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_failed_run_records_its_message_once(tmp_path: Path) -> None:
    # No key and nothing listening: the run fails (the router retries it once) without any
    # network beyond a closed port on loopback.
    env = {**lemon_env(tmp_path), "NO_COLOR": "1", "LEMON_DAEMON": "0"}
    home = Path(env["LEMON_HOME"])
    home.mkdir(parents=True)
    (home / "config.toml").write_text(
        '[providers.openai]\nkind = "openai_completions"\n'
        f'base_url = "http://127.0.0.1:{_closed_port()}/v1"\napi_key_env = "OPENAI_API_KEY"\n'
    )
    done = run_lemon(
        env, "chat", "--session", "f", "--model", "openai:gpt-4o-mini", "x", cwd=tmp_path
    )
    assert done.returncode == 1, done.stdout + done.stderr
    shown = run_lemon(env, "sessions", "show", "f", cwd=tmp_path)
    assert shown.stdout.count("you: x") == 1, shown.stdout
    listed = run_lemon(env, "sessions", "list", "--json", cwd=tmp_path)
    assert '"runs": 1' in listed.stdout, listed.stdout
