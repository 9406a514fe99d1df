"""Browser sign-ins: what the page's cookie names (a random session id, never a token), and
the one-time sign-in links ``lemon web`` opens.

A sign-in is a :class:`Grant` (the token's id, its hash, the scopes) kept server-side under a
random id; the cookie carries only that id. Guarantees:

- At most ``max_sessions`` sign-ins are kept; beyond that the oldest is signed out. Each
  expires ``ttl_s`` after it was made. A sign-in whose token is revoked or rotated is dropped
  (:meth:`BrowserLogins.retain`, called when the token store changes) and, besides, every use
  re-checks the token (the server does).
- A link's nonce works once, within ``link_ttl_s``, and only for a sign-in of the grant that
  minted it; at most ``max_links`` wait (the oldest is dropped beyond).
- Ids and nonces are 256-bit random values, kept only as SHA-256 digests.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["BrowserLogins", "Grant", "LoginStatistics", "SignIn"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Grant:
    """Whom a sign-in stands for: a token (by id and hash) and the scopes it may use."""

    token_id: str
    token_hash: str
    scopes: frozenset[str]


@dataclass(frozen=True, kw_only=True, slots=True)
class SignIn:
    """The outcome of a page's sign-in: ``session`` (the cookie's value) or why not."""

    session: str | None = None
    refused: Literal["invalid", "rate_limited"] | None = None
    retry_after_s: float = 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class LoginStatistics:
    sessions: int
    links: int
    opened: int
    expired: int
    evicted: int


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class BrowserLogins:
    """See the module docstring. ``clock`` is monotonic seconds (injectable for tests)."""

    def __init__(
        self,
        *,
        max_sessions: int = 1024,
        ttl_s: float = 12 * 3600.0,
        link_ttl_s: float = 120.0,
        max_links: int = 64,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._max_sessions = max_sessions
        self._ttl = ttl_s
        self._link_ttl = link_ttl_s
        self._max_links = max_links
        self._clock = clock
        self._sessions: OrderedDict[str, tuple[float, Grant]] = OrderedDict()
        self._links: OrderedDict[str, tuple[float, Grant]] = OrderedDict()
        self._opened = 0
        self._expired = 0
        self._evicted = 0

    @property
    def link_ttl_s(self) -> float:
        return self._link_ttl

    def open(self, grant: Grant) -> str:
        """A new sign-in of ``grant``: the session id the cookie carries."""
        self._sweep()
        session = secrets.token_urlsafe(32)
        self._sessions[_digest(session)] = (self._clock() + self._ttl, grant)
        self._opened += 1
        while len(self._sessions) > self._max_sessions:
            self._sessions.popitem(last=False)
            self._evicted += 1
        return session

    def session(self, session: object) -> Grant | None:
        """The grant of a live sign-in, else ``None``."""
        if not isinstance(session, str) or not session:
            return None
        key = _digest(session)
        found = self._sessions.get(key)
        if found is None:
            return None
        if found[0] <= self._clock():
            del self._sessions[key]
            self._expired += 1
            return None
        return found[1]

    def close(self, session: object) -> None:
        """Sign ``session`` out (nothing when it is not one)."""
        if isinstance(session, str) and session:
            self._sessions.pop(_digest(session), None)

    def link(self, grant: Grant) -> str:
        """A one-time nonce that :meth:`redeem` turns into a sign-in of ``grant``."""
        self._sweep()
        nonce = secrets.token_urlsafe(32)
        self._links[_digest(nonce)] = (self._clock() + self._link_ttl, grant)
        while len(self._links) > self._max_links:
            self._links.popitem(last=False)
        return nonce

    def redeem(self, nonce: object) -> Grant | None:
        """The grant of an unused, unexpired nonce (then used up), else ``None``."""
        if not isinstance(nonce, str) or not nonce:
            return None
        found = self._links.pop(_digest(nonce), None)
        if found is None or found[0] <= self._clock():
            return None
        return found[1]

    def retain(self, keep: Callable[[Grant], bool]) -> int:
        """Drop the sign-ins and links whose grant ``keep`` refuses; how many were dropped."""
        dropped = 0
        for table in (self._sessions, self._links):
            for key in [k for k, (_, grant) in table.items() if not keep(grant)]:
                del table[key]
                dropped += 1
        return dropped

    def _sweep(self) -> None:
        # Every entry of a table lives equally long, so insertion order is expiry order.
        now = self._clock()
        while self._sessions and next(iter(self._sessions.values()))[0] <= now:
            self._sessions.popitem(last=False)
            self._expired += 1
        while self._links and next(iter(self._links.values()))[0] <= now:
            self._links.popitem(last=False)

    def statistics(self) -> LoginStatistics:
        return LoginStatistics(
            sessions=len(self._sessions),
            links=len(self._links),
            opened=self._opened,
            expired=self._expired,
            evicted=self._evicted,
        )
