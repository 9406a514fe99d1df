"""The operator's memory operations, one JSON-shaped answer each, shared by the daemon's
``memory.*`` wire methods and ``lemon memory`` when no daemon runs (the same code on the same
store, so both answer alike).

``memory.status``, ``memory.list``, ``memory.get``, ``memory.search`` (a context's scopes, or
``all``; every hit carries its explanation: the text rank, the scope weight, the decay),
``memory.add``, ``memory.forget``, ``memory.forgetScope``, ``memory.export`` (pages in id
order), ``memory.import`` (JSON lines, each parsed and screened like any write; a bad line is
reported with its number and, unless ``skipBad``, nothing is stored: the good lines go in one
transaction) and ``memory.consolidate`` (near-duplicates within a scope merged into the
newest, ``supersedes`` recorded; ``dryRun`` only reports).

Bad input raises :class:`~lemon_memory.errors.MemoryInputError` (a ``UsageError``: the wire's
``INVALID_PARAMS``, the CLI's exit 2) saying what to fix. Text is redacted on the way out.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final

import msgspec

from lemon_memory.documents import SCOPES, MemoryContext, MemoryDocument
from lemon_memory.embeddings import status as embeddings_status
from lemon_memory.errors import MemoryInputError, MemoryUnavailableError
from lemon_memory.query import tokens
from lemon_memory.screen import redact
from lemon_memory.store import MemoryStore, Write, prepare

__all__ = [
    "CONSOLIDATE_JACCARD",
    "DEFAULT_AGENT",
    "MAX_IMPORT_LINES",
    "OPERATIONS",
    "Operator",
    "jaccard",
    "parse_ttl",
]

DEFAULT_AGENT: Final = "default"
MAX_IMPORT_LINES: Final = 1000
"""Lines per ``memory.import`` call (a client sends a longer file in several calls)."""
CONSOLIDATE_JACCARD: Final = 0.8
#: A merge whose kept document is shorter than this share of the longest one it drops is
#: not applied without the person's ``yes`` (it would shrink what is remembered by more
#: than half).
CONSOLIDATE_MIN_KEPT: Final = 0.5
#: Consolidation passes at most (it stops before, at the first pass that changes nothing).
CONSOLIDATE_PASSES: Final = 3
_TTL: Final = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
_IMPORT_FIELDS: Final = frozenset(MemoryDocument.__struct_fields__)


def parse_ttl(text: str) -> int:
    """``7d``, ``12h``, ``30m``, ``90s``, ``2w`` in milliseconds (``0`` and the rest refused)."""
    found = _TTL.match(text)
    if found is None:
        raise MemoryInputError(
            f"a TTL is a number and a unit (s, m, h, d, w), e.g. 7d; not {text!r}"
        )
    ms = int(found.group(1)) * _UNITS[found.group(2)] * 1000
    if ms <= 0:
        raise MemoryInputError("the TTL must be positive (e.g. 7d, 12h); leave it out to keep")
    return ms


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """The token-set Jaccard similarity (1.0 for two empty sets)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _doc(doc: MemoryDocument) -> dict[str, Any]:
    data: dict[str, Any] = msgspec.to_builtins(doc)
    data["body"] = redact(doc.body)[0]
    data["title"] = redact(doc.title)[0]
    data["tags"], data["supersedes"] = list(doc.tags), list(doc.supersedes)  # as JSON reads
    return data


def _str(params: Mapping[str, Any], name: str, *, required: bool = False) -> str | None:
    value = params.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise MemoryInputError(f"{name} is required (a non-empty string)")
    return value


def _flag(params: Mapping[str, Any], name: str) -> bool:
    value = params.get(name, False)
    if not isinstance(value, bool):
        raise MemoryInputError(f"{name} is true or false")
    return value


def _limit(params: Mapping[str, Any], default: int, top: int) -> int:
    value = params.get("limit", default)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top:
        raise MemoryInputError(f"limit is a number from 1 to {top}")
    return value


def _scope(value: Any) -> str:
    if value not in SCOPES:
        raise MemoryInputError(f"unknown scope {value!r}: use one of {', '.join(SCOPES)}")
    return str(value)


def _context(params: Mapping[str, Any]) -> MemoryContext:
    return MemoryContext(
        agent_id=_str(params, "agentId") or DEFAULT_AGENT,
        session_key=_str(params, "sessionKey"),
        project=_str(params, "project"),
        user=_str(params, "user") or "local",
    )


def _import_context(data: Mapping[str, Any]) -> MemoryContext:
    """The context whose ``scope`` key is the document's own ``scope_key``."""
    agent, scope, key = data.get("agent_id"), data.get("scope"), data.get("scope_key")
    if not isinstance(agent, str) or not agent or not isinstance(key, str) or not key:
        raise MemoryInputError("agent_id and scope_key are required (non-empty strings)")
    scope = _scope(scope)
    if scope == "agent" and key != agent:
        raise MemoryInputError("an agent-scoped document's scope_key is its agent_id")
    return MemoryContext(
        agent_id=agent,
        session_key=key if scope == "session" else None,
        project=key if scope == "project" else None,
        user=key if scope == "user" else "local",
    )


Handler = Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]


class Operator:
    """The operations over one store (``None``: memory is off or unavailable, and every
    operation but ``memory.status`` says so). ``known_secrets`` gives the values the screen
    matches exactly (``secrets.env``'s)."""

    def __init__(
        self,
        store: MemoryStore | None,
        *,
        known_secrets: Callable[[], Iterable[str]] = tuple,
        unavailable: str | None = None,
        clock: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self._store = store
        self._known = known_secrets
        self._unavailable = unavailable
        self._clock = clock
        self.handlers: dict[str, Handler] = {
            "memory.status": self.status,
            "memory.list": self.list_docs,
            "memory.get": self.get,
            "memory.search": self.search,
            "memory.add": self.add,
            "memory.forget": self.forget,
            "memory.forgetScope": self.forget_scope,
            "memory.export": self.export,
            "memory.import": self.import_lines,
            "memory.consolidate": self.consolidate,
            "memory.undo": self.undo,
            "memory.history": self.history,
        }

    async def call(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        return await self.handlers[method](params)

    def _need(self) -> MemoryStore:
        if self._store is None:
            why = f" ({self._unavailable})" if self._unavailable else ""
            raise MemoryInputError(f"memory is unavailable ([memory] or its store){why}")
        return self._store

    async def status(self, params: Mapping[str, Any]) -> dict[str, Any]:
        if self._store is None:
            return {
                "available": False,
                **({"reason": self._unavailable} if self._unavailable else {}),
            }
        try:
            stats = await self._store.statistics()
        except MemoryUnavailableError as exc:
            return {"available": False, "reason": str(exc)}
        return {"available": True, "embeddings": _lane(self._store),
                **msgspec.to_builtins(stats)}  # fmt: skip

    async def list_docs(self, params: Mapping[str, Any]) -> dict[str, Any]:
        scope = params.get("scope")
        docs = await self._need().list_documents(
            agent_id=_str(params, "agentId"),
            scope=None if scope is None else _scope(scope),
            limit=_limit(params, 50, 500),
        )
        return {"documents": [_doc(d) for d in docs]}

    async def get(self, params: Mapping[str, Any]) -> dict[str, Any]:
        doc = await self._need().get(_str(params, "docId", required=True) or "")
        return {"document": None if doc is None else _doc(doc)}

    async def search(self, params: Mapping[str, Any]) -> dict[str, Any]:
        query = params.get("query")
        if not isinstance(query, str):
            raise MemoryInputError("query is required (the words to search for)")
        limit = _limit(params, 10, 10)
        store = self._need()
        if _flag(params, "all"):
            result = await store.search_all(query, limit=limit)
        else:
            scope = params.get("scope")
            result = await store.recall(
                _context(params), query, scope=None if scope is None else _scope(scope), limit=limit
            )
        return {
            "emptyQuery": result.empty_query,
            "embeddings": _lane(store),
            "hits": [
                {"score": h.score, "lexical": h.lexical, "scopeWeight": h.scope_weight,
                 "decay": h.decay, "lexicalRank": h.lexical_rank, "trigramRank": h.trigram_rank,
                 "embeddingRank": h.embedding_rank, "document": _doc(h.document)}
                for h in result.hits
            ],
        }  # fmt: skip

    async def add(self, params: Mapping[str, Any]) -> dict[str, Any]:
        text = params.get("text")
        if not isinstance(text, str):
            raise MemoryInputError("text is required (the fact or note to remember)")
        tags = params.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise MemoryInputError("tags is a list of strings")
        ttl = _str(params, "ttl")
        write = prepare(
            _context(params),
            text=text,
            now_ms=self._clock(),
            kind=str(params.get("kind", "note")),
            scope=str(params.get("scope", "agent")),
            title=_str(params, "title") or "",
            tags=tags,
            pin=_flag(params, "pin"),
            ttl_ms=None if ttl is None else parse_ttl(ttl),
            source="cli",
            known_secrets=self._known(),
        )
        return {"document": _doc(await self._need().put(write))}

    async def forget(self, params: Mapping[str, Any]) -> dict[str, Any]:
        doc_id = params.get("docId")
        if not isinstance(doc_id, str) or not doc_id:
            raise MemoryInputError("docId is required (see memory.list)")
        return {"forgotten": await self._need().forget_any(doc_id)}

    async def forget_scope(self, params: Mapping[str, Any]) -> dict[str, Any]:
        scope = _scope(params.get("scope"))
        n = await self._need().forget_scope(
            scope, agent_id=_str(params, "agentId"), scope_key=_str(params, "scopeKey")
        )
        return {"forgotten": n}

    async def export(self, params: Mapping[str, Any]) -> dict[str, Any]:
        limit = _limit(params, 200, 500)
        docs = await self._need().page(after=_str(params, "after"), limit=limit)
        return {
            "documents": [_doc(d) for d in docs],
            "next": docs[-1].doc_id if len(docs) == limit else None,
        }

    def _parse_line(self, line: str, known: tuple[str, ...]) -> Write:
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise MemoryInputError(f"not JSON ({exc.msg})") from None
        if not isinstance(data, dict):
            raise MemoryInputError("not a document (a JSON object per line)")
        unknown = sorted(set(data) - _IMPORT_FIELDS)
        if unknown:
            raise MemoryInputError(f"unknown field {unknown[0]!r}")
        body = data.get("body")
        if not isinstance(body, str):
            raise MemoryInputError("body is required (a string)")
        title, tags = data.get("title", ""), data.get("tags", [])
        if not isinstance(title, str):
            raise MemoryInputError("title is a string")
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise MemoryInputError("tags is a list of strings")
        pinned, expires = data.get("pinned", False), data.get("expires_at_ms")
        if not isinstance(pinned, bool):
            raise MemoryInputError("pinned is true or false")
        if expires is not None and (not isinstance(expires, int) or isinstance(expires, bool)):
            raise MemoryInputError("expires_at_ms is a number (milliseconds) or null")
        write = prepare(
            _import_context(data),
            text=body,
            now_ms=self._clock(),
            kind=str(data.get("kind", "note")),
            scope=str(data.get("scope")),
            title=title,
            tags=tags,
            pin=pinned,
            source="import",
            known_secrets=known,
        )
        return msgspec.structs.replace(write, expires_at_ms=expires)

    async def import_lines(self, params: Mapping[str, Any]) -> dict[str, Any]:
        lines, first = params.get("lines"), params.get("firstLine", 1)
        if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
            raise MemoryInputError("lines is a list of strings (one JSON document each)")
        if len(lines) > MAX_IMPORT_LINES:
            raise MemoryInputError(f"at most {MAX_IMPORT_LINES} lines per call")
        if not isinstance(first, int) or isinstance(first, bool) or first < 1:
            raise MemoryInputError("firstLine is a line number (1 or more)")
        known = tuple(self._known())
        writes: list[Write] = []
        errors: list[dict[str, Any]] = []
        for number, line in enumerate(lines, start=first):
            if not line.strip():
                continue
            try:
                writes.append(self._parse_line(line, known))
            except MemoryInputError as exc:
                errors.append({"line": number, "message": str(exc)})
        dry = _flag(params, "dryRun")
        if dry or (errors and not _flag(params, "skipBad")) or not writes:
            return {"imported": 0, "valid": len(writes), "errors": errors, "dryRun": dry}
        stored = await self._need().put_many(writes)
        return {"imported": len(stored), "valid": len(writes), "errors": errors, "dryRun": False}

    async def undo(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Put back what the most recent forget or merge removed (or, with ``docId``, that
        document's last version); ``undone`` is ``None`` when there is nothing to undo."""
        done = await self._need().undo(_str(params, "docId"))
        if done is None:
            return {"undone": None}
        return {"undone": {"changeId": done.change_id, "change": done.change,
                           "restored": [_doc(d) for d in done.restored],
                           "skipped": list(done.skipped)}}  # fmt: skip

    async def history(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """A document's kept versions, newest first (what ``memory.undo {docId}`` would put
        back is the first)."""
        found = await self._need().history(
            _str(params, "docId", required=True) or "", limit=_limit(params, 20, 200)
        )
        return {"versions": [{"changeId": v.change_id, "change": v.change, "atMs": v.at_ms,
                              "document": _doc(v.document)} for v in found]}  # fmt: skip

    async def consolidate(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Within each scope (one agent, one scope key, one kind), documents whose token sets
        (title and body) have a Jaccard of at least 0.8 are merged into the newest; a pinned
        document is never merged away. A merge whose kept text is less than half the longest
        dropped one's is ``skipped`` unless ``yes``. Passes repeat until one changes nothing
        (at most :data:`CONSOLIDATE_PASSES`); a dry run is one pass. Each merge is
        versioned (``memory.undo`` puts it back). It calls no model: it spends no tokens."""
        dry = _flag(params, "dryRun")
        yes = _flag(params, "yes")
        merges: list[dict[str, Any]] = []
        skipped: list[dict[str, Any]] = []
        merged = passes = 0
        while passes < CONSOLIDATE_PASSES:
            passes += 1
            found, held = await self._consolidation_pass(params, yes=yes)
            if passes == 1:
                skipped = held
            applied = 0
            if not dry:
                for merge in found:
                    if await self._need().merge(merge["keep"], merge["drop"]):
                        applied += len(merge["drop"])
            merges += found
            merged += applied
            if dry or applied == 0:  # a no-op pass: stop
                break
        return {"merges": merges, "skipped": skipped, "merged": merged, "passes": passes,
                "dryRun": dry}  # fmt: skip

    async def _consolidation_pass(
        self, params: Mapping[str, Any], *, yes: bool
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The merges one pass finds, and those held back for shrinking the text."""
        store = self._need()
        agent = _str(params, "agentId")
        groups: dict[tuple[str, str, str, str], list[MemoryDocument]] = {}
        after: str | None = None
        while True:
            page = await store.page(after=after, limit=500)
            for doc in page:
                if agent is None or doc.agent_id == agent:
                    groups.setdefault(
                        (doc.agent_id, doc.scope, doc.scope_key, doc.kind), []
                    ).append(doc)
            if len(page) < 500:
                break
            after = page[-1].doc_id
        merges: list[dict[str, Any]] = []
        held: list[dict[str, Any]] = []
        for docs in groups.values():
            by_id = {d.doc_id: d for d in docs}
            docs.sort(key=lambda d: (-d.updated_at_ms, d.doc_id))
            words = {d.doc_id: frozenset(tokens(f"{d.title} {d.body}")) for d in docs}
            taken: set[str] = set()
            for i, keep in enumerate(docs):
                if keep.doc_id in taken:
                    continue
                drop = [
                    d.doc_id
                    for d in docs[i + 1 :]
                    if d.doc_id not in taken
                    and not d.pinned
                    and jaccard(words[keep.doc_id], words[d.doc_id]) >= CONSOLIDATE_JACCARD
                ]
                if not drop:
                    continue
                taken.update(drop)
                kept = len(keep.title) + len(keep.body)
                longest = max(len(by_id[d].title) + len(by_id[d].body) for d in drop)
                merge = {"keep": keep.doc_id, "drop": drop}
                if not yes and kept < CONSOLIDATE_MIN_KEPT * longest:
                    reason = "shrinks the text by more than half: needs yes"
                    held.append({**merge, "keptChars": kept, "droppedChars": longest,
                                 "reason": reason})  # fmt: skip
                else:
                    merges.append(merge)
        return merges, held


#: Each operation's wire scope (read: anyone who may read; admin: the operator).
OPERATIONS: Final[dict[str, str]] = {
    "memory.status": "read",
    "memory.list": "read",
    "memory.get": "read",
    "memory.search": "admin",
    "memory.add": "admin",
    "memory.forget": "admin",
    "memory.forgetScope": "admin",
    "memory.export": "admin",
    "memory.import": "admin",
    "memory.consolidate": "admin",
    "memory.undo": "admin",
    "memory.history": "admin",
}


def _lane(store: object) -> str:
    """The store's embeddings lane in a few words (a backend without one: lexical)."""
    lane = getattr(store, "embeddings", None)
    return lane if isinstance(lane, str) else embeddings_status()
