"""Control-plane tokens, stored hashed under ``$LEMON_HOME/control_plane/tokens.json``.

Each token has an id, a name, its scopes (read, write, approvals, admin; ``pairing`` is granted
with admin) and its SHA-256 hash; the token itself is shown once, when created or rotated, and
never stored. Revoking marks the entry (a revoked token never connects again); rotating gives
the entry a new token (the old one stops working). The file is rewritten atomically with mode
0600. A running control plane re-reads the file when it changes and closes the connections
of a revoked or rotated token.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from lemon_control_plane.config import hash_token
from lemon_control_plane.errors import ControlPlaneConfigError
from lemon_core.home import Home

__all__ = ["TOKEN_SCOPES", "StoredToken", "TokenStore", "tokens_path"]

#: The scopes a token can carry.
TOKEN_SCOPES: Final = ("admin", "approvals", "read", "write")
_PREFIX: Final = "lcp_"


def tokens_path(home: Path) -> Path:
    return Home(root=home).tokens


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredToken:
    """One token as stored (no secret: only its hash)."""

    id: str
    name: str
    scopes: tuple[str, ...]
    hash: str
    created_at_ms: int
    revoked_at_ms: int | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at_ms is None

    def wire_scopes(self) -> frozenset[str]:
        scopes = set(self.scopes)
        if "admin" in scopes:
            scopes.add("pairing")
        return frozenset(scopes)


class TokenStore:
    """The token file of one home (every call reads or rewrites the file)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> list[StoredToken]:
        try:
            data: Any = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise ControlPlaneConfigError(
                f"the token file {self.path} cannot be read: {exc}"
            ) from None
        try:
            return [
                StoredToken(
                    id=str(t["id"]),
                    name=str(t["name"]),
                    scopes=tuple(str(s) for s in t["scopes"]),
                    hash=str(t["hash"]),
                    created_at_ms=int(t["created_at_ms"]),
                    revoked_at_ms=None
                    if t.get("revoked_at_ms") is None
                    else int(t["revoked_at_ms"]),
                )
                for t in data["tokens"]
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise ControlPlaneConfigError(
                f"the token file {self.path} is malformed: {exc!r}"
            ) from None

    def _write(self, tokens: list[StoredToken]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_suffix(".tmp")
        body = {
            "version": 1,
            "tokens": [
                {
                    "id": t.id,
                    "name": t.name,
                    "scopes": list(t.scopes),
                    "hash": t.hash,
                    "created_at_ms": t.created_at_ms,
                    "revoked_at_ms": t.revoked_at_ms,
                }
                for t in tokens
            ],
        }
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(body, out, indent=1)
        os.replace(tmp, self.path)

    def entries(self) -> list[StoredToken]:
        return self._read()

    def create(self, name: str, scopes: tuple[str, ...] = TOKEN_SCOPES) -> tuple[StoredToken, str]:
        """A new token: its entry and the secret (shown once)."""
        unknown = sorted(set(scopes) - set(TOKEN_SCOPES))
        if unknown or not scopes:
            raise ValueError(
                f"scopes must be some of {', '.join(TOKEN_SCOPES)}; "
                f"got {', '.join(unknown) or 'none'}"
            )
        if not name.strip():
            raise ValueError("a token needs a name")
        secret = _PREFIX + secrets.token_urlsafe(32)
        entry = StoredToken(
            id=secrets.token_hex(4),
            name=name.strip(),
            scopes=tuple(sorted(set(scopes))),
            hash=hash_token(secret),
            created_at_ms=int(time.time() * 1000),
        )
        self._write([*self._read(), entry])
        return entry, secret

    def _find(self, tokens: list[StoredToken], token_id: str) -> int:
        for i, t in enumerate(tokens):
            if t.id == token_id:
                return i
        raise KeyError(f"no token with id {token_id!r}")

    def revoke(self, token_id: str) -> StoredToken:
        tokens = self._read()
        i = self._find(tokens, token_id)
        if tokens[i].active:
            tokens[i] = replace(tokens[i], revoked_at_ms=int(time.time() * 1000))
            self._write(tokens)
        return tokens[i]

    def rotate(self, token_id: str) -> tuple[StoredToken, str]:
        tokens = self._read()
        i = self._find(tokens, token_id)
        if not tokens[i].active:
            raise ValueError(f"token {token_id!r} is revoked; create a new one")
        secret = _PREFIX + secrets.token_urlsafe(32)
        tokens[i] = replace(tokens[i], hash=hash_token(secret))
        self._write(tokens)
        return tokens[i], secret

    def signature(self) -> tuple[int, int, int] | None:
        """What changes when the file does (each write replaces it: a new inode; mtime and
        size besides), ``None`` without a file."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size
