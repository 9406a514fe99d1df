"""What the SQLite and PostgreSQL memory stores share: the document columns, a row's
:class:`~lemon_memory.documents.MemoryDocument`, the scope condition and the ranking constants.
Only the placeholder differs between the two drivers (``?`` and ``%s``)."""

from __future__ import annotations

import time
from typing import Any, Final

from lemon_memory.documents import MemoryContext, MemoryDocument

__all__ = ["CANDIDATES", "COLUMNS", "PIN_BOOST", "document", "now_ms", "visible"]

#: The ``memory_documents`` columns, in the order :func:`document` reads them.
COLUMNS: Final = (
    "doc_id, kind, scope, scope_key, agent_id, title, body, tags, source, created_at_ms, "
    "updated_at_ms, last_recalled_at_ms, expires_at_ms, pinned, supersedes, content_hash"
)
#: How many text matches are re-ranked by scope weight, recency and pins.
CANDIDATES: Final = 40
#: The rank factor of a pinned document.
PIN_BOOST: Final = 1.25


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def document(row: tuple[Any, ...] | Any) -> MemoryDocument:
    """The document of a row selected with :data:`COLUMNS`."""
    (doc_id, kind, scope, scope_key, agent_id, title, body, tags, source, created, updated,
     recalled, expires, pinned, supersedes, content_hash) = row  # fmt: skip
    return MemoryDocument(
        doc_id=doc_id,
        kind=kind,
        scope=scope,
        scope_key=scope_key,
        agent_id=agent_id,
        title=title,
        body=body,
        tags=tuple(tags.split()) if tags else (),
        source=source,
        created_at_ms=created,
        updated_at_ms=updated,
        last_recalled_at_ms=recalled,
        expires_at_ms=expires,
        pinned=bool(pinned),
        supersedes=tuple(supersedes.split()) if supersedes else (),
        content_hash=content_hash,
    )


def visible(ctx: MemoryContext, scope: str | None, mark: str) -> tuple[str, list[Any]]:
    """The SQL condition (on alias ``d``) confining a read to the context's scopes, with
    ``mark`` as the driver's placeholder."""
    keys = ctx.narrow(scope)
    ors = " OR ".join(f"(d.scope = {mark} AND d.scope_key = {mark})" for _ in keys)
    params: list[Any] = [ctx.agent_id]
    for name, key in keys.items():
        params += [name, key]
    return f"d.agent_id = {mark} AND ({ors})", params
