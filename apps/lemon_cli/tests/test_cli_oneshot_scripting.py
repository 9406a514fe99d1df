"""`lemon chat MESSAGE` for scripts: standard input as the message, one JSON document with
--json, the documented exit codes, and a failure told once (real subprocesses; the scripted
provider server over HTTP on 127.0.0.1 where a model is needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lemon_platform_test.providers import ScriptedError, ScriptedProviderServer

LEMON = str(Path(sys.executable).parent / "lemon")


def run(
    args: list[str], home: Path, *, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEMON_")}
    env.update(LEMON_HOME=str(home), NO_COLOR="1")
    return subprocess.run(
        [LEMON, *args],
        input=stdin,
        stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def test_standard_input_is_the_message(tmp_path: Path) -> None:
    done = run(["chat"], tmp_path / "home", stdin="/echo from the pipe\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "from the pipe"


def test_standard_input_is_added_after_the_message(tmp_path: Path) -> None:
    done = run(["chat", "/echo head"], tmp_path / "home", stdin="tail of the pipe\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["head", "tail", "of", "the", "pipe"]


def test_nothing_to_say_is_a_usage_error(tmp_path: Path) -> None:
    done = run(["chat"], tmp_path / "home")
    assert done.returncode == 2
    assert "pass a MESSAGE" in done.stdout + done.stderr


def test_json_is_one_document_with_the_answer_and_its_accounting(tmp_path: Path) -> None:
    done = run(["chat", "--json", '/tool ls {"path": "."}'], tmp_path / "home", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)  # the whole of stdout is one JSON document
    assert document["ok"] is True
    assert document["error_code"] is None
    assert document["run_id"].startswith("run_")
    assert document["session_key"].startswith("agent:default:main:sub:cwd-")
    (call,) = document["tool_calls"]
    assert (call["tool"], call["arguments"], call["ok"]) == ("ls", {"path": "."}, True)
    assert "home" in call["result"]  # the listing of the working directory
    assert document["usage"]["total_tokens"] > 0
    assert document["usage"]["model"] == "offline:offline"
    assert document["cost_usd"] == 0.0


def test_json_of_a_refused_model_has_its_typed_code_and_exit_2(tmp_path: Path) -> None:
    # an unknown model is a usage error said before the run (exit 2), still as a document
    done = run(["chat", "--json", "--model", "nosuch:model", "hi"], tmp_path / "home")
    assert done.returncode == 2
    document = json.loads(done.stdout)
    assert (document["ok"], document["error_code"]) == (False, "model_unavailable")
    assert "nosuch" in document["error"]


def test_json_needs_a_message(tmp_path: Path) -> None:
    done = run(["chat", "--json"], tmp_path / "home")
    assert done.returncode == 2


def test_usage_goes_to_stderr_when_piped_and_quiet_hides_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shown = run(["chat", "/echo hi"], home)
    assert shown.stdout.strip() == "hi"  # stdout is the answer alone
    assert "tokens" in shown.stderr
    quiet = run(["chat", "--quiet", "/echo hi"], home)
    assert "tokens" not in quiet.stderr


def test_a_failure_is_told_once_even_after_the_routers_retry(
    tmp_path: Path, scripted_provider: ScriptedProviderServer
) -> None:
    # Every request fails with a 500: the provider retries, the router retries the run once
    # (no answer, a retryable code, no tool ran), and the person reads the failure once.
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[defaults]\nmodel = "scripted:test-model"\n\n'
        '[providers.scripted]\nkind = "openai_completions"\n'
        f'base_url = "{scripted_provider.openai_base_url}"\n'
    )
    scripted_provider.script(*[ScriptedError.server_error() for _ in range(40)])
    done = run(["chat", "hello"], home)
    assert done.returncode == 1
    told = (done.stdout + done.stderr).count("failed:")
    assert told == 1, done.stdout + done.stderr
    asked = len(scripted_provider.requests)
    scripted_provider.reset()  # the unused scripted failures are spare, not a mistake
    assert asked >= 2  # it was retried, and still told once


def test_tool_cards_and_notes_go_to_stderr_when_piped(tmp_path: Path) -> None:
    """``x=$(lemon chat ...)`` captures the answer alone: a tool's card (``╭─ ls`` /
    ``╰─ ✓ ls``) and a run's notes (an MCP server that did not start) are progress, on stderr
    when stdout is not a terminal; the answer's segments around the card stay apart."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[mcp.servers.broken]\ncommand = "no-such-mcp-command"\n', encoding="utf-8"
    )
    done = run(["chat", '/tool ls {"path": "."}'], home, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "╭─" not in done.stdout
    assert "╰─" not in done.stdout
    assert "MCP servers not available" not in done.stdout
    assert done.stdout.startswith("Offline: calling ls.\n")
    assert "Offline: tool `ls` returned:" in done.stdout
    assert "╭─ ls" in done.stderr
    assert "✓ ls" in done.stderr
    assert "MCP servers not available: broken" in done.stderr
