"""``lemon goal``: a session's goal on this home's running daemon (``set``, ``status``, ``pause``,
``resume``, ``clear``).

The goals belong to the daemon (lemon_memory registers ``goal.*`` on the control plane); this
command is one of their clients, like the terminal UI: it finds the running daemon (its recorded
URL), connects with this home's local token (or ``LEMON_CONTROL_PLANE_TOKEN``) and calls the
method. With no daemon, or a daemon without goals, it says what to do; a refused input (an
empty objective, a session without a goal) is the daemon's own message, exit 2.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from lemon_cli._output import make_console
from lemon_cli._wire_call import daemon_call

__all__ = ["goal_app"]

goal_app = typer.Typer(
    help="A session's goal on the running daemon (set, status, pause, resume, clear).",
    no_args_is_help=True,
)

SessionArg = Annotated[str, typer.Argument(help="The session key, e.g. agent:default:main.")]


def _call(method: str, params: dict[str, Any]) -> Any:
    from lemon_core.sessions import check_session_key

    try:
        check_session_key(params["sessionKey"])
    except ValueError as exc:
        make_console(emoji=False, stderr=True, highlight=False).print(
            f"lemon goal: {exc}", markup=False
        )
        raise typer.Exit(2) from None
    return daemon_call("lemon goal", method, params, feature="goals")


def _show(goal: Any, as_json: bool) -> None:
    import json

    if as_json:
        typer.echo(json.dumps({"goal": goal}))
    elif not isinstance(goal, dict):
        typer.echo("no goal")
    else:
        done = f"{goal.get('continuationCount', 0)}/{goal.get('maxContinuations', '?')}"
        typer.echo(f"{goal.get('status')}: {goal.get('objective')} (continuations {done})")


JsonOpt = Annotated[bool, typer.Option("--json", help="Print the goal as JSON.")]


@goal_app.command("set")
def set_goal(
    session: SessionArg,
    objective: Annotated[str, typer.Argument(help="What the session should achieve.")],
    as_json: JsonOpt = False,
) -> None:
    """Set (or replace) the session's goal; it is active at once."""
    _show(_call("goal.set", {"sessionKey": session, "objective": objective})["goal"], as_json)


@goal_app.command("status")
def status(session: SessionArg, as_json: JsonOpt = False) -> None:
    """Show the session's goal ("no goal" when it has none)."""
    _show(_call("goal.status", {"sessionKey": session}).get("goal"), as_json)


def _transition(name: str, doc: str) -> None:
    def command(session: SessionArg, as_json: JsonOpt = False) -> None:
        _show(_call(f"goal.{name}", {"sessionKey": session}).get("goal"), as_json)

    command.__doc__ = doc
    goal_app.command(name)(command)


_transition("pause", "Pause the session's goal (runs no longer see it).")
_transition("resume", "Resume the session's paused goal.")
_transition("clear", "Clear the session's goal.")
