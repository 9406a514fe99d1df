"""The skill source taxonomy: source kinds and trust levels (closed sets).

The table in this app's README ("Source kinds", "Trust levels") is the documentation of these
sets; a test fails when the two differ, so a new kind cannot appear here without the table.
"""

from __future__ import annotations

import enum

__all__ = ["SourceKind", "TrustLevel"]


class SourceKind(enum.Enum):
    """Where a skill comes from."""

    BUILTIN = "builtin"
    """Bundled with Lemon and seeded at first start; never fetched from the network."""
    LOCAL = "local"
    """A directory on the local filesystem outside the installation."""
    GIT = "git"
    """A git repository: URL, ``git+<url>``, SSH URL, ``gh:<owner>/<repo>``, ``hermes:...``."""
    REGISTRY = "registry"
    """An entry of the skill registry, addressed by namespace path."""
    WELL_KNOWN = "well_known"
    """Found by probing well-known URL patterns during discovery (no identifier form)."""


class TrustLevel(enum.Enum):
    """How far a skill's origin is trusted; ordered builtin > official > trusted > community."""

    BUILTIN = "builtin"
    OFFICIAL = "official"
    TRUSTED = "trusted"
    COMMUNITY = "community"

    @property
    def rank(self) -> int:
        """Higher is more trusted (builtin 3 ... community 0)."""
        return _RANK[self]

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, TrustLevel):
            return NotImplemented
        return self.rank < other.rank

    def __le__(self, other: object) -> bool:
        if not isinstance(other, TrustLevel):
            return NotImplemented
        return self.rank <= other.rank

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, TrustLevel):
            return NotImplemented
        return self.rank > other.rank

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, TrustLevel):
            return NotImplemented
        return self.rank >= other.rank


_RANK = {
    TrustLevel.BUILTIN: 3,
    TrustLevel.OFFICIAL: 2,
    TrustLevel.TRUSTED: 1,
    TrustLevel.COMMUNITY: 0,
}
