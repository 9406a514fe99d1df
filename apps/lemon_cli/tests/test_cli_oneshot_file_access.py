"""A one-shot ``lemon chat`` without a terminal (nobody to approve): reads outside the
workspace and Lemon's own key file are refused, and neither reaches the output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

KEY = "sk-live-never-shown-0123456789"


def _oneshot(tmp_path: Path, message: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lemon")
    env = {**os.environ, "LEMON_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    env.pop("LEMON_MODEL", None)
    return subprocess.run(
        [str(exe), "chat", message], cwd=tmp_path / "work", env=env, stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_a_oneshot_without_a_terminal_refuses_outside_and_secret_reads(tmp_path: Path) -> None:
    for d in ("home", "work", "outside"):
        (tmp_path / d).mkdir()
    (tmp_path / "home" / "secrets.env").write_text(f"OPENAI_API_KEY={KEY}\n")
    (tmp_path / "outside" / "private.txt").write_text("private outside text\n")
    (tmp_path / "work" / "app.py").write_text("print('inside text')\n")

    outside = _oneshot(tmp_path, f'/tool read {{"path": "{tmp_path / "outside" / "private.txt"}"}}')
    assert "private outside text" not in outside.stdout + outside.stderr
    assert "outside the workspace" in outside.stdout + outside.stderr

    secret = _oneshot(tmp_path, f'/tool read {{"path": "{tmp_path / "home" / "secrets.env"}"}}')
    assert KEY not in secret.stdout + secret.stderr
    assert "Lemon's own secrets file" in secret.stdout + secret.stderr

    inside = _oneshot(tmp_path, '/tool read {"path": "app.py"}')
    assert inside.returncode == 0, inside.stderr
    assert "inside text" in inside.stdout
