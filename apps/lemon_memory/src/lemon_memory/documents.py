"""Memory records: documents, the scopes a run sees, recall results, statistics.

A document belongs to one agent and one scope (``session``, ``project``, ``agent`` or
``user``) with a ``scope_key`` the *server* resolves from the run (:class:`MemoryContext`):
nothing a model says can name another scope key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal, get_args

import msgspec

from lemon_memory.errors import ScopeError

__all__ = [
    "KINDS",
    "SCOPES",
    "SCOPE_WEIGHTS",
    "Kind",
    "MemoryContext",
    "MemoryDocument",
    "MemoryStatistics",
    "RecallHit",
    "RecallResult",
    "Scope",
    "Source",
    "Undone",
    "Version",
    "project_root",
]

Kind = Literal["fact", "preference", "note", "run_summary"]
Scope = Literal["session", "project", "agent", "user"]
Source = Literal["remember", "ingest", "cli", "import"]
KINDS: Final[tuple[str, ...]] = get_args(Kind)
SCOPES: Final[tuple[str, ...]] = get_args(Scope)
#: How much a match in each scope counts (session > project > agent > user).
SCOPE_WEIGHTS: Final[dict[str, float]] = {
    "session": 1.0,
    "project": 0.85,
    "agent": 0.7,
    "user": 0.6,
}


class MemoryDocument(msgspec.Struct, frozen=True, kw_only=True):
    """One stored memory."""

    doc_id: str
    kind: Kind
    scope: Scope
    scope_key: str
    agent_id: str
    title: str = ""
    body: str
    tags: tuple[str, ...] = ()
    source: Source = "remember"
    created_at_ms: int
    updated_at_ms: int
    last_recalled_at_ms: int | None = None
    expires_at_ms: int | None = None
    pinned: bool = False
    supersedes: tuple[str, ...] = ()
    content_hash: str


class RecallHit(msgspec.Struct, frozen=True, kw_only=True):
    """One recalled document and why it ranked where it did."""

    document: MemoryDocument
    score: float
    lexical: float
    """The backend's text rank, made positive (bm25 or ts_rank_cd)."""
    scope_weight: float
    decay: float
    lexical_rank: int | None = None
    """The hit's rank in the lexical lane (1 = best; None: found by another lane only)."""
    trigram_rank: int | None = None
    """Its rank among the identifier (substring) matches, when the query had identifiers."""
    embedding_rank: int | None = None
    """Its rank by cosine similarity, when the embeddings lane is on."""


class RecallResult(msgspec.Struct, frozen=True, kw_only=True):
    """The answer to a recall: hits, best first; ``empty_query`` when the query had no word
    to search for (only punctuation or stopwords): not an error, and no hit."""

    hits: tuple[RecallHit, ...] = ()
    empty_query: bool = False


class Undone(msgspec.Struct, frozen=True, kw_only=True):
    """What an undo put back: the change it reverted (``forget``, ``forget_scope`` or
    ``merge``), the documents as they are again, and the ids it could not restore because
    the same text is stored again under another id (that document is kept)."""

    change_id: str
    change: str
    restored: tuple[MemoryDocument, ...] = ()
    skipped: tuple[str, ...] = ()


class Version(msgspec.Struct, frozen=True, kw_only=True):
    """A document as it was before a change (``lemon memory history``)."""

    change_id: str
    change: str
    at_ms: int
    document: MemoryDocument


class MemoryStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """The store's size and counters (``memory.status``, ``lemon doctor``)."""

    backend: str
    documents: int
    bytes: int
    per_scope: dict[str, int]
    evictions: dict[str, int]
    """By reason: ``expired``, ``run_summary``, ``explicit``."""
    refused: dict[str, int]
    """Writes refused, by reason: ``secret``, ``input``, ``full``."""
    redactions: int
    swept: int
    deduplicated: int
    consolidated: int = 0
    """Documents merged into a near-duplicate (``lemon memory consolidate``)."""
    max_docs: int
    max_bytes: int


def project_root(cwd: str) -> str:
    """The git root of ``cwd`` (its top level), else ``cwd`` itself (resolved)."""
    path = Path(cwd).resolve()
    for candidate in (path, *path.parents):
        if (candidate / ".git").exists():
            return str(candidate)
    return str(path)


class MemoryContext(msgspec.Struct, frozen=True, kw_only=True):
    """The scopes one run may read and write, fixed by the server from the run itself: its
    session key, its project (git root or cwd), its agent and its user. A model can narrow a
    recall to one of them (:meth:`narrow`), never add one."""

    agent_id: str
    session_key: str | None = None
    project: str | None = None
    user: str = "local"

    @classmethod
    def for_run(
        cls, *, agent_id: str, session_key: str | None, cwd: str | None, user: str = "local"
    ) -> MemoryContext:
        return cls(
            agent_id=agent_id,
            session_key=session_key or None,
            project=project_root(cwd) if cwd else None,
            user=user,
        )

    def scope_keys(self) -> dict[str, str]:
        """Scope -> key, for the scopes this context has."""
        keys: dict[str, str] = {"agent": self.agent_id, "user": self.user}
        if self.session_key:
            keys["session"] = self.session_key
        if self.project:
            keys["project"] = self.project
        return keys

    def key_for(self, scope: str) -> str:
        """The key of ``scope`` in this context; :class:`ScopeError` for an unknown scope or
        one this run does not have."""
        if scope == "agent":  # the common cases first, without building scope_keys()
            return self.agent_id
        if scope == "project" and self.project:
            return self.project
        if scope not in SCOPES:
            raise ScopeError(f"unknown scope {scope!r}: use one of {', '.join(SCOPES)}")
        key = self.scope_keys().get(scope)
        if key is None:
            raise ScopeError(
                f"this run has no {scope} scope: use one of {sorted(self.scope_keys())}"
            )
        return key

    def narrow(self, scope: str | None) -> dict[str, str]:
        """The scopes a recall searches: all of this context's, or only ``scope``."""
        if scope is None:
            return self.scope_keys()
        return {scope: self.key_for(scope)}
