"""``lemon tokens create|list|rotate|revoke|local``: the control plane's token store of
``$LEMON_HOME`` (:mod:`lemon_control_plane.tokens`: ``control_plane/tokens.json``, hashed, 0600).

A running daemon sees a change within a second; a revoked or rotated token's connections are
closed. A token's secret is printed once, by ``create`` and ``rotate``; ``list`` never shows a
secret nor its hash. ``local`` prints the home's local token (the owner's, every scope; made if
there is none yet), ``--env`` as ``export LEMON_CONTROL_PLANE_TOKEN=...``. Bad input (an
unknown scope or id, a blank name) is one line on stderr and exit 2; a token file that cannot
be read, exit 1; an unusable home, exit 2 (:func:`lemon_cli._home.require_home`). Imports
are made inside the commands, so ``lemon --help`` stays fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, Final, NoReturn

import typer

from lemon_cli._groups import command_group

if TYPE_CHECKING:
    from lemon_control_plane.tokens import StoredToken, TokenStore

__all__ = ["tokens_app"]

tokens_app = command_group(
    "Control-plane tokens of this $LEMON_HOME (stored hashed; a secret is shown once)."
)

_JSON_VERSION: Final = 1
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]


def _fail(message: str, code: int) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _store(*, create: bool) -> TokenStore:
    """The home's token store (an unusable home: one line, exit 2)."""
    from lemon_cli._home import require_home
    from lemon_control_plane.tokens import TokenStore, tokens_path
    from lemon_core.config import lemon_home

    home = lemon_home()
    require_home(home, create=create)
    return TokenStore(tokens_path(home))


@contextmanager
def _errors() -> Iterator[None]:
    """The store's refusals as one line: a damaged token file exits 1, bad input 2."""
    from lemon_control_plane.errors import ControlPlaneConfigError

    try:
        yield
    except ControlPlaneConfigError as exc:  # before ValueError: it is one
        _fail(str(exc), 1)
    except KeyError as exc:  # an unknown id
        _fail(f"{exc.args[0] if exc.args else exc}; `lemon tokens list` shows them", 2)
    except ValueError as exc:
        _fail(str(exc), 2)


def _row(entry: StoredToken) -> dict[str, Any]:
    """A token as ``--json`` shows it: never its secret, nor its hash."""
    return {
        "id": entry.id,
        "name": entry.name,
        "scopes": list(entry.scopes),
        "state": "active" if entry.active else "revoked",
        "created_at_ms": entry.created_at_ms,
        "revoked_at_ms": entry.revoked_at_ms,
    }


def _print_secret(entry: StoredToken, secret: str, headline: str, as_json: bool) -> None:
    import json

    if as_json:
        typer.echo(json.dumps({"version": _JSON_VERSION, **_row(entry), "token": secret}, indent=2))
        return
    typer.echo(headline)
    typer.echo(f"token (shown once): {secret}")


@tokens_app.command()
def create(
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="What the token is for (shown by list).")
    ],
    scopes: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated, some of admin, approvals, read, write (admin "
            "includes pairing); default: all of them."
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Create a token; its secret is printed once (keep it: only its hash is stored)."""
    from lemon_control_plane.tokens import TOKEN_SCOPES

    wanted = (
        TOKEN_SCOPES if scopes is None else tuple(s.strip() for s in scopes.split(",") if s.strip())
    )
    with _errors():
        entry, secret = _store(create=True).create(name, wanted)
    headline = f"created token {entry.id} ({entry.name}; {', '.join(entry.scopes)})"
    _print_secret(entry, secret, headline, as_json)


@tokens_app.command("list")
def list_tokens(as_json: JsonOption = False) -> None:
    """List the tokens: id, name, scopes, active or revoked (never their secrets)."""
    import json

    with _errors():
        entries = _store(create=False).entries()
    if as_json:
        document = {"version": _JSON_VERSION, "tokens": [_row(t) for t in entries]}
        typer.echo(json.dumps(document, indent=2))
        return
    if not entries:
        typer.echo("no tokens yet (make one: lemon tokens create NAME)")
        return
    for t in entries:
        typer.echo(f"{t.id}  {t.name}  {','.join(t.scopes)}  {'active' if t.active else 'revoked'}")


@tokens_app.command()
def rotate(
    token_id: Annotated[str, typer.Argument(metavar="ID", help="The token's id (from list).")],
    as_json: JsonOption = False,
) -> None:
    """Give a token a new secret (printed once); the old one stops working at once."""
    with _errors():
        entry, secret = _store(create=False).rotate(token_id)
    _print_secret(entry, secret, f"rotated token {entry.id}; the old one no longer works", as_json)


@tokens_app.command()
def revoke(
    token_id: Annotated[str, typer.Argument(metavar="ID", help="The token's id (from list).")],
) -> None:
    """Revoke a token: it never connects again, and its open connections are closed."""
    with _errors():
        entry = _store(create=False).revoke(token_id)
    typer.echo(f"revoked token {entry.id} ({entry.name})")


@tokens_app.command()
def local(
    env: Annotated[
        bool,
        typer.Option(
            "--env", help="Print it as a shell line: export LEMON_CONTROL_PLANE_TOKEN=..."
        ),
    ] = False,
) -> None:
    """Print this home's local token (the owner's: every scope; keep it secret), made if there
    is none yet, for a client that does not read it itself."""
    from lemon_cli._home import require_home
    from lemon_control_plane.config import TOKEN_ENV
    from lemon_control_plane.local_token import ensure_local_token, local_token_path
    from lemon_core.config import lemon_home

    home = lemon_home()
    require_home(home, create=True)
    with _errors():
        token = ensure_local_token(local_token_path(home))
    typer.echo(f"export {TOKEN_ENV}={token}" if env else token)
