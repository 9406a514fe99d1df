"""A provider URL's password reaches no output, transcript or store of a failed run.

A base_url may carry credentials (``http://user:password@host/v1``); when the server cannot be
reached, the error the person sees (and the transcript and the run history keep) names the URL
with its userinfo hidden.
"""

from __future__ import annotations

import socket
from pathlib import Path

from lemon_platform_test.lemon_process import lemon_env, run_lemon

SECRET = "hunter2pass"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_provider_url_shows_without_its_password(tmp_path: Path) -> None:
    env = {**lemon_env(tmp_path), "NO_COLOR": "1", "LEMON_DAEMON": "0"}
    home = Path(env["LEMON_HOME"])
    home.mkdir()
    (home / "config.toml").write_text(
        '[defaults]\nmodel = "p:m"\n\n[providers.p]\nkind = "openai_completions"\n'
        f'base_url = "http://me:{SECRET}@127.0.0.1:{_closed_port()}/v1"\nmodels = ["m"]\n'
    )
    work = tmp_path / "work"
    work.mkdir()
    done = run_lemon(env, "chat", "x", cwd=work)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "cannot reach http://" in done.stdout + done.stderr
    assert SECRET not in done.stdout + done.stderr
    leaked = [p for p in home.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == [home / "config.toml"]
