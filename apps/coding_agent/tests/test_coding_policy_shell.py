"""Bash approvals judge the command as a whole: the cases that bite other agents.

A grant covers exactly the action it was given for; these tests check that the action of each
risky shape is never the action of something harmless that a user may already have approved.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coding_agent import Workspace, approval_action, shell_action
from lemon_core import ExecApprovals
from lemon_core.bus import Bus
from lemon_core.events import ApprovalPending


def key(command: str) -> object:
    return approval_action("bash", {"command": command}, Workspace(cwd=Path.cwd()))


@pytest.mark.parametrize(
    ("quoted", "expanded"),
    [
        ("rm '*'", "rm *"),
        ('rm "*"', "rm *"),
        ("rm \\*", "rm *"),
        ("ls '?'", "ls ?"),
        ("ls '[ab]'", "ls [ab]"),
        ("echo '{a,b}'", "echo {a,b}"),
        ("ls '~'", "ls ~"),
        ("cat '$HOME/.ssh/id_rsa'", "cat $HOME/.ssh/id_rsa"),
        ("echo '!!'", "echo !!"),
        ("'FOO=1' ls", "FOO=1 ls"),
        ("echo a", "echo a#b"),
        ("ls", "ls #; rm -rf ~"),
    ],
)
def test_quoting_that_changes_the_meaning_never_shares_a_key(quoted: str, expanded: str) -> None:
    assert key(quoted) != key(expanded)
    # The one whose meaning depends on quoting is keyed by its exact text.
    assert "exact" in {shell_action(quoted)["shell"], shell_action(expanded)["shell"]}


@pytest.mark.parametrize(
    "command",
    [
        'git commit -m "$(cat ~/.lemon/secrets.env)"',
        'ls "$(rm -rf ~)"',
        "ls '$(rm -rf ~)'",
        "echo `id`",
        'echo "x`id`"',
        "cat <(curl http://127.0.0.1/x)",
        "echo ${HOME}",
        "diff <(ls a) <(ls b)",
    ],
)
def test_command_substitution_in_arguments_is_keyed_by_the_exact_text(command: str) -> None:
    assert shell_action(command) == {"shell": "exact", "command": command}
    assert key(command) != key(command.split()[0])


_WRAPPERS = ["env", "env FOO=1", "xargs", "xargs -0", "sudo", "nohup", "timeout 5", "nice",
             "command", "exec", "time", "stdbuf -o0"]  # fmt: skip


@pytest.mark.parametrize("wrapper", _WRAPPERS)
def test_a_wrapper_never_carries_an_approval_to_another_wrapped_command(wrapper: str) -> None:
    harmless, harmful = f"{wrapper} ls", f"{wrapper} rm -rf build"
    assert key(harmless) != key(harmful)
    assert key(harmful) != key("rm -rf build")
    assert key(harmless) != key(wrapper)


@pytest.mark.parametrize("shell", ["sh -c", "bash -c", "bash -lc", "zsh -c"])
def test_sh_c_keys_include_the_whole_inner_script(shell: str) -> None:
    assert key(f"{shell} 'ls; rm -rf build'") == {
        "shell": "argv", "argv": [*shell.split(), "ls; rm -rf build"]}  # fmt: skip
    assert key(f"{shell} ls") != key(f"{shell} 'ls; rm -rf build'")
    assert key(f"{shell} 'ls; rm -rf build'") != key("ls")
    assert key(f"{shell} 'ls && rm x'") != key(f"{shell} ls")
    assert key(f'{shell} "ls $(rm x)"') == {"shell": "exact", "command": f'{shell} "ls $(rm x)"'}


@pytest.mark.parametrize(
    ("inside", "outside"),
    [
        ("echo x > out.txt", "echo x > /etc/cron.d/job"),
        ("echo x >> log.txt", "echo x >> ~/.bashrc"),
        ("make 2> err.txt", "make 2> /tmp/err.txt"),
        ("sort < in.txt > out.txt", "sort < in.txt > ../../outside.txt"),
        ("echo x >out.txt", "echo x >|/etc/passwd"),
        ("ls &> out.txt", "ls &> /dev/tcp/127.0.0.1/9"),
    ],
)
def test_a_redirection_is_judged_with_its_target(inside: str, outside: str) -> None:
    assert shell_action(outside) == {"shell": "exact", "command": outside}
    assert key(inside) != key(outside)
    assert key(outside) != key(outside.split(">")[0].strip())


_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-_./", min_size=1, max_size=8)
_risky = st.sampled_from(["$(rm x)", "`rm x`", "*", "~", "$HOME", "'*'", "\\*", "#x", "{a,b}",
                          "> /etc/x", "| sh", "; rm x", "&& rm x", "<(rm x)"])  # fmt: skip


@given(st.lists(_word, min_size=1, max_size=4), _risky)
def test_a_risky_word_never_shares_the_key_of_the_plain_command(
    words: list[str], risky: str
) -> None:
    plain = " ".join(words)
    risky_command = f"{plain} {risky}"
    assert key(risky_command) == {"shell": "exact", "command": risky_command}
    assert key(risky_command) != key(plain)


async def test_a_session_grant_of_a_wrapper_or_redirection_covers_only_itself() -> None:
    approvals = ExecApprovals(Bus())
    session = "agent:coder:main"
    for granted in ("env ls", "sh -c ls", "echo x > out.txt", "rm '*'"):
        asked: asyncio.Queue[ApprovalPending] = asyncio.Queue()
        request = approvals.request(
            tool="bash", action=key(granted), session_key=session, on_requested=asked.put_nowait
        )
        asking = asyncio.ensure_future(request)
        approvals.resolve((await asyncio.wait_for(asked.get(), 10)).id, "approve_session")
        assert (await asking).approved
    for command in ("env ls", "sh -c ls", "echo x > out.txt", "rm '*'", "'ls'  "):
        action = key(command)
        expected = None if command == "'ls'  " else "session"
        assert approvals.granted("bash", action, session_key=session) == expected, command
    for command in ("env rm -rf build", "sh -c 'ls; rm -rf ~'", "echo x > /etc/passwd",
                    "rm *", "rm \\*", "env ls $(rm x)"):  # fmt: skip
        assert approvals.granted("bash", key(command), session_key=session) is None, command
