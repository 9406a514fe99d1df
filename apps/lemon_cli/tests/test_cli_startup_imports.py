"""Start-up: ``lemon --help`` and a one-shot chat load only what they need.

Each check runs the command in a fresh interpreter (this test process has loaded everything
already) through the console script's own entry (``lemon_cli.main:main``) and reads the
modules it loaded. ``lemon --help`` and a one-shot ``lemon chat`` are answered by the front
(``lemon_cli.main``) without Typer; a group's ``--help`` imports Typer and the command modules
only: no command's implementation, no Rich, no asyncio, no lemon_core, no pydantic (Typer's
parameter adapters build on it: the plain ``str``/``bool`` parameters skip them). A one-shot
through a running daemon never imports the runtime nor the full-screen UI. The listing in
``--help`` is made from the commands' help lines without making the commands: it is the
listing the made commands give. The front's root help is Typer's, and its reading of a chat
command line is Typer's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from lemon_cli._chat_command import ChatArgs, parse_chat_args
from lemon_cli._help_gen import WIDTH, root_help
from lemon_cli._help_gen import main as help_gen
from lemon_cli.main import app

PROBE = """
import atexit, json, sys
out, sys.argv = sys.argv[1], ["lemon", *sys.argv[2:]]

def dump():  # at exit: the front's one-shot ends without unwinding to a finally
    with open(out, "w") as f:
        json.dump(sorted(sys.modules), f)

atexit.register(dump)
from lemon_cli.main import main
main()
"""

#: Never loaded by ``lemon --help`` (top-level packages).
NOT_FOR_HELP = (
    "asyncio",
    "coding_agent",
    "httpx",
    "jsonschema",
    "lemon_agent",
    "lemon_ai",
    "lemon_control_plane",
    "lemon_core",
    "lemon_runtime",
    "lemon_tui",
    "msgspec",
    "pydantic",
    "rich",
    "sqlite3",
    "ssl",
    "starlette",
    "textual",
    "typer",
    "websockets",
)
#: Typer is loaded by a group's ``--help`` (only the root's is answered without it).
NOT_FOR_GROUP_HELP = tuple(name for name in NOT_FOR_HELP if name != "typer")
#: Never loaded by a one-shot ``lemon chat`` through a running daemon.
NOT_FOR_A_CLIENT = (
    "jsonschema",
    "lemon_agent",
    "lemon_ai",
    "lemon_runtime",
    "lemon_tui",
    "pydantic",
    "starlette",
    "textual",
    "typer",
)
#: Apps a client loads only the config sections of (the config loader reads every installed
#: app's ``lemon.config`` entry point; the packages are lazy facades).
SECTIONS_ONLY = ("coding_agent", "lemon_gateway", "lemon_router", "lemon_memory", "lemon_skills")


def _modules(tmp_path: Path, env: dict[str, str] | None, *args: str) -> tuple[list[str], str]:
    out = tmp_path / "modules.json"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    modules: list[str] = json.loads(out.read_text())
    return modules, proc.stdout + proc.stderr


def _loaded(tmp_path: Path, env: dict[str, str] | None, *args: str) -> tuple[set[str], str]:
    modules, output = _modules(tmp_path, env, *args)
    return {name.split(".")[0] for name in modules}, output


def test_help_loads_no_command_implementation(tmp_path: Path) -> None:
    loaded, output = _loaded(tmp_path, None, "--help")
    assert "Commands" in output
    assert sorted(loaded & set(NOT_FOR_HELP)) == []


@pytest.mark.parametrize("group", ["approvals", "cron", "sessions"])
def test_a_group_help_loads_no_implementation_either(tmp_path: Path, group: str) -> None:
    loaded, output = _loaded(tmp_path, None, group, "--help")
    assert "Commands" in output
    assert sorted(loaded & set(NOT_FOR_GROUP_HELP)) == []


def test_a_one_shot_through_the_daemon_loads_no_runtime(
    tmp_path: Path, env: dict[str, str], started: str
) -> None:
    modules, output = _modules(tmp_path, env, "chat", "--json", "hi")
    assert json.loads(output[output.index("{") :])["via"] == "daemon"
    assert sorted({name.split(".")[0] for name in modules} & set(NOT_FOR_A_CLIENT)) == []
    beyond_sections = [
        name
        for name in modules
        if name.split(".")[0] in SECTIONS_ONLY
        and "." in name
        and not name.rsplit(".", 1)[1].endswith(("section", "sections", "errors"))
    ]
    assert beyond_sections == []


def test_the_help_listing_is_the_one_the_made_commands_give() -> None:
    lazy = CliRunner().invoke(app, ["--help"], terminal_width=72)
    root = typer.main.get_command(app)
    assert isinstance(root, typer.core.TyperGroup)
    made = {name: root.commands[name] for name in root.list_commands(typer.Context(root))}
    assert len(made) > 20
    eager = typer.core.TyperGroup(
        name="lemon", commands=made, help=root.help, params=root.params, rich_markup_mode=None
    )
    ctx = typer.Context(eager, info_name="lemon", terminal_width=72)
    assert lazy.exit_code == 0
    assert lazy.output.rstrip("\n") == eager.get_help(ctx)


def test_text_parameters_keep_their_values_and_others_their_checks(tmp_path: Path) -> None:
    env = {"LEMON_HOME": str(tmp_path / "home"), "LEMON_MODEL": ""}
    bad = CliRunner().invoke(app, ["chat", "--approve", "bsh", "hi"], env=env)
    assert bad.exit_code == 2
    assert "bsh" in bad.output  # the list[str] reached the command as given
    limit = CliRunner().invoke(app, ["sessions", "show", "--limit", "many"], env=env)
    assert limit.exit_code == 2
    assert "Input should be a valid integer" in limit.output  # Typer's own check, unchanged


def test_the_front_prints_typers_root_help(tmp_path: Path) -> None:
    lemon = str(Path(sys.executable).with_name("lemon"))
    assert help_gen(["--check"]) == 0  # the generated text is what Typer prints now
    for columns, width in (("80", WIDTH), ("200", WIDTH), ("60", 58)):
        env = {"PATH": "/usr/bin:/bin", "COLUMNS": columns}
        shown = subprocess.run(
            [lemon, "--help"], capture_output=True, text=True, env=env, check=True, timeout=60
        )
        assert shown.stdout == root_help(width), columns
        assert shown.stderr == ""


CHAT_LINES = [
    [],
    ["hi"],
    [""],
    ["-"],
    ["--json", "hi"],
    ["hi", "--json", "-q", "--plain", "--compact", "--new"],
    ["--quiet", "/echo yo"],
    ["--session", "s1", "--session=s2", "hi"],
    ["--session=", "hi"],
    ["--model", "openai:gpt-4o-mini", "hi"],
    ["--approve", "read", "--approve=bash,edit", "hi"],
    ["--model=a:b=c", "x"],
]
#: Lines the front leaves to Typer (its messages, its help, what it reads otherwise).
TYPER_LINES = [
    ["--help"],
    ["hi", "there"],
    ["--", "-hi"],
    ["--jsn", "hi"],
    ["--json=1", "hi"],
    ["-qq", "hi"],
    ["--session"],
    ["--session", "--new", "hi"],
    ["-x"],
]


@pytest.mark.parametrize("argv", CHAT_LINES, ids=repr)
def test_the_front_reads_a_chat_line_as_typer_does(argv: list[str]) -> None:
    root = typer.main.get_command(app)
    assert isinstance(root, typer.core.TyperGroup)
    ctx = root.commands["chat"].make_context("chat", list(argv))
    params = dict(ctx.params)
    params["approve"] = tuple(params["approve"] or ())
    assert parse_chat_args(argv) == ChatArgs(**params)


@pytest.mark.parametrize("argv", TYPER_LINES, ids=repr)
def test_the_front_leaves_other_chat_lines_to_typer(argv: list[str]) -> None:
    assert parse_chat_args(argv) is None


def test_the_front_keeps_typers_exit_codes_and_messages(tmp_path: Path) -> None:
    lemon = str(Path(sys.executable).with_name("lemon"))
    env = {"PATH": "/usr/bin:/bin", "LEMON_HOME": str(tmp_path / "home"), "LEMON_DAEMON": "0"}
    for argv in (["chat", "hi", "there"], ["chat", "--jsn", "hi"]):
        done = subprocess.run(
            [lemon, *argv], capture_output=True, text=True, env=env, timeout=60, check=False
        )
        assert done.returncode == 2
        assert "Usage: lemon chat [OPTIONS] [message]" in done.stderr
    empty = subprocess.run(
        [lemon, "chat", ""], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert (empty.returncode, empty.stderr) == (
        2,
        "lemon chat: the message is empty; say something (or omit it to chat)\n",
    )


FINISH = """
import atexit, sys, threading
from lemon_cli.main import _finish
atexit.register(lambda: print("exit handler ran", flush=False))
if sys.argv[1] == "thread":
    gate = threading.Event()
    threading.Thread(target=lambda: (gate.wait(5), print("thread ended"))).start()
    threading.Timer(0.05, gate.set).start()
sys.stdout.write("x" * 200000)
_finish(int(sys.argv[2]))
"""


@pytest.mark.parametrize(("mode", "code"), [("alone", 0), ("alone", 3), ("thread", 1)])
def test_the_fast_exit_keeps_exit_handlers_output_and_threads(mode: str, code: int) -> None:
    done = subprocess.run(
        [sys.executable, "-c", FINISH, mode, str(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == code
    assert done.stdout.startswith("x" * 200000)
    assert done.stdout.endswith("exit handler ran\n")
    assert ("thread ended" in done.stdout) == (mode == "thread")
    assert done.stderr == ""
