"""The slash commands: one table (name, argument, what it does) that the help text, the
completion in the editor and the dispatcher all read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["COMMANDS", "Command", "complete", "help_text", "is_command"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Command:
    name: str
    arg: str = ""
    """The argument as shown in help (``KEY``, ``[N]``); empty when it takes none."""
    says: str


COMMANDS: Final = (
    Command(name="/new", says="start a new session"),
    Command(name="/sessions", says="list sessions (Ctrl+X switches)"),
    Command(name="/resume", arg="KEY", says="follow another session"),
    Command(name="/history", arg="[N]", says="the last N messages of this session"),
    Command(name="/model", arg="[REF]", says="show or set the model (Ctrl+O picks)"),
    Command(name="/approvals", says="approvals waiting in this session"),
    Command(name="/tasks", arg="[cancel ID | open ID]", says="this session's subagent tasks"),
    Command(name="/mcp", says="the daemon's MCP servers and their state"),
    Command(name="/abort", says="abort the running answer (Ctrl+C)"),
    Command(name="/usage", says="tokens and cost of this session"),
    Command(name="/status", says="connection, daemon and session state"),
    Command(name="/compact", arg="[FOCUS]", says="summarise older history"),
    Command(name="/help", says="commands and keys"),
    Command(name="/quit", says="leave (Ctrl+C twice when idle)"),
)
_NAMES: Final = frozenset(c.name for c in COMMANDS) | {"/exit"}


def is_command(line: str) -> bool:
    """Whether ``line`` starts with one of the commands (else it is sent as a message)."""
    return line.split(None, 1)[0] in _NAMES if line.strip() else False


def complete(typed: str) -> list[Command]:
    """The commands ``typed`` could be the start of (``/m`` → ``/model``), in table order;
    nothing once an argument is being typed or when it is not a command at all."""
    if not typed.startswith("/") or any(c.isspace() for c in typed):
        return []
    return [c for c in COMMANDS if c.name.startswith(typed)]


def help_text() -> str:
    """The commands, one per line, then the keys."""
    width = max(len(f"{c.name} {c.arg}".strip()) for c in COMMANDS)
    lines = [f"{f'{c.name} {c.arg}'.strip():<{width}}  {c.says}" for c in COMMANDS]
    lines += [
        "",
        "Enter sends · Shift+Enter, Ctrl+J or a trailing \\ adds a line · Up/Down history · "
        "Ctrl+R searches it · Tab completes a command",
        "while busy: Enter queues, '>text' steers, '!text' interrupts, Ctrl+C aborts the run",
        "Ctrl+X sessions · Ctrl+O models · Ctrl+T opens or folds the last tool output",
    ]
    return "\n".join(lines)
