"""``lemon chat`` arguments through the real ``lemon`` executable (a subprocess, offline model,
no terminal): ``--approve`` names only known tools and covers reads outside the workspace for
the read tools it names (secrets stay refused), an empty message is refused, and output off a
terminal is not hard-wrapped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

KEY = "sk-live-never-shown-0123456789"


def _lemon(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lemon")
    env = {**os.environ, "LEMON_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    env.pop("LEMON_MODEL", None)
    env.pop("COLUMNS", None)
    (tmp_path / "work").mkdir(exist_ok=True)
    return subprocess.run(
        [str(exe), "chat", *args], cwd=tmp_path / "work", env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_an_unknown_tool_name_in_approve_is_a_usage_error_naming_the_known_tools(
    tmp_path: Path,
) -> None:
    result = _lemon(tmp_path, "--approve", "bsh", "/echo hi")
    assert result.returncode == 2, (result.stdout, result.stderr)
    said = result.stdout + result.stderr
    assert "bsh" in said
    for known in ("bash", "read", "write", "edit", "all"):
        assert known in said
    assert "hi" not in result.stdout.replace("bsh", "")  # nothing was sent
    mixed = _lemon(tmp_path, "--approve", "read,bassh", "/echo hi")
    assert mixed.returncode == 2
    assert "bassh" in mixed.stdout + mixed.stderr


def test_approve_read_or_all_covers_a_read_outside_the_workspace_but_never_a_secret(
    tmp_path: Path,
) -> None:
    for d in ("home", "work", "outside"):
        (tmp_path / d).mkdir()
    (tmp_path / "home" / "secrets.env").write_text(f"OPENAI_API_KEY={KEY}\n")
    (tmp_path / "outside" / "notes.txt").write_text("outside notes text\n")
    outside = f'/tool read {{"path": "{tmp_path / "outside" / "notes.txt"}"}}'
    secret = f'/tool read {{"path": "{tmp_path / "home" / "secrets.env"}"}}'
    for grant in ("read", "all", "read,bash"):
        ok = _lemon(tmp_path, "--approve", grant, outside)
        assert ok.returncode == 0, (grant, ok.stdout, ok.stderr)
        assert "outside notes text" in ok.stdout, grant
        refused = _lemon(tmp_path, "--approve", grant, secret)
        assert KEY not in refused.stdout + refused.stderr
        assert "Lemon's own secrets file" in refused.stdout + refused.stderr
    other = _lemon(tmp_path, "--approve", "bash", outside)  # it names another tool
    assert "outside notes text" not in other.stdout + other.stderr
    assert "outside the workspace" in other.stdout + other.stderr


def test_an_empty_or_blank_message_is_refused_as_a_usage_error(tmp_path: Path) -> None:
    for message in ("", "   ", "\n\t "):
        result = _lemon(tmp_path, message)
        assert result.returncode == 2, (repr(message), result.stdout, result.stderr)
        assert "empty" in result.stderr
    assert not (tmp_path / "home" / "sessions").exists() or not any(
        (tmp_path / "home" / "sessions").rglob("*.jsonl")
    )


def test_an_answer_off_a_terminal_is_not_hard_wrapped(tmp_path: Path) -> None:
    sentence = " ".join(f"word{i}" for i in range(60))  # ~ 400 characters, one line
    result = _lemon(tmp_path, f"/echo {sentence}")
    assert result.returncode == 0, result.stderr
    assert sentence in result.stdout.splitlines()


def test_status_and_doctor_off_a_terminal_are_not_hard_wrapped(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 100) / "home"
    exe = Path(sys.executable).with_name("lemon")
    env = {**os.environ, "LEMON_HOME": str(deep), "NO_COLOR": "1"}
    env.pop("COLUMNS", None)
    for command in ("status", "doctor"):
        result = subprocess.run(
            [str(exe), command], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        lines = (result.stdout + result.stderr).splitlines()
        assert any(str(deep) in line for line in lines), (command, lines)


def test_the_known_tools_are_the_tools_a_run_offers(tmp_path: Path) -> None:
    from coding_agent import coding_tools
    from coding_agent.workspace import Workspace
    from lemon_cli._chat import KNOWN_TOOLS

    web = {"web_fetch", "web_search", "browser"}  # coding_agent.tools.web, as [web] says
    offered = {t.name for t in coding_tools(Workspace(cwd=tmp_path))} | {"read_skill"} | web
    assert offered == KNOWN_TOOLS


def test_approve_takes_mcp_tool_names_and_globs_but_not_other_typos(tmp_path: Path) -> None:
    from lemon_cli.chat_cmd import _approvals

    assert _approvals(["mcp_fs_read_text_file,mcp_web_*"]) == {
        "mcp_fs_read_text_file",
        "mcp_web_*",
    }
    refused = _lemon(tmp_path, "--approve", "mcp fs", "/echo hi")
    assert refused.returncode == 2
    assert "mcp_fs_*" in refused.stdout + refused.stderr
