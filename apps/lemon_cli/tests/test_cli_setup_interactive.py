"""``lemon setup`` as a real subprocess: typos re-asked in a pseudo-terminal, the key question,
comments of an existing ``config.toml`` kept, doctor and chat agreeing about a key, and plain
help texts for every command."""

from __future__ import annotations

import fcntl
import http.server
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from lemon_cli.main import app
from lemon_platform_test.providers import ScriptedProviderServer, ScriptedTurn

LEMON = str(Path(sys.executable).with_name("lemon"))
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


class Terminal:
    """``lemon`` with a pty as its controlling terminal; we hold the master side."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))

        def controlling_tty() -> None:
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            [LEMON, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env={k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")},  # the pty's size
            preexec_fn=controlling_tty,
            close_fds=True,
        )
        os.close(slave)
        self.master = master
        self.output = ""
        self._seen = 0

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:
            data = b""
        if not data:
            return False
        self.output += _ANSI.sub("", data.decode(errors="replace")).replace("\r", "")
        return True

    def expect(self, pattern: str, timeout: float = 60.0) -> None:
        """Wait until ``pattern`` (a regex) appears after the previous match."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while not (match := regex.search(self.output, self._seen)):
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(left):
                raise AssertionError(f"{pattern!r} not seen; output so far:\n{self.output}")
        self._seen = match.end()

    def answer(self, prompt: str, text: str) -> None:
        self.expect(prompt)
        os.write(self.master, (text + "\n").encode())

    def wait_echo_off(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while termios.tcgetattr(self.master)[3] & termios.ECHO:
            if time.monotonic() > deadline:
                raise AssertionError("terminal echo was never turned off")
            select.select([], [], [], 0.01)

    def wait(self, timeout: float = 60.0) -> int:
        while self._read(0.5) and self.proc.poll() is None:
            pass
        while self._read(0):
            pass
        return self.proc.wait(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("LEMON_")}
    out.update(LEMON_HOME=str(tmp_path / "home"), NO_COLOR="1", TERM="xterm", COLUMNS="200")
    out.pop("LOCAL_API_KEY", None)
    return out


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    made: list[Terminal] = []
    yield made
    for term in made:
        term.close()


def lemon(
    args: list[str], env: dict[str, str], cwd: Path, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LEMON, *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=60,
        check=False,
    )


def test_typos_are_asked_again_and_a_local_server_needs_no_key(
    tmp_path: Path, env: dict[str, str], terminals: list[Terminal]
) -> None:
    term = Terminal(["setup"], tmp_path, env)
    terminals.append(term)
    term.answer("Provider kind", "gemini")
    term.expect("unknown kind 'gemini'")
    term.answer("Provider kind", "openai_completions")
    term.answer("Provider name", "")
    term.answer("Base URL", "127.0.0.1:11434/v1")
    term.expect("is not a URL")
    term.answer("Base URL", "http://127.0.0.1:11434/v1")
    term.answer("Model id", "")
    term.expect("the model id is empty")
    term.answer("Model id", "qwen2.5-coder")
    term.answer(r"Does the server need an API key\? \[y/N\]", "")
    term.expect("wrote ")
    assert term.wait() == 0, term.output
    config = tomllib.loads((Path(env["LEMON_HOME"]) / "config.toml").read_text())
    assert config["defaults"]["model"] == "local:qwen2.5-coder"
    assert config["providers"]["local"] == {
        "kind": "openai_completions",
        "base_url": "http://127.0.0.1:11434/v1",
    }


def test_a_remote_server_asks_for_the_key_and_where_to_keep_it(
    tmp_path: Path, env: dict[str, str], terminals: list[Terminal]
) -> None:
    secret = "sk-remote-0123456789"
    term = Terminal(["setup", "--name", "remote"], tmp_path, env)
    terminals.append(term)
    term.answer("Provider kind", "")
    term.answer("Base URL", "https://models.invalid/v1")
    term.answer("Model id", "big-model")
    term.answer(r"Does the server need an API key\? \[Y/n\]", "")
    term.answer(r"Keep the key in .*secrets\.env \(file\) or export REMOTE_API_KEY", "")
    term.expect("API key")
    term.wait_echo_off()
    os.write(term.master, b"\n")  # an empty key is asked again
    term.expect("the key is empty")
    term.expect("API key")
    term.wait_echo_off()
    os.write(term.master, (secret + "\n").encode())
    term.expect("wrote ")
    assert term.wait() == 0, term.output
    assert secret not in term.output
    home = Path(env["LEMON_HOME"])
    assert (home / "secrets.env").read_text() == f"REMOTE_API_KEY={secret}\n"
    provider = tomllib.loads((home / "config.toml").read_text())["providers"]["remote"]
    assert provider["api_key_env"] == "REMOTE_API_KEY"


def test_setup_keeps_the_comments_of_config_toml(tmp_path: Path, env: dict[str, str]) -> None:
    home = Path(env["LEMON_HOME"])
    home.mkdir()
    original = (
        "# My Lemon settings: keep this note.\n"
        "[gateway]\n"
        "max_concurrent_runs = 3  # two cores only\n"
        "\n"
        "# the old server, kept for later\n"
        "[providers.old]\n"
        'kind = "openai_completions"\n'
        'base_url = "http://127.0.0.1:9/v1"  # was on port 9\n'
        "\n"
        "[providers.local]\n"
        "# a comment inside the table setup rewrites\n"
        'kind = "openai_completions"\n'
        'base_url = "http://127.0.0.1:8/v1"\n'
        'api_key_env = "OLD_KEY"\n'
    )
    (home / "config.toml").write_text(original)
    args = ["setup", "--kind", "openai_completions", "--base-url", "http://127.0.0.1:7/v1",
            "--model", "m", "--no-key"]  # fmt: skip
    proc = lemon(args, env, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (home / "config.toml").read_text()
    for comment in (
        "# My Lemon settings: keep this note.",
        "max_concurrent_runs = 3  # two cores only",
        "# the old server, kept for later",
        'base_url = "http://127.0.0.1:9/v1"  # was on port 9',
        "# a comment inside the table setup rewrites",
    ):
        assert comment in text
    config = tomllib.loads(text)
    assert config["providers"]["local"] == {
        "kind": "openai_completions",
        "base_url": "http://127.0.0.1:7/v1",
    }
    assert config["defaults"]["model"] == "local:m"
    assert config["providers"]["old"]["base_url"] == "http://127.0.0.1:9/v1"


def test_a_key_variable_doctor_cannot_find_does_not_fail_doctor_when_chat_works(
    tmp_path: Path, env: dict[str, str], scripted_provider: ScriptedProviderServer
) -> None:
    args = ["setup", "--kind", "openai_completions", "--base-url",
            scripted_provider.openai_base_url, "--model", "m"]  # fmt: skip
    proc = lemon(args, env, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "export LOCAL_API_KEY" in proc.stdout
    proc = lemon(["doctor", "--json"], env, tmp_path)
    provider = json.loads(proc.stdout)["checks"][3]
    assert proc.returncode == 0, proc.stdout
    assert provider["status"] == "warn"
    assert "LOCAL_API_KEY is not set" in provider["detail"]
    assert "chat works" in provider["detail"]
    scripted_provider.reset()
    scripted_provider.script(ScriptedTurn(text="answered without a key"))
    proc = lemon(["chat", "hello"], env, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "answered without a key" in proc.stdout


class _NeedsAKey(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"error": {"message": "missing api key"}}'
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def refusing_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NeedsAKey)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_doctor_fails_a_server_that_refuses_to_answer_without_a_key(
    tmp_path: Path, env: dict[str, str], refusing_server: str
) -> None:
    args = ["setup", "--kind", "openai_completions", "--base-url", refusing_server,
            "--model", "m", "--no-key"]  # fmt: skip
    assert lemon(args, env, tmp_path).returncode == 0
    proc = lemon(["doctor", "--json"], env, tmp_path)
    assert proc.returncode == 1
    provider = json.loads(proc.stdout)["checks"][3]
    assert provider["status"] == "fail"
    assert "answered HTTP 401" in provider["detail"]
    assert "it needs a key" in provider["detail"]


def _command_paths(group: typer.Typer) -> list[list[str]]:
    root = typer.main.get_command(group)
    paths: list[list[str]] = [[]]

    def walk(command: object, prefix: list[str]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            paths.append([*prefix, name])
            walk(sub, [*prefix, name])

    walk(root, [])
    return paths


def test_every_help_text_is_plain_words(tmp_path: Path, env: dict[str, str]) -> None:
    paths = _command_paths(app)
    assert ["setup"] in paths
    assert ["quality"] in paths
    # In process (one subprocess per command took most of this test's two minutes); the
    # real entry point's help is checked by the subprocesses below.
    runner = CliRunner()
    for path in paths:
        result = runner.invoke(app, [*path, "--help"], env=env, terminal_width=100)
        assert result.exit_code == 0, (path, result.output, result.exception)
        text = result.stdout
        assert "`" not in text, (path, text)
        assert "--no-no-" not in text, (path, text)
        assert ":class:" not in text, (path, text)
        assert ":func:" not in text, (path, text)
    setup_help = lemon(["setup", "--help"], env, tmp_path).stdout
    assert "--key / --no-key" in setup_help
    assert "--api-key-stdin " in setup_help
    assert "--no-api-key-stdin" not in setup_help
