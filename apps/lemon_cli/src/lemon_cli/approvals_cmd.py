"""``lemon approvals list|revoke``: the remembered ("always" and per-agent) approval grants.

Works on the durable grants in ``$LEMON_HOME/store/lemon.sqlite3`` directly, through
lemon_core's grant API (``ExecApprovals.list_grants`` / ``revoke_grant`` over an
``ApprovalGrantStore``), so no Lemon process needs to be running. ``session`` grants are never
stored: they live in the process that made them and end with their session. A Lemon process
running while a grant is revoked keeps the grants it loaded at start until it restarts.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sqlite3
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, TypeVar

import typer

from lemon_cli._home import require_home
from lemon_cli.errors import LemonCliError

if TYPE_CHECKING:  # imported when a command runs: `lemon --help` stays fast
    from lemon_core import ExecApprovals
    from lemon_core.approvals import ApprovalGrant, GrantScope

__all__ = ["approvals_app"]

approvals_app = typer.Typer(
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="List and revoke remembered approvals (the 'always' and per-agent grants).",
    no_args_is_help=True,
)

#: The shortest key prefix ``revoke`` accepts (a prefix this long is almost always unique).
MIN_PREFIX: Final = 6
_SHOWN_KEY: Final = 12
_JSON_VERSION: Final = 1
_SCOPES: Final = ("agent", "global")
_RUNNING_NOTE: Final = (
    "A Lemon process running now keeps the grants it loaded at start until it restarts."
)

T = TypeVar("T")

ScopeOption = Annotated[
    str | None, typer.Option("--scope", help="only grants of this scope: agent or global")
]
AgentOption = Annotated[str | None, typer.Option("--agent", help="only grants of this agent id")]


class _Failure(LemonCliError):
    """A clear one-line failure: the message and the exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


async def _with_approvals(path: Path, work: Callable[[ExecApprovals], Awaitable[T]]) -> T:
    from lemon_core import ExecApprovals
    from lemon_core.bus import Bus
    from lemon_core.store import ApprovalGrantStore, StoreError
    from lemon_infra import SQLiteStore

    try:
        store = await SQLiteStore.open(path)
    except (StoreError, OSError, sqlite3.Error) as exc:
        raise _Failure(f"cannot open the store {path}: {exc}") from None
    try:
        approvals = ExecApprovals(Bus(), grant_store=ApprovalGrantStore(store))
        return await work(approvals)
    except (StoreError, OSError, sqlite3.Error) as exc:
        raise _Failure(f"the store {path} failed: {exc}") from None
    finally:
        await store.close()


def _check_scope(scope: str | None) -> str | None:
    if scope is not None and scope not in _SCOPES:
        raise _Failure(
            f"unknown scope {scope!r}: use agent or global (session grants are never stored; "
            "they end with their session)",
            code=2,
        )
    return scope


def _filtered(
    grants: tuple[ApprovalGrant, ...], scope: str | None, agent: str | None
) -> list[ApprovalGrant]:
    return [
        g
        for g in grants
        if (scope is None or g.scope == scope)
        and (agent is None or (g.scope == "agent" and g.owner == agent))
    ]


def _when(ms: int) -> str:
    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _record(grant: ApprovalGrant) -> dict[str, Any]:
    return {
        "key": grant.key,
        "scope": grant.scope,
        "owner": grant.owner,
        "tool": grant.tool,
        "granted_at_ms": grant.granted_at_ms,
        "granted_at": dt.datetime.fromtimestamp(grant.granted_at_ms / 1000, tz=dt.UTC)
        .isoformat()
        .replace("+00:00", "Z"),
        "approval_id": grant.approval_id,
        "action": grant.action_preview,
    }


def _describe(grant: ApprovalGrant) -> str:
    who = "for every agent" if grant.scope == "global" else f"for agent {grant.owner}"
    return (
        f"{grant.scope} grant {grant.key[:_SHOWN_KEY]} ({grant.tool} {who}: {grant.action_preview})"
    )


def _run(work: Callable[[], Coroutine[Any, Any, int]]) -> None:
    try:
        code = asyncio.run(work())
    except _Failure as failure:
        typer.echo(f"error: {failure}", err=True)
        raise typer.Exit(failure.code) from None
    raise typer.Exit(code)


@approvals_app.command("list")
def list_grants(
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document")] = False,
    scope: ScopeOption = None,
    agent: AgentOption = None,
) -> None:
    """List the remembered grants (newest last): key, scope, agent, tool, when, what."""
    from lemon_core.config import lemon_home
    from lemon_runtime import store_path

    home = lemon_home()
    require_home(home, create=False)
    path = store_path(home)

    async def work() -> int:
        wanted = _check_scope(scope)
        grants: list[ApprovalGrant] = []
        if path.exists():
            grants = _filtered(
                await _with_approvals(path, lambda a: a.list_grants()), wanted, agent
            )
        if as_json:
            document = {"version": _JSON_VERSION, "store": str(path),
                        "grants": [_record(g) for g in grants]}  # fmt: skip
            typer.echo(json.dumps(document, indent=2))
            return 0
        if not grants:
            where = path if path.exists() else f"{path} (no store yet)"
            typer.echo(f"No remembered approvals in {where}.")
            return 0
        rows = [("KEY", "SCOPE", "AGENT", "TOOL", "GRANTED (UTC)", "ACTION")] + [
            (g.key[:_SHOWN_KEY], g.scope, g.owner or "-", g.tool, _when(g.granted_at_ms),
             g.action_preview)
            for g in grants
        ]  # fmt: skip
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        for row in rows:
            cells = [cell.ljust(width) for cell, width in zip(row[:5], widths, strict=True)]
            typer.echo("  ".join([*cells, row[5]]).rstrip())
        typer.echo(f"\n{len(grants)} grant(s). Revoke one with: lemon approvals revoke KEY")
        return 0

    _run(work)


@approvals_app.command()
def revoke(
    key: Annotated[
        str | None,
        typer.Argument(help=f"the grant's key, or a unique prefix of it ({MIN_PREFIX}+ chars)"),
    ] = None,
    revoke_all: Annotated[
        bool, typer.Option("--all", help="revoke every grant (narrowed by --scope/--agent)")
    ] = False,
    scope: ScopeOption = None,
    agent: AgentOption = None,
) -> None:
    """Forget remembered grants: the one whose key starts with KEY, or all of them (--all)."""
    from lemon_core.config import lemon_home
    from lemon_runtime import store_path

    home = lemon_home()
    require_home(home, create=False)
    path = store_path(home)

    async def work() -> int:
        wanted = _check_scope(scope)
        if (key is None) == (not revoke_all):
            raise _Failure("give a grant KEY (see `lemon approvals list`) or --all", code=2)
        if key is not None and len(key.strip()) < MIN_PREFIX:
            raise _Failure(
                f"the key prefix {key!r} is too short: give at least {MIN_PREFIX} characters",
                code=2,
            )
        if not path.exists():
            typer.echo(f"No remembered approvals in {path} (no store yet); nothing to revoke.")
            return 0 if revoke_all else 1

        async def revoke_matching(approvals: ExecApprovals) -> list[ApprovalGrant]:
            grants = _filtered(await approvals.list_grants(), wanted, agent)
            if key is not None:
                prefix = key.strip().lower()
                grants = [g for g in grants if g.key.startswith(prefix)]
                if not grants:
                    raise _Failure(
                        f"no remembered approval has a key starting with {prefix!r}; "
                        "`lemon approvals list` shows them"
                    )
                if len(grants) > 1:
                    listed = "; ".join(_describe(g) for g in grants)
                    raise _Failure(
                        f"{len(grants)} approvals have keys starting with {prefix!r}: {listed}. "
                        "Give more of the key.",
                        code=2,
                    )
            for grant in grants:
                stored: GrantScope = "global" if grant.scope == "global" else "agent"
                await approvals.revoke_grant(stored, owner=grant.owner, key=grant.key)
            return grants

        revoked = await _with_approvals(path, revoke_matching)
        if not revoked:
            typer.echo("No remembered approvals matched; nothing was revoked.")
            return 0
        for grant in revoked:
            typer.echo(f"Revoked the {_describe(grant)}.")
        typer.echo(_RUNNING_NOTE)
        return 0

    _run(work)
