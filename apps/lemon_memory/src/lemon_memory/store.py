"""The :class:`MemoryStore` Protocol and the write rules every backend shares.

Every write goes through :func:`prepare` first: sizes, the text screen and the secret screen
run before anything reaches a backend, so a refused write stores nothing (no row, no FTS
entry, no WAL page). ``remember``-style writes with a secret are refused
(:class:`~lemon_memory.errors.SecretRefusedError`); run-summary ingest redacts each span
(``[REDACTED:kind]``) and keeps the rest.
"""

from __future__ import annotations

import hashlib
import math
import secrets as _random
from collections.abc import Iterable, Sequence
from typing import Final, Protocol, runtime_checkable

import msgspec

from lemon_core.execution import Capability
from lemon_memory.documents import (
    KINDS,
    Kind,
    MemoryContext,
    MemoryDocument,
    MemoryStatistics,
    RecallResult,
    Scope,
    Source,
    Undone,
    Version,
)
from lemon_memory.errors import MemoryInputError, SecretRefusedError
from lemon_memory.screen import check_text, find_secrets, redact

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_RECALL",
    "MAX_TAGS",
    "MAX_TITLE_CHARS",
    "MEMORY_STORE",
    "MemoryStore",
    "Write",
    "decay",
    "new_doc_id",
    "prepare",
]

MAX_BODY_BYTES: Final = 4096
MAX_TITLE_CHARS: Final = 200
MAX_TAGS: Final = 16
MAX_TAG_CHARS: Final = 40
MAX_RECALL: Final = 10
HALF_LIFE_MS: Final = 30 * 24 * 3600 * 1000


def new_doc_id() -> str:
    return "mem_" + _random.token_hex(8)


def decay(age_ms: int) -> float:
    """The recency factor: 1.0 when new, halving its distance to 0.5 every 30 days (an old
    document ranks lower than a new one equally matched, never out of sight)."""
    return 0.5 + 0.5 * math.pow(0.5, max(0, age_ms) / HALF_LIFE_MS)


class Write(msgspec.Struct, frozen=True, kw_only=True):
    """A screened write, ready for a backend (a msgspec record: a tenth of a frozen
    dataclass's construction time, on every remember)."""

    kind: Kind
    scope: Scope
    scope_key: str
    agent_id: str
    title: str
    body: str
    tags: tuple[str, ...]
    source: Source
    pinned: bool
    expires_at_ms: int | None
    content_hash: str
    redactions: int = 0

    @property
    def size(self) -> int:
        return len(self.title.encode()) + len(self.body.encode()) + sum(len(t) for t in self.tags)


def prepare(
    ctx: MemoryContext,
    *,
    text: str,
    now_ms: int,
    kind: str = "note",
    scope: str = "agent",
    title: str = "",
    tags: Sequence[str] = (),
    pin: bool = False,
    ttl_ms: int | None = None,
    source: Source = "remember",
    known_secrets: Iterable[str] = (),
) -> Write:
    """Validate and screen one write (``MemoryInputError`` subclasses say what is wrong).
    ``source="ingest"`` redacts secrets; every other source refuses them."""
    if kind not in KINDS:
        raise MemoryInputError(f"unknown kind {kind!r}: use one of {', '.join(KINDS)}")
    scope_key = ctx.key_for(scope)
    if not text.strip():
        raise MemoryInputError("the text is empty: give the fact or note to remember")
    if ttl_ms is not None and ttl_ms <= 0:
        raise MemoryInputError("the TTL must be positive (e.g. 7d, 12h); leave it out to keep")
    body = text.strip()
    title = title.strip() if title else ""
    clean_tags = tuple(dict.fromkeys(t.strip().lower() for t in tags if t.strip())) if tags else ()
    if clean_tags and (
        len(clean_tags) > MAX_TAGS or any(len(t) > MAX_TAG_CHARS for t in clean_tags)
    ):
        raise MemoryInputError(
            f"at most {MAX_TAGS} tags of at most {MAX_TAG_CHARS} characters each"
        )
    known = tuple(known_secrets) if known_secrets else ()
    redactions = 0
    if source == "ingest":
        body, n_body = redact(body, known)
        title, n_title = redact(title, known)
        redacted_tags = [redact(t, known) for t in clean_tags]
        clean_tags = tuple(t for t, _ in redacted_tags)
        redactions = n_body + n_title + sum(n for _, n in redacted_tags)
    else:
        spans = find_secrets(body, known)  # then title and tags (most writes have none)
        for f in (title, *clean_tags) if title or clean_tags else ():
            spans += find_secrets(f, known)
        if spans:
            raise SecretRefusedError(tuple(dict.fromkeys(s.kind for s in spans)))
    check_text("the text", body)
    if title:
        check_text("the title", title)
    for t in clean_tags:
        check_text("a tag", t)
    body_bytes = len(body.encode())
    if body_bytes > MAX_BODY_BYTES:
        raise MemoryInputError(
            f"the text is {body_bytes} bytes; the limit is {MAX_BODY_BYTES}: store a "
            "shorter note (or several)"
        )
    if len(title) > MAX_TITLE_CHARS:
        raise MemoryInputError(f"the title is over {MAX_TITLE_CHARS} characters: shorten it")
    digest = hashlib.sha256(
        "\x1f".join(
            (ctx.agent_id, scope, scope_key, kind, title, body, *sorted(clean_tags))
            if clean_tags
            else (ctx.agent_id, scope, scope_key, kind, title, body)
        ).encode()
    ).hexdigest()
    return Write(
        kind=kind,  # type: ignore[arg-type]  # checked against KINDS above
        scope=scope,  # type: ignore[arg-type]  # checked by key_for above
        scope_key=scope_key,
        agent_id=ctx.agent_id,
        title=title,
        body=body,
        tags=clean_tags,
        source=source,
        pinned=pin,
        expires_at_ms=None if ttl_ms is None else now_ms + ttl_ms,
        content_hash=digest,
        redactions=redactions,
    )


@runtime_checkable
class MemoryStore(Protocol):
    """Durable, scoped memory (SQLite FTS5 by default, PostgreSQL full-text search with a
    shared store). Every read that a run makes is confined, in the backend's ``WHERE``
    clause, to the scopes of its :class:`MemoryContext`."""

    backend: str

    async def put(self, write: Write) -> MemoryDocument:
        """Store a screened write (upsert by content hash; evicts by the bounds' order;
        :class:`~lemon_memory.errors.ScopeFullError` when only pinned documents remain)."""
        ...

    async def put_many(self, writes: Sequence[Write]) -> list[MemoryDocument]:
        """Store several screened writes in one transaction: all of them, or none (import)."""
        ...

    async def recall(
        self, ctx: MemoryContext, query: str, *, scope: str | None = None, limit: int = 5
    ) -> RecallResult:
        """The best matches among the context's scopes (or the one ``scope`` of them)."""
        ...

    async def search_all(self, query: str, *, limit: int = 10) -> RecallResult:
        """Operator only (``lemon memory search --all``): every scope of every agent."""
        ...

    async def get(self, doc_id: str) -> MemoryDocument | None: ...

    async def list_documents(
        self, *, agent_id: str | None = None, scope: str | None = None, limit: int = 100
    ) -> list[MemoryDocument]: ...

    async def forget(self, ctx: MemoryContext, doc_id: str) -> None:
        """Remove a document of a scope the context can see (``ScopeError`` otherwise)."""
        ...

    async def forget_any(self, doc_id: str) -> bool:
        """Operator only: remove any document."""
        ...

    async def forget_scope(
        self, scope: str, *, agent_id: str | None = None, scope_key: str | None = None
    ) -> int:
        """Operator only: remove every document of ``scope`` (of one agent, of one key); how
        many, in one transaction."""
        ...

    async def merge(self, keep_id: str, drop_ids: Sequence[str]) -> bool:
        """Remove ``drop_ids`` and record them in ``keep_id``'s ``supersedes``, in one
        transaction; ``False`` (nothing changed) when any of them is gone."""
        ...

    async def undo(self, doc_id: str | None = None) -> Undone | None:
        """Put back what the most recent versioned change (a forget, a scope's forget, a
        merge) removed or changed, or with ``doc_id`` that document's last version, in one
        transaction, and drop the versions used; ``None`` when there is nothing to undo."""
        ...

    async def history(self, doc_id: str, *, limit: int = 20) -> list[Version]:
        """The document's kept versions, newest first (none: never changed, or expired)."""
        ...

    async def version_count(self) -> int:
        """Versions kept (tests: the bounds hold)."""
        ...

    async def page(self, *, after: str | None = None, limit: int = 200) -> list[MemoryDocument]:
        """Documents in ``doc_id`` order after ``after`` (export)."""
        ...

    async def sweep(self, now_ms: int | None = None) -> int:
        """Remove at most one batch of expired documents; how many."""
        ...

    async def statistics(self) -> MemoryStatistics: ...

    async def close(self) -> None: ...


#: The memory store of the running runtime (registered by lemon_memory's lifespan).
MEMORY_STORE: Final[Capability[MemoryStore]] = Capability("MemoryStore", MemoryStore)
