"""Tool policy and approval gating of the coding tools.

:data:`DEFAULT_TOOL_POLICY`: ``read``, ``ls``, ``find``, ``grep`` and ``todo`` run; ``write``,
``edit`` and ``bash`` ask first. :func:`gate_tools` wraps every tool of a registry so that a
call is checked against the run's :class:`~lemon_core.execution.ToolPolicy` before it runs:

* denied (``deny``, or not in ``allow``): an error result the model sees, the tool never runs;
* ``require_approval``: the call waits for an :class:`~lemon_core.ExecApprovals` decision (with
  a deadline); any decision other than an approval is an error result the model sees;
* otherwise it runs.

File tools are also checked against the path they would touch (after ``~``, ``..`` and symlinks
are resolved, :mod:`coding_agent.access`): a secret file is refused outright, whatever the
policy says and without asking; the read-only tools (``read``, ``ls``, ``find``, ``grep``) run
freely inside the workspace (the run's working directory and below) but need an approval, like
``write``, for a path outside it. Without an approval channel (a one-shot with no terminal to
ask) such a call is refused, unless the run's ``preapproved`` names that tool (``lemon chat
--approve read``): then it runs without the question (``ALL_TOOLS`` alone does not lift it; a
secret file stays refused). Every approval of a file tool whose path is outside the workspace
(``write`` and ``edit`` too) says so: its rationale ends with ``(outside the workspace)``, which
the terminal, the full-screen UI and the web page show with the question.

Approvals are keyed by the tool and its *action* (:func:`approval_action`): a file tool's
resolved path, or a shell command as a whole (:func:`shell_action`), so approving ``ls`` never
approves ``ls; rm -rf ~``.

A run that has read web content (``web_fetch``, ``web_search``: :class:`RunTaint` is marked)
is *tainted*: from then on every call of a tool outside :data:`TAINT_FREE` (``bash``,
``write``, ``edit``, MCP tools, any tool added later), every ``web_fetch`` or ``browser``
``open`` of a URL that carries data (a query string over 100 characters) and every ``browser``
``type`` / ``press`` asks a person afresh, naming the page that
came before: no remembered ``session`` / ``always`` grant, no ``preapproved`` name and no
policy that lets the tool run without asking covers it (a denied tool stays denied). Without
an approval channel such a call is refused.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from coding_agent.workspace import Workspace
from lemon_agent import Tool, ToolContext, ToolError, ToolRegistry, ToolResult
from lemon_core import ApprovalCapacityError, ExecApprovals
from lemon_core.cron import CRON_CHANGING_ACTIONS, CRON_TOOL
from lemon_core.events import ApprovalDecision, ApprovalPending
from lemon_core.execution import ToolPolicy

__all__ = [
    "ACTION_APPROVALS",
    "DEFAULT_TOOL_POLICY",
    "FILE_TOOLS",
    "READ_ONLY_TOOLS",
    "TAINT_FREE",
    "ApprovalHooks",
    "GateContext",
    "RunTaint",
    "approval_action",
    "check_gate",
    "gate_tools",
    "shell_action",
]

DEFAULT_TOOL_POLICY: Final = ToolPolicy(
    require_approval=frozenset({"write", "edit", "bash", "remember", "forget", CRON_TOOL})
)
"""read, ls, find, grep (inside the workspace), todo run; write, edit and bash need an approval
(``cron`` only for the actions that create, change or delete a job: :data:`ACTION_APPROVALS`)."""

ACTION_APPROVALS: Final[Mapping[str, frozenset[str]]] = {CRON_TOOL: CRON_CHANGING_ACTIONS}
"""Tools whose ``action`` argument decides whether a call is effectful: when the policy says
such a tool needs an approval, only a call with one of these actions asks (``cron`` ``list``,
``pause``, ``resume`` and ``run`` do not; ``add``, ``update`` and ``remove`` do)."""

READ_ONLY_TOOLS: Final = frozenset({"read", "ls", "find", "grep"})
"""File tools that only read: free inside the workspace, asked for outside it."""
FILE_TOOLS: Final = READ_ONLY_TOOLS | {"write", "edit"}
"""Tools whose ``path`` argument is checked (secret files are refused for all of them)."""

TAINT_FREE: Final = frozenset({"read", "ls", "find", "grep", "todo", "read_skill", "web_search",
                               "web_fetch"})  # fmt: skip
"""Tools that keep running as the policy says after web content entered the run (they read,
or only note; ``web_fetch`` only for a URL that carries no data). Every other tool asks afresh."""
_DATA_QUERY_CHARS: Final = 100


@dataclass(slots=True)
class RunTaint:
    """Whether web content has entered the run, and from where (loop-only, one per run)."""

    sources: list[str] = field(default_factory=list)
    """The URLs (or ``search: <query>``) whose content the model has read, oldest first."""

    def mark(self, source: str) -> None:
        """Record that content from ``source`` reached the model."""
        if source not in self.sources:
            self.sources.append(source)
        del self.sources[:-16]  # bounded: the latest pages are the ones worth naming

    @property
    def latest(self) -> str | None:
        return self.sources[-1] if self.sources else None


def carries_data(url: object) -> bool:
    """Whether a ``web_fetch`` URL carries data out: a query string over 100 characters."""
    if not isinstance(url, str):
        return False
    _, _, query = url.partition("?")
    return len(query.partition("#")[0]) > _DATA_QUERY_CHARS


def taint_applies(name: str, arguments: Mapping[str, Any]) -> bool:
    """Whether a call of ``name`` must ask afresh in a tainted run."""
    if name == "web_fetch":
        return carries_data(arguments.get("url"))
    if name == "browser":  # typing into a page or pressing keys can send data out
        action = arguments.get("action")
        if action == "open":
            return carries_data(arguments.get("url"))
        return action in ("type", "press")
    if name == CRON_TOOL:  # listing the agent's jobs only reads
        return arguments.get("action") != "list"
    return name not in TAINT_FREE


# Characters that make a shell line more than one plain command: chaining (; & |), grouping
# and subshells (( )), redirection (< >); shlex.split with punctuation_chars emits them as
# separate tokens unless they are quoted.
_OPERATORS: Final = frozenset(";&|()<>")


# Characters whose meaning depends on quoting (expansion, globbing, escapes, comments,
# assignments): with any of them, two commands with the same argument list after shlex can do
# different things (``rm '*'`` removes one file, ``rm *`` every file), so such a command is
# keyed by its exact text. ``=`` only matters next to quotes: ``'FOO=1' ls`` runs a command
# named ``FOO=1``, ``FOO=1 ls`` runs ``ls`` with FOO set.
_QUOTE_SENSITIVE: Final = frozenset("$`*?[]{}~\\#!")
_QUOTES: Final = frozenset("'\"")


def shell_action(command: str) -> dict[str, Any]:
    """The approval key of a shell ``command``, judged as a whole.

    A single plain command made only of words whose meaning quoting cannot change becomes its
    normalised argument list (``ls  -la`` and ``'ls' -la`` are the same action). Anything else
    is keyed by the exact whole command, so only an approval of that exact text covers it:
    chaining (``;``, ``&&``, ``||``), pipes, background jobs, subshells, redirection (``>``,
    ``<``, to any file), command substitution (``$(...)``, backticks), variables, globs,
    ``~``, escapes, comments, quoted assignments (``'FOO=1' cmd``), several lines, or text shlex
    cannot split. Wrappers (``env``, ``xargs``, ``sh -c``, ``bash -c``, ``sudo``, ...) get no prefix
    rule: their whole argument list (the wrapped command included) is the key.
    """
    compound: dict[str, Any] = {"shell": "exact", "command": command}
    if "\n" in command or "\r" in command or not _QUOTE_SENSITIVE.isdisjoint(command):
        return compound
    if "=" in command and not _QUOTES.isdisjoint(command):
        return compound
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = ""
        tokens = list(lexer)
    except ValueError:
        return compound
    if not tokens or any(tok and set(tok) <= _OPERATORS for tok in tokens):
        return compound
    return {"shell": "argv", "argv": tokens}


def approval_action(
    tool: str, arguments: Mapping[str, Any], workspace: Workspace
) -> dict[str, Any]:
    """What a call of ``tool`` would do, as the approval (and grant) key sees it."""
    if tool == "bash":
        command = arguments.get("command")
        return shell_action(command if isinstance(command, str) else repr(command))
    if tool in FILE_TOOLS:
        raw = arguments.get("path", ".")
        try:
            path = str(workspace.resolve(raw))
        except ToolError:
            path = repr(raw)
        return {"path": path}
    return dict(arguments)


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalHooks:
    """Called around an approval so the run can show it (an ``approval`` action)."""

    requested: Callable[[str, ApprovalPending], None]
    """``(tool_call_id, pending)`` when an approval starts waiting."""
    resolved: Callable[[str, str, ApprovalDecision], None]
    """``(tool_call_id, approval_id, decision)`` when it ended."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GateContext:
    """Who is asking: the run, session and agent the approvals belong to."""

    policy: ToolPolicy
    workspace: Workspace
    approvals: ExecApprovals | None = None
    run_id: str | None = None
    session_id: str | None = None
    session_key: str | None = None
    agent_id: str | None = None
    approval_timeout_s: float | None = 300.0
    hooks: ApprovalHooks | None = None
    preapproved: frozenset[str] = frozenset()
    """The run's ``preapproved`` tool names: a read-only tool named here reads outside the
    workspace without asking (only by name: ``ALL_TOOLS`` does not lift it)."""
    taint: RunTaint = field(default_factory=RunTaint)
    """Marked by the web tools when web content reaches the model (see the module docstring)."""


def gate_tools(registry: ToolRegistry, gate: GateContext) -> ToolRegistry:
    """``registry`` with every tool checked against ``gate.policy`` before it runs."""
    return ToolRegistry(_gated(registry.get(name), gate) for name in registry.names())


def _gated(tool: Tool | None, gate: GateContext) -> Tool:
    assert tool is not None
    inner = tool.execute

    async def execute(ctx: ToolContext) -> ToolResult | str:
        await check_gate(ctx, gate)
        return await inner(ctx)

    return Tool(
        name=tool.name, description=tool.description, parameters=tool.parameters, execute=execute
    )


async def check_gate(ctx: ToolContext, gate: GateContext) -> None:
    """Raise :class:`~lemon_agent.ToolError` (an error result the model sees) unless the call
    ``ctx`` may run under ``gate``: denied tools never run; tools that need an approval wait for
    it."""
    name = ctx.name
    if not gate.policy.permits(name):
        raise ToolError(
            f"Tool {name!r} is denied by this run's tool policy; it did not run. Do the task "
            "another way or ask the user to allow it."
        )
    outside: Path | None = None
    if name in FILE_TOOLS:
        # Resolving symlinks touches the filesystem: off the event loop.
        refusal, outside = await asyncio.to_thread(_file_target, name, ctx.arguments, gate)
        if refusal is not None:
            raise ToolError(refusal)
    tainted_by = gate.taint.latest
    if tainted_by is not None and taint_applies(name, ctx.arguments):
        await _approve(ctx, gate, outside, after_web=tainted_by)
        return
    # Outside the workspace a read-only tool asks unless the run's ``preapproved`` names it;
    # write and edit ask as the policy says, and when they ask, the question says the path is
    # outside (``outside`` is passed on).
    read_outside = outside is not None and name in READ_ONLY_TOOLS
    asks = gate.policy.needs_approval(name)
    if asks and name in ACTION_APPROVALS:
        asks = ctx.arguments.get("action") in ACTION_APPROVALS[name]
    if asks or (read_outside and name not in gate.preapproved):
        await _approve(ctx, gate, outside)


def _file_target(
    name: str, arguments: Mapping[str, Any], gate: GateContext
) -> tuple[str | None, Path | None]:
    """``(refusal, outside)`` for a file tool's path: why it is refused (a secret file), and the
    resolved path when the tool would reach outside the workspace. A missing or invalid path is
    left to the tool (it reports it)."""
    raw = arguments.get("path", ".")
    if not isinstance(raw, str) or not raw.strip() or "\0" in raw:
        return None, None  # the tool reports the bad path
    workspace = gate.workspace
    written = workspace.absolute(raw)
    reason = workspace.secret_reason(written)
    if reason is not None:
        shown = workspace.show(Path(os.path.normpath(written)))
        return f"Tool {name!r} did not run: {shown} is refused: {reason}.", None
    target = workspace.resolve(raw)
    if not workspace.contains(target):
        return None, target
    return None, None


async def _approve(
    ctx: ToolContext, gate: GateContext, outside: Path | None = None, after_web: str | None = None
) -> None:
    name = ctx.name
    where = (
        f" to reach {outside}, which is outside the workspace ({gate.workspace.cwd})"
        if outside is not None
        else ""
    )
    if after_web is not None:
        where += (
            f" (web content from {after_web} entered this run: nothing a page says may make a "
            "tool act without the person, so it asks afresh)"
        )
    if gate.approvals is None:
        raise ToolError(
            f"Tool {name!r} needs an approval{where}, but this run has no approval channel "
            "(nobody to ask); it did not run. "
            + (
                "Tell the user what you would run and why; they can do it themselves."
                if after_web is not None
                else "Work inside the workspace, or ask the user to copy what you need into it."
                if outside is not None and name in READ_ONLY_TOOLS
                else "Work inside the workspace, or ask the user to make the change."
                if outside is not None
                else "Configure the executor with ExecApprovals, or allow the tool in the policy."
            )
        )
    if name in FILE_TOOLS:  # resolving the path touches the filesystem: off the event loop
        action = await asyncio.to_thread(approval_action, name, ctx.arguments, gate.workspace)
    else:
        action = approval_action(name, ctx.arguments, gate.workspace)
    hooks = gate.hooks

    def requested(pending: ApprovalPending) -> None:
        if hooks is not None:
            hooks.requested(ctx.tool_call_id, pending)

    try:
        outcome = await gate.approvals.request(
            tool=name,
            action=action,
            run_id=gate.run_id,
            session_id=gate.session_id,
            session_key=gate.session_key,
            agent_id=gate.agent_id,
            tool_call_id=ctx.tool_call_id,
            rationale=f"{name} {_describe(action)}"
            + (" (outside the workspace)" if outside is not None else "")
            + (f" (after reading {after_web})" if after_web is not None else ""),
            deadline_s=gate.approval_timeout_s,
            on_requested=requested,
            use_grants=after_web is None,
        )
    except ApprovalCapacityError as exc:
        raise ToolError(f"Tool {name!r} did not run: {exc}") from None
    if hooks is not None and outcome.approval_id is not None:
        hooks.resolved(ctx.tool_call_id, outcome.approval_id, outcome.decision)
    if outcome.approved:
        return
    reason = {
        ApprovalDecision.DENY: "the approval was denied",
        ApprovalDecision.TIMEOUT: "no decision came before the approval deadline",
        ApprovalDecision.EXPIRED: "the run that asked ended",
        ApprovalDecision.CANCELLED: "the request was withdrawn",
    }.get(outcome.decision, outcome.decision.value)
    raise ToolError(
        f"Tool {name!r} was not approved{where} ({outcome.decision.value}: {reason}); it did "
        "not run."
    )


def _describe(action: Mapping[str, Any]) -> str:
    if "argv" in action:
        return shlex.join(action["argv"])
    if "command" in action:
        return str(action["command"])
    if "path" in action:
        return str(action["path"])
    return repr(dict(action))
