"""``lemon agents``: the agent definitions a run's ``task`` tool may start children as
(``list``, ``show``, ``approve``, ``revoke``).

The definitions are files (:mod:`coding_agent.agent_definitions`): the built-ins, the home's
``agents/*.md`` and a project's ``.lemon/agents/*.md``, which a run uses only once approved
here (in that project). No daemon is needed: a run reads the files when it starts.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from coding_agent.agent_definitions import AgentCatalog, AgentDefinition

__all__ = ["agents_app"]

#: Terminal control characters (a definition file comes from a repository): shown as "?".
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

agents_app = typer.Typer(
    help="Agent definitions for subagents (list, show, approve, revoke).",
    no_args_is_help=True,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
NameArg = Annotated[str, typer.Argument(help="The definition's name, e.g. explore.")]


def _fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(f"lemon agents: {message}", err=True)
    return typer.Exit(code)


def _catalog() -> tuple[AgentCatalog, Path]:
    from coding_agent.agent_definitions import load_agent_definitions
    from lemon_core.config import lemon_home

    home = lemon_home()
    return load_agent_definitions(home, Path.cwd()), home


def _row(definition: AgentDefinition, status: str) -> dict[str, Any]:
    return {
        "name": definition.name,
        "description": definition.description,
        "source": definition.source,
        "status": status,
        "tools": sorted(definition.tools) if definition.tools is not None else None,
        "model": definition.model,
        "maxTurns": definition.max_turns,
        "path": str(definition.path) if definition.path is not None else None,
    }


@agents_app.command("list")
def list_agents(as_json: JsonOpt = False) -> None:
    """The definitions a run here may use, project ones awaiting approval, and broken files."""
    catalog, _home = _catalog()
    rows = [_row(d, "active") for d in catalog.definitions.values()]
    rows += [_row(d, "needs approval") for d in catalog.pending]
    problems = [{"path": str(path), "problem": text} for path, text in catalog.problems]
    if as_json:
        typer.echo(json.dumps({"agents": rows, "problems": problems}))
        return
    for row in rows:
        tools = ", ".join(row["tools"]) if row["tools"] is not None else "the parent's tools"
        line = f"{row['name']} ({row['source']}, {row['status']}): {row['description']}"
        typer.echo(f"{line} [tools: {tools}]")
        if row["status"] == "needs approval":
            typer.echo(f"  approve it with: lemon agents approve {row['name']}")
    for problem in problems:
        typer.echo(f"skipped: {problem['problem']}")


def _find(name: str) -> tuple[AgentDefinition, str]:
    catalog, _home = _catalog()
    for pending in catalog.pending:
        if pending.name == name:
            return pending, "needs approval"
    definition = catalog.definitions.get(name)
    if definition is None:
        for path, text in catalog.problems:
            if path.stem == name:
                raise _fail(text, 2)
        known = ", ".join(sorted(catalog.definitions))
        raise _fail(f"no agent definition named {name!r} (known: {known})", 2)
    return definition, "active"


@agents_app.command("show")
def show(name: NameArg, as_json: JsonOpt = False) -> None:
    """One definition: where it comes from, its tools, model, turn limit and instructions."""
    definition, status = _find(name)
    row = _row(definition, status) | {"instructions": definition.preamble}
    if as_json:
        typer.echo(json.dumps(row))
        return
    for key in ("name", "description", "source", "status", "tools", "model", "maxTurns", "path"):
        value = row[key]
        if isinstance(value, list):
            value = ", ".join(value)
        typer.echo(f"{key}: {value if value is not None else '-'}")
    typer.echo("instructions:")
    typer.echo(_CONTROL.sub("?", definition.preamble) or "(none)")


def _project_definition(name: str) -> tuple[AgentDefinition, Path, Path]:
    from coding_agent.agent_definitions import find_project_agents
    from lemon_core.config import lemon_home

    home = lemon_home()
    directory = find_project_agents(Path.cwd(), home)
    if directory is None:
        raise _fail("no .lemon/agents directory here or above; run this in the project", 2)
    definition, _status = _find(name)
    if definition.source != "project" or definition.path is None:
        raise _fail(f"{name!r} is not a definition of this project ({directory})", 2)
    return definition, directory, home


@agents_app.command("approve")
def approve(name: NameArg) -> None:
    """Let runs in this project use its definition NAME (until the file changes)."""
    from coding_agent.agent_definitions import AgentApprovals, agent_file_digest

    definition, directory, home = _project_definition(name)
    assert definition.path is not None
    AgentApprovals(home).approve(directory, name, agent_file_digest(definition.path))
    tools = ", ".join(sorted(definition.tools)) if definition.tools is not None else "all"
    typer.echo(f"approved {name} for {directory} (tools at most: {tools})")


@agents_app.command("revoke")
def revoke(name: NameArg) -> None:
    """Withdraw the approval of this project's definition NAME."""
    from coding_agent.agent_definitions import AgentApprovals, find_project_agents
    from lemon_core.config import lemon_home

    home = lemon_home()
    directory = find_project_agents(Path.cwd(), home)
    if directory is None or not AgentApprovals(home).revoke(directory, name):
        raise _fail(f"{name!r} was not approved for this project", 1)
    typer.echo(f"revoked {name} for {directory}")
