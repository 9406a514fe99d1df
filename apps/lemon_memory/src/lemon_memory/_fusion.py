"""Recall's extra lanes and their fusion with the lexical ranking.

* Identifiers and paths (``lemon-cli``, ``HEARTBEAT_OK``, ``config.toml``, ``a/b``,
  ``ConversationQueue``): the word tokenizer splits them into common words, so
  the backends also look each one up as a substring of the text (SQLite: an FTS5 table with
  ``tokenize='trigram'``; PostgreSQL: ``LIKE`` over the text, with a ``pg_trgm`` GIN index
  when the extension can be had). :func:`identifiers` picks the query's identifier-ish
  tokens; a query without any takes the lexical lane alone.
* Embeddings (``lemon_memory[embeddings]``): a cosine ranking over the visible scopes.

When a second lane found something, the lanes are fused by reciprocal rank
(:func:`fuse`, k = 60): a hit's score is then its fused score, and its rank in each lane is
kept for ``--explain``. Ties keep the lexical order.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from typing import Final, TypeVar

__all__ = [
    "RRF_K",
    "dense_top",
    "fuse",
    "fuse_lanes",
    "identifiers",
    "like_pattern",
    "trigram_query",
]

K = TypeVar("K", bound=Hashable)

#: The reciprocal-rank-fusion constant.
RRF_K: Final = 60
#: At most this many identifiers of a query are looked up.
_MAX_IDENTIFIERS: Final = 8
_PIECE: Final = re.compile(r"[^\s\"'`()\[\]{},;<>|]+")
_JOINED: Final = re.compile(r"[^\W_][_./:@$\\-]+[^\W_]|[^\W_]_|_[^\W_]")
_CAMEL: Final = re.compile(r"[a-z][A-Z]")


def _identifierish(piece: str) -> bool:
    # Letters with digits (gpu01, term12) are one word to the word tokenizer, which finds
    # them whole; a substring search of them would only add look-alikes (gpu010, term120).
    return bool(_JOINED.search(piece) or _CAMEL.search(piece))


def identifiers(text: str) -> list[str]:
    """The query's identifier-ish tokens (joined by ``_ . / : @ $ -``, or camel case),
    lower-cased, 3 characters or more, first seen order, at most 8."""
    seen: dict[str, None] = {}
    for raw in _PIECE.findall(text):
        piece = raw.strip(".:!?-")
        if len(piece) >= 3 and _identifierish(piece):
            seen.setdefault(piece.lower(), None)
            if len(seen) >= _MAX_IDENTIFIERS:
                break
    return list(seen)


def trigram_query(idents: Sequence[str]) -> str:
    """An FTS5 trigram ``MATCH`` expression: each identifier a quoted substring, ORed."""
    return " OR ".join('"' + i.replace('"', '""') + '"' for i in idents)


def like_pattern(ident: str) -> str:
    """A ``LIKE`` pattern (escape character ``\\``) for ``ident`` as a substring."""
    escaped = ident.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def fuse(lanes: Sequence[Sequence[K]], k: int = RRF_K) -> list[tuple[K, float, list[int | None]]]:
    """Reciprocal-rank fusion of ranked lists of keys: ``(key, score, rank in each lane)``,
    best first; ties keep the first lane's order (then the next lane's)."""
    scores: dict[K, float] = {}
    ranks: dict[K, list[int | None]] = {}
    for lane_no, lane in enumerate(lanes):
        for rank, key in enumerate(lane, 1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
            found = ranks.get(key)
            if found is None:
                found = ranks[key] = [None] * len(lanes)
            if found[lane_no] is None:
                found[lane_no] = rank
    order = sorted(scores, key=lambda key: -scores[key])  # stable: insertion order on ties
    return [(key, scores[key], ranks[key]) for key in order]


def fuse_lanes(
    lexical: Sequence[K], trigram: Sequence[K], dense: Sequence[K], k: int = RRF_K
) -> list[tuple[K, float, list[int | None]]] | None:
    """:func:`fuse` of the lanes that found something, each hit's ranks named ``[lexical,
    trigram, embedding]``; ``None`` when neither the trigram nor the embeddings lane found
    anything (the lexical order then stands as it is)."""
    lanes = [(0, lexical), *((n, lane) for n, lane in ((1, trigram), (2, dense)) if lane)]
    if len(lanes) == 1:
        return None
    out: list[tuple[K, float, list[int | None]]] = []
    for key, score, ranks in fuse([lane for _n, lane in lanes], k):
        named: list[int | None] = [None, None, None]
        for (n, _lane), rank in zip(lanes, ranks, strict=True):
            named[n] = rank
        out.append((key, score, named))
    return out


def dense_top(
    similarities: Sequence[float],
    rows: Sequence[tuple[K, str, int, bool]],
    now: int,
    k: int,
) -> list[tuple[float, K, float, float]]:
    """The embeddings lane's best ``k`` of ``rows`` ``(key, scope, updated_at_ms, pinned)``
    by cosine (``similarities``, in the same order) times the scope weight, decay and pin
    boost: ``(score, key, scope weight, decay)``. A cosine <= 0 is no match."""
    from lemon_memory._rows import PIN_BOOST
    from lemon_memory.documents import SCOPE_WEIGHTS
    from lemon_memory.store import decay

    out: list[tuple[float, K, float, float]] = []
    for (key, scope, updated, pinned), sim in zip(rows, similarities, strict=True):
        if sim <= 0.0:  # no direction in common: not a match
            continue
        weight = SCOPE_WEIGHTS[scope]
        fade = decay(now - updated)
        out.append((sim * weight * fade * (PIN_BOOST if pinned else 1.0), key, weight, fade))
    out.sort(key=lambda t: -t[0])
    return out[:k]
