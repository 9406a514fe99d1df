"""ApprovalGrantStore: the remembered approval grants that outlive the process.

Only the ``agent`` and ``global`` scopes are kept here; ``session`` grants end with their session
and live in memory only (:class:`~lemon_core.approvals.ExecApprovals`). One table
(``approval_grants``), one record per grant, keyed by scope, owner and the grant key (the hash
of the tool and its normalised action, :func:`lemon_core.approvals.action_hash`).

Bound: :meth:`ApprovalGrantStore.load` returns at most ``max_grants`` records (the newest) and
deletes the older ones from the table (counted in ``statistics()["pruned"]``); ExecApprovals
deletes a persisted grant when its own bound forgets it, so the table stays within the bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import msgspec

from lemon_core.clock import SYSTEM_CLOCK
from lemon_core.errors import UsageError
from lemon_core.store.errors import StoreValueError
from lemon_core.store.protocol import Clock, Store

__all__ = [
    "DEFAULT_MAX_APPROVAL_GRANTS",
    "PERSISTED_GRANT_SCOPES",
    "ApprovalGrant",
    "ApprovalGrantStore",
    "GrantScope",
]

GrantScope = Literal["session", "agent", "global"]
#: The scopes that outlive the process.
PERSISTED_GRANT_SCOPES: Final[frozenset[str]] = frozenset({"agent", "global"})
#: Default bound of remembered grants (the same as ExecApprovals' ``max_grants``).
DEFAULT_MAX_APPROVAL_GRANTS: Final = 10_000
#: How many rows one load reads at most (a table can only exceed ``max_grants`` when several
#: processes share it or the bound was lowered; each load prunes it back).
_LOAD_LIMIT: Final = 1_000_000
_SEP: Final = "\x1f"
_SCOPES: Final = ("session", "agent", "global")


class ApprovalGrant(msgspec.Struct, frozen=True, kw_only=True):
    """One remembered grant: ``tool`` calls whose action hashes to ``key`` are approved for
    ``owner`` (the agent id for ``agent``, the session key for ``session``, ``""`` for
    ``global``). ``action_preview`` is the start of the action's canonical JSON, for listings
    only (matching uses ``key``)."""

    scope: str
    owner: str
    tool: str
    key: str
    granted_at_ms: int
    approval_id: str | None = None
    action_preview: str = ""

    @property
    def identity(self) -> tuple[str, str, str]:
        """``(scope, owner, key)``: what makes two grants the same grant."""
        return (self.scope, self.owner, self.key)

    def to_dict(self) -> dict[str, Any]:
        """The stored (JSON-compatible) form."""
        data: dict[str, Any] = msgspec.to_builtins(self)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ApprovalGrant:
        """Parse the stored form."""
        return msgspec.convert(data, cls)


def check_grant_scope(scope: object) -> GrantScope:
    """Validate a grant scope name."""
    if scope == "session":
        return "session"
    if scope == "agent":
        return "agent"
    if scope == "global":
        return "global"
    raise UsageError(f"unknown grant scope {scope!r}; use one of {list(_SCOPES)}")


class ApprovalGrantStore:
    """Durable ``agent`` / ``global`` approval grants over a :class:`Store`."""

    TABLE: Final = "approval_grants"

    def __init__(
        self,
        store: Store,
        *,
        max_grants: int = DEFAULT_MAX_APPROVAL_GRANTS,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        bound: object = max_grants
        if not isinstance(bound, int) or isinstance(bound, bool) or bound < 1:
            raise StoreValueError(
                f"approval grant store max_grants must be a positive integer, got {max_grants!r}"
            )
        self._store = store
        self._max_grants = max_grants
        self._clock = clock
        self._written = 0
        self._deleted = 0
        self._pruned = 0
        self._loaded = 0
        self._skipped = 0

    @property
    def max_grants(self) -> int:
        return self._max_grants

    def now_ms(self) -> int:
        """The wrapper's clock (what ``granted_at_ms`` is stamped with)."""
        return self._clock.now_ms()

    @staticmethod
    def row_key(scope: str, owner: str, key: str) -> str:
        return f"{scope}{_SEP}{owner}{_SEP}{key}"

    async def put(self, grant: ApprovalGrant) -> None:
        """Write ``grant`` durably (replacing the same grant). Refuses ``session`` grants."""
        if grant.scope not in PERSISTED_GRANT_SCOPES:
            raise StoreValueError(
                f"only agent and global grants are persisted, not {grant.scope!r}: session "
                "grants end with their session"
            )
        await self._store.put(self.TABLE, self.row_key(*grant.identity), grant.to_dict())
        self._written += 1

    async def delete(self, scope: str, owner: str, key: str) -> bool:
        """Forget one grant; return whether it was there."""
        found = await self._store.delete(self.TABLE, self.row_key(scope, owner, key))
        self._deleted += int(found)
        return found

    async def get(self, scope: str, owner: str, key: str) -> ApprovalGrant | None:
        """The persisted grant ``(scope, owner, key)``, or None (absent, or a row that does not
        parse as a grant of a persisted scope). One point read: what a decision checks."""
        value = await self._store.get(self.TABLE, self.row_key(scope, owner, key))
        if value is None:
            return None
        try:
            grant = ApprovalGrant.from_dict(value)
        except (msgspec.ValidationError, TypeError):
            self._skipped += 1
            return None
        if grant.scope not in PERSISTED_GRANT_SCOPES or grant.identity != (scope, owner, key):
            self._skipped += 1
            return None
        return grant

    async def load(self) -> list[ApprovalGrant]:
        """Every persisted grant, oldest first, at most ``max_grants`` (the newest).

        Older grants beyond the bound are deleted. Rows that do not parse as grants (a damaged
        or foreign row) are skipped and counted (``statistics()["skipped"]``), never raised.
        """
        rows = await self._store.scan(self.TABLE, limit=_LOAD_LIMIT)
        grants: list[ApprovalGrant] = []
        for _, value in rows:
            try:
                grant = ApprovalGrant.from_dict(value)
            except (msgspec.ValidationError, TypeError):
                self._skipped += 1
                continue
            if grant.scope not in PERSISTED_GRANT_SCOPES:
                self._skipped += 1
                continue
            grants.append(grant)
        grants.sort(key=lambda g: (g.granted_at_ms, self.row_key(*g.identity)))
        excess = len(grants) - self._max_grants
        if excess > 0:
            for old in grants[:excess]:
                await self._store.delete(self.TABLE, self.row_key(*old.identity))
                self._pruned += 1
            grants = grants[excess:]
        self._loaded += len(grants)
        return grants

    def statistics(self) -> dict[str, Any]:
        return {
            "table": self.TABLE,
            "max_grants": self._max_grants,
            "written": self._written,
            "deleted": self._deleted,
            "loaded": self._loaded,
            "pruned": self._pruned,
            "skipped": self._skipped,
        }
