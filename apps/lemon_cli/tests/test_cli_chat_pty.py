"""``lemon chat`` as a real subprocess in a pseudo-terminal (stdlib ``pty``): one-shot answers,
approval prompts answered inline, Ctrl-C cancelling the run, and with no message the
full-screen UI (on the daemon bare ``lemon`` starts, or hosting the runtime itself)."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

LEMON = str(Path(sys.executable).with_name("lemon"))
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


class Terminal:
    """A child process whose controlling terminal is a pty we hold the master side of."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))

        def controlling_tty() -> None:
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        # The pty's size is the terminal's: COLUMNS/LINES (pytest-xdist sets 80x24 in its
        # workers) would override it for the UI.
        env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
        self.proc = subprocess.Popen(
            args,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=env,
            preexec_fn=controlling_tty,
            close_fds=True,
        )
        os.close(slave)
        self.master = master
        self.output = ""
        self._seen = 0

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def expect(self, pattern: str, timeout: float = 60.0) -> str:
        """Wait until ``pattern`` (a regex) appears after the previous match; return it."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while True:
            match = regex.search(self.output, self._seen)
            if match:
                self._seen = match.end()
                return match.group(0)
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{pattern!r} not seen; output so far:\n{self.output}")
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    data = b""
                if not data:
                    if regex.search(self.output, self._seen):
                        continue
                    raise AssertionError(f"{pattern!r} not seen before EOF:\n{self.output}")
                self.output += _ANSI.sub("", data.decode(errors="replace")).replace("\r", "")

    def wait_echo_off(self, timeout: float = 30.0) -> None:
        """Wait until the child turned terminal echo off (a hidden prompt is reading)."""
        deadline = time.monotonic() + timeout
        while termios.tcgetattr(self.master)[3] & termios.ECHO:
            if time.monotonic() > deadline:
                raise AssertionError("terminal echo was never turned off")
            select.select([], [], [], 0.01)

    def wait(self, timeout: float = 60.0) -> int:
        try:
            while True:
                ready, _, _ = select.select([self.master], [], [], 0.5)
                if ready:
                    try:
                        data = os.read(self.master, 65536)
                    except OSError:
                        break
                    if not data:
                        break
                    self.output += _ANSI.sub("", data.decode(errors="replace"))
                elif self.proc.poll() is not None:
                    break
            return self.proc.wait(timeout)
        finally:
            os.close(self.master)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("LEMON_")}
    # Plain text: these tests read the words of answers (Markdown is tested on its own below).
    out.update(LEMON_HOME=str(tmp_path / "home"), NO_COLOR="1", TERM="xterm", LEMON_PLAIN="1")
    return out


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    made: list[Terminal] = []
    yield made
    for t in made:
        t.kill()


def one_shot(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``args`` run without a terminal (stdin closed), both streams captured."""
    return subprocess.run(
        args,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


def test_one_shot_prints_the_answer_and_exits_zero(
    tmp_path: Path, env: dict[str, str], terminals: list[Terminal]
) -> None:
    term = Terminal([LEMON, "chat", "/echo hello from the pty"], tmp_path, env)
    terminals.append(term)
    term.expect("hello from the pty")
    assert term.wait() == 0


def test_one_shot_without_a_terminal_uses_the_offline_provider_and_denies_bash(
    tmp_path: Path, env: dict[str, str]
) -> None:
    proc = one_shot([LEMON, "chat", "hi there"], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert "offline" in proc.stdout
    proc = one_shot([LEMON, "chat", '/tool bash {"command": "touch made-by-bash"}'], tmp_path, env)
    # told on its own line, on stderr (piped, stdout is the answer alone), never in the
    # middle of the streamed text
    assert "denied bash" not in proc.stdout
    assert any(line.startswith("denied bash") for line in proc.stderr.splitlines())
    assert "--approve bash" in proc.stderr
    assert not (tmp_path / "made-by-bash").exists()
    proc = one_shot(
        [LEMON, "chat", "--approve", "bash", '/tool bash {"command": "touch made-by-bash"}'],
        tmp_path,
        env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "made-by-bash").exists()


def test_approve_never_lifts_a_deny_of_the_profile(tmp_path: Path, env: dict[str, str]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[profiles.default.tool_policy]\ndeny = ["bash"]\n')
    for approve in ("bash", "all"):
        proc = one_shot(
            [LEMON, "chat", "--approve", approve, '/tool bash {"command": "touch made-by-bash"}'],
            tmp_path,
            env,
        )
        assert not (tmp_path / "made-by-bash").exists(), (approve, proc.stdout + proc.stderr)
        assert "bash" in proc.stdout, proc.stdout


def test_an_approval_prompt_is_answered_inline(
    tmp_path: Path, env: dict[str, str], terminals: list[Terminal]
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("old words")
    asked = [
        ('/tool write {"path": "note.txt", "content": "approved"}', r"write to note\.txt", "o"),
        ('/tool edit {"path": "docs/a.md", "old_text": "old", "new_text": "new"}', "edit", "y"),
        ('/tool write {"path": "other.txt", "content": "no"}', r"write to other\.txt", "d"),
    ]
    for message, question, answer in asked:
        term = Terminal([LEMON, "chat", message], tmp_path, env)
        terminals.append(term)
        term.expect(rf"Allow {question} [^\n]*\? \[o\]nce")
        term.expect("approve> ")
        term.send(f"{answer}\n")
        term.expect("denied" if answer == "d" else "approved once")
        term.expect(r"tool `\w+` (returned|failed)")
        assert term.wait() == 0
    assert (tmp_path / "note.txt").read_text() == "approved"
    assert (tmp_path / "docs" / "a.md").read_text() == "new words"
    assert not (tmp_path / "other.txt").exists()


def test_an_approval_outside_the_directory_says_so(
    tmp_path: Path, env: dict[str, str], terminals: list[Terminal]
) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "notes.txt").write_text("notes")
    target = re.escape(str((outside / "notes.txt").resolve()))
    asked = [
        ('/tool write {"path": "../outside/notes.txt", "content": "x"}', rf"write to {target}"),
        ('/tool edit {"path": "../outside/notes.txt", "old_text": "n", "new_text": "x"}',
         rf"edit to {target}"),
        ('/tool read {"path": "../outside/notes.txt"}', rf"read path='{target}'"),
    ]  # fmt: skip
    for message, question in asked:
        term = Terminal([LEMON, "chat", message], work, env)
        terminals.append(term)
        term.expect(rf"Allow {question} \(outside the workspace\) \? \[o\]nce")
        term.expect("approve> ")
        term.send("d\n")
        term.expect("denied")
        assert term.wait() == 0
    inside = Terminal([LEMON, "chat", '/tool write {"path": "in.txt", "content": "x"}'], work, env)
    terminals.append(inside)
    shown = inside.expect(r"Allow write to in\.txt [^\n]*")
    assert "outside" not in shown
    inside.send("d\n")
    assert inside.wait() == 0
    assert (outside / "notes.txt").read_text() == "notes"


def test_ctrl_c_cancels_the_run_and_closes_its_card(
    tmp_path: Path, env: dict[str, str], terminals: list[Terminal]
) -> None:
    message = '/tool bash {"command": "sleep 60"}'
    term = Terminal([LEMON, "chat", "--approve", "bash", message], tmp_path, env)
    terminals.append(term)
    term.expect(r"╭─ \$ sleep 60")  # the tool card: the run is in the bash call
    term.send("\x03")
    term.expect("cancelling")
    term.expect(r"╰─ ✗ \$ sleep 60 cancelled\ncancelled: ")  # the card is closed first
    assert term.wait() == 130


def test_lemon_without_arguments_starts_the_daemon_and_opens_the_tui_on_it(
    tmp_path: Path, env: dict[str, str], terminals: list[Terminal]
) -> None:
    env = {**env, "LEMON_CONTROL_PLANE_PORT": "0"}  # an ephemeral port for the test's daemon
    env.pop("LEMON_DAEMON", None)
    term = Terminal([LEMON], tmp_path, env)
    terminals.append(term)
    try:
        term.expect("lemon daemon: started, pid")
        term.expect(r"online · idle")  # the full-screen UI's status line, connected
        term.send("/echo through the daemon\r")
        term.expect("through the daemon")
        term.expect(r"tokens")  # the run ended (the usage reached the status line)
        term.send("\x03")
        term.expect("Ctrl\\+C again")
        term.send("\x03")
        assert term.wait() == 0
        status = subprocess.run(
            [LEMON, "daemon", "status"], env=env, capture_output=True, text=True, timeout=60
        )
        assert "running" in status.stdout  # it keeps running for the next client
    finally:
        subprocess.run([LEMON, "daemon", "stop"], env=env, capture_output=True, timeout=60)


def test_chat_without_a_message_opens_the_tui_hosting_the_runtime_without_a_daemon(
    tmp_path: Path, env: dict[str, str], terminals: list[Terminal]
) -> None:
    env = {**env, "LEMON_DAEMON": "0"}
    term = Terminal([LEMON, "chat", "--approve", "bash"], tmp_path, env)
    terminals.append(term)
    term.expect(r"online · idle")
    term.send('/tool bash {"command": "echo ran-in-the-tui > out.txt"}\r')
    term.expect(r"✓ \$ echo ran-in-the-tui")  # --approve bash reached the runs
    term.expect(r"tokens")  # the run ended
    term.send("\x03")
    term.expect("Ctrl\\+C again")
    term.send("\x03")
    assert term.wait() == 0
    assert (tmp_path / "out.txt").read_text() == "ran-in-the-tui\n"


def test_ctrl_c_during_an_approval_question_withdraws_it(
    tmp_path: Path, env: dict[str, str], terminals: list[Terminal]
) -> None:
    term = Terminal([LEMON, "chat", '/tool bash {"command": "touch never"}'], tmp_path, env)
    terminals.append(term)
    term.expect(r"╭─ \$ touch never")
    term.expect(r"Allow bash: touch never \?")
    term.expect("approve> ")
    term.send("\x03")
    term.expect("cancelling")
    term.expect(r"approval for bash ended: (expired|cancelled)")
    term.expect(r"╰─ ✗ \$ touch never cancelled\ncancelled: ")
    assert term.wait() == 130
    assert not (tmp_path / "never").exists()


def test_an_approval_granted_always_then_cancelled_closes_the_card(
    tmp_path: Path, env: dict[str, str], terminals: list[Terminal]
) -> None:
    term = Terminal([LEMON, "chat", '/tool bash {"command": "sleep 30"}'], tmp_path, env)
    terminals.append(term)
    term.expect(r"╭─ \$ sleep 30")
    term.expect(r"Allow bash: sleep 30 \? \[o\]nce / \[s\]ession / \[a\]lways / \[d\]eny")
    term.expect("approve> ")
    term.send("a\n")
    term.expect("approved always\n")
    term.send("\x03")
    term.expect("cancelling")
    term.expect(r"╰─ ✗ \$ sleep 30 cancelled\ncancelled: ")
    assert term.wait() == 130
    assert "approve_global" not in term.output
    assert term.output.count("╰─") == term.output.count("╭─") == 1


def test_a_session_approval_and_a_long_command_read_plainly(
    tmp_path: Path, env: dict[str, str], terminals: list[Terminal]
) -> None:
    words = " ".join(f"word{i:03d}" for i in range(60))
    message = f'/tool bash {{"command": "echo {words} \'two  spaces\'"}}'
    term = Terminal([LEMON, "chat", message], tmp_path, env)
    terminals.append(term)
    shown = term.expect(r"Allow bash: echo word000 [^\n]*")
    assert shown.endswith("… ? [o]nce / [s]ession / [a]lways / [d]eny")
    assert len(shown.split(" ? ")[0]) == len("Allow bash: ") + 200
    term.send("s\n")
    term.expect("approved for this session\n")
    term.expect(r"╰─ ✓ ")
    assert term.wait() == 0
    term = Terminal(
        [LEMON, "chat", '/tool bash {"command": "echo \'two  spaces\'"}'], tmp_path, env
    )
    terminals.append(term)
    term.expect(r"Allow bash: echo 'two  spaces' \?")  # quoting kept, spaces not squeezed
    term.send("d\n")
    term.expect("denied\n")
    assert term.wait() == 0


def test_one_shot_exit_code_reflects_a_failed_run(tmp_path: Path, env: dict[str, str]) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    home = Path(env["LEMON_HOME"])
    home.mkdir(parents=True)
    (home / "config.toml").write_text(
        '[defaults]\nmodel = "local:m"\n[providers.local]\nkind = "openai_completions"\n'
        f'base_url = "http://127.0.0.1:{closed}/v1"\n'
    )
    proc = one_shot([LEMON, "chat", "hi"], tmp_path, env)
    assert proc.returncode == 1
    assert "failed: " in proc.stderr  # piped: the error on stderr, stdout holds no answer
    assert "cannot reach" in proc.stderr
    assert "failed" not in proc.stdout


def test_setup_asks_on_a_terminal_and_never_echoes_the_key(
    tmp_path: Path, env: dict[str, str], terminals: list[Terminal]
) -> None:
    secret = "sk-pty-secret-42"
    term = Terminal([LEMON, "setup", "--key-store", "file"], tmp_path, env)
    terminals.append(term)
    term.expect("Provider kind")
    term.send("anthropic_messages\n")
    term.expect("Provider name")
    term.send("\n")
    term.expect("Model id")
    term.send("claude-sonnet-4-5\n")
    term.expect("API key")
    term.wait_echo_off()  # typed ahead, the key would be echoed (and then flushed)
    term.send(secret + "\n")
    term.expect("wrote ")
    assert term.wait() == 0
    assert secret not in term.output
    home = Path(env["LEMON_HOME"])
    assert f"ANTHROPIC_API_KEY={secret}" in (home / "secrets.env").read_text()
    assert 'model = "anthropic:claude-sonnet-4-5"' in (home / "config.toml").read_text()


def test_answers_render_as_markdown_with_a_spinner_on_a_terminal(
    tmp_path: Path, env: dict[str, str], terminals: list[Terminal]
) -> None:
    del env["LEMON_PLAIN"]
    term = Terminal([LEMON, "chat", "/echo some **bold** words and `code`"], tmp_path, env)
    terminals.append(term)
    term.expect(r"tokens")  # the usage line follows the answer
    out = term.output
    assert "some bold words and code" in out  # rendered: no Markdown syntax left
    assert "**bold**" not in out
    assert "thinking…" in out  # the spinner showed while waiting for the first token
    assert term.wait() == 0


def test_the_default_session_belongs_to_the_working_directory(
    tmp_path: Path, env: dict[str, str]
) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir()
    second.mkdir()
    for where in (first, second, first):
        done = subprocess.run(
            [LEMON, "chat", "/echo hi"],
            cwd=where,
            env=env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    listed = subprocess.run(
        [LEMON, "sessions", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rows = json.loads(listed.stdout)
    runs = sorted(row["runs"] for row in rows)
    assert runs == [1, 2]  # two directories, two sessions; the first one has both its runs
