"""``python -m lemon_control_plane tokens create|list|rotate|revoke|local``: the token store of
``$LEMON_HOME`` (see :mod:`lemon_control_plane.tokens`). A running daemon sees the change
within a second; a revoked token's connections are closed. ``tokens local`` prints the home's
local token (made if there is none yet; ``--env``: as a ``LEMON_CONTROL_PLANE_TOKEN=`` line),
for a client that does not read it itself (Lemon's own terminal UI).

The user's command is ``lemon tokens`` (lemon_cli's ``tokens_cmd``: per-verb help, ``--json``),
on the same :class:`~lemon_control_plane.tokens.TokenStore`; this one serves an environment
without lemon_cli."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from lemon_control_plane.config import TOKEN_ENV
from lemon_control_plane.local_token import ensure_local_token, local_token_path
from lemon_control_plane.tokens import TOKEN_SCOPES, TokenStore, tokens_path
from lemon_core.config import lemon_home

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lemon_control_plane")
    groups = parser.add_subparsers(dest="group", required=True)
    tokens = groups.add_parser("tokens", help="control-plane tokens of $LEMON_HOME")
    verbs = tokens.add_subparsers(dest="verb", required=True)
    create = verbs.add_parser("create", help="a new token (printed once)")
    create.add_argument("name")
    create.add_argument(
        "--scopes", default=",".join(TOKEN_SCOPES), help=f"some of {','.join(TOKEN_SCOPES)}"
    )
    verbs.add_parser("list", help="the tokens (never their secrets)")
    for verb in ("rotate", "revoke"):
        verbs.add_parser(verb, help=f"{verb} a token by id").add_argument("id")
    local = verbs.add_parser(
        "local", help="print this home's local token (the owner's: every scope; keep it secret)"
    )
    local.add_argument(
        "--env", action="store_true", help=f"print it as a shell line: export {TOKEN_ENV}=..."
    )
    args = parser.parse_args(argv)
    home = lemon_home()
    store = TokenStore(tokens_path(home))
    try:
        if args.verb == "local":
            token = ensure_local_token(local_token_path(home))
            print(f"export {TOKEN_ENV}={token}" if args.env else token)
        elif args.verb == "create":
            scopes = tuple(s.strip() for s in args.scopes.split(",") if s.strip())
            entry, secret = store.create(args.name, scopes)
            print(f"created token {entry.id} ({entry.name}; {', '.join(entry.scopes)})")
            print(f"token (shown once): {secret}")
        elif args.verb == "list":
            for t in store.entries():
                state = "revoked" if not t.active else "active"
                print(f"{t.id}  {t.name}  {','.join(t.scopes)}  {state}")
        elif args.verb == "rotate":
            entry, secret = store.rotate(args.id)
            print(f"rotated token {entry.id}; the old one no longer works")
            print(f"token (shown once): {secret}")
        else:
            entry = store.revoke(args.id)
            print(f"revoked token {entry.id} ({entry.name})")
    except (KeyError, ValueError) as exc:  # ControlPlaneConfigError is a ValueError
        print(f"error: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
