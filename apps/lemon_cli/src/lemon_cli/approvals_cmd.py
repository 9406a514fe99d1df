"""``lemon approvals list|revoke``: the remembered ("always" and per-agent) approval grants.

Works on the durable grants in the home's configured store (``[store]``: the SQLite file
``$LEMON_HOME/store/lemon.sqlite3``, or the PostgreSQL schema several daemons share) directly,
through lemon_core's grant API (``ExecApprovals.list_grants`` / ``revoke_grant`` over an
``ApprovalGrantStore``), so no Lemon process needs to be running. A running daemon decides from
that same store at every request, so ``list`` shows its live grants and a revocation is in force
on every daemon sharing the store at once. ``session`` grants are never stored: they live in the
process that made them and end with their session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Annotated, Any, Final, TypeVar

import typer

from lemon_cli._groups import command_group
from lemon_cli._home import require_home
from lemon_cli.errors import LemonCliError

if TYPE_CHECKING:  # imported when a command runs: `lemon --help` stays fast
    from lemon_core import ExecApprovals
    from lemon_core.approvals import ApprovalGrant, GrantScope
    from lemon_core.config import LoadedConfig

__all__ = ["approvals_app"]

approvals_app = command_group(
    "List and revoke remembered approvals (the 'always' and per-agent grants)."
)

#: The shortest key prefix ``revoke`` accepts (a prefix this long is almost always unique).
MIN_PREFIX: Final = 6
_SHOWN_KEY: Final = 12
_JSON_VERSION: Final = 1
_SCOPES: Final = ("agent", "global")
_RUNNING_NOTE: Final = (
    "In force at once: a running daemon on this store asks again for what was revoked."
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


class _Target:
    """The home's configured store: where (for messages), whether it exists yet."""

    def __init__(self, loaded: LoadedConfig) -> None:
        from lemon_runtime import store_path

        self.loaded = loaded
        self.backend = loaded.config.store.backend
        self.path = store_path(loaded.home)
        if self.backend == "postgres":
            self.where = f"the PostgreSQL store (schema {loaded.config.store.schema})"
        else:
            self.where = str(self.path)

    @property
    def exists(self) -> bool:
        return self.backend == "postgres" or self.path.exists()


def _target() -> _Target:
    from lemon_core.config import ConfigError, lemon_home, load_config

    home = lemon_home()
    require_home(home, create=False)
    try:
        loaded = load_config(home=home)
    except ConfigError as exc:
        raise _Failure(
            "the configuration is invalid: " + "; ".join(i.render() for i in exc.issues), code=2
        ) from None
    if loaded.config.store.backend == "memory":
        raise _Failure(
            'the store is the memory store ([store] backend = "memory"): no grant outlives '
            "the process that made it, so there is nothing to list or revoke",
            code=2,
        )
    return _Target(loaded)


async def _with_approvals(target: _Target, work: Callable[[ExecApprovals], Awaitable[T]]) -> T:
    import sqlite3

    from lemon_core import ExecApprovals
    from lemon_core.bus import Bus
    from lemon_core.config import ConfigError
    from lemon_core.store import ApprovalGrantStore, StoreError
    from lemon_runtime import open_configured_store

    try:
        store = await open_configured_store(target.loaded.config, target.loaded.home)
    except ConfigError as exc:
        raise _Failure(exc.issues[0].render(), code=2) from None
    except (StoreError, OSError, sqlite3.Error) as exc:
        raise _Failure(f"cannot open {target.where}: {exc}") from None
    try:
        approvals = ExecApprovals(Bus(), grant_store=ApprovalGrantStore(store))
        return await work(approvals)
    except (StoreError, OSError, sqlite3.Error) as exc:
        raise _Failure(f"{target.where} failed: {exc}") from None
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
    import datetime as dt

    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _record(grant: ApprovalGrant) -> dict[str, Any]:
    import datetime as dt

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
    import asyncio

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
    """List the remembered grants (newest last): key, scope, agent, tool, when, what.

    These are the live grants of every daemon on this store (they decide from it)."""

    import json

    async def work() -> int:
        target = _target()
        wanted = _check_scope(scope)
        grants: list[ApprovalGrant] = []
        if target.exists:
            grants = _filtered(
                await _with_approvals(target, lambda a: a.list_grants()), wanted, agent
            )
        if as_json:
            document = {"version": _JSON_VERSION, "store": target.where,
                        "grants": [_record(g) for g in grants]}  # fmt: skip
            typer.echo(json.dumps(document, indent=2))
            return 0
        if not grants:
            where = target.where if target.exists else f"{target.where} (no store yet)"
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
    """Forget remembered grants: the one whose key starts with KEY, or all of them (--all).

    In force at once on every running daemon on this store (they decide from it)."""

    async def work() -> int:
        target = _target()
        wanted = _check_scope(scope)
        if (key is None) == (not revoke_all):
            raise _Failure("give a grant KEY (see `lemon approvals list`) or --all", code=2)
        if key is not None and len(key.strip()) < MIN_PREFIX:
            raise _Failure(
                f"the key prefix {key!r} is too short: give at least {MIN_PREFIX} characters",
                code=2,
            )
        if not target.exists:
            typer.echo(
                f"No remembered approvals in {target.where} (no store yet); nothing to revoke."
            )
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

        revoked = await _with_approvals(target, revoke_matching)
        if not revoked:
            typer.echo("No remembered approvals matched; nothing was revoked.")
            return 0
        for grant in revoked:
            typer.echo(f"Revoked the {_describe(grant)}.")
        typer.echo(_RUNNING_NOTE)
        return 0

    _run(work)
