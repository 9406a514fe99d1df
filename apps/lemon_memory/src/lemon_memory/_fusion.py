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

__all__ = ["RRF_K", "fuse", "identifiers", "like_pattern", "trigram_query"]

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
