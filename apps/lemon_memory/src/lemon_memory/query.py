"""Query building: model or user text never reaches ``MATCH`` or ``to_tsquery`` as it is.

The text is split into word tokens (letters and digits, Unicode aware; ``lemon-cli`` gives
``lemon`` and ``cli``), query-side stopwords are dropped, each token is quoted as a phrase
and the tokens are ORed: punctuation, ``NOT``, ``it's``, ``50%``, ``a/b`` or ``user@host``
can never become an operator or a syntax error. No token left: an empty query.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["STOPWORDS", "fts5_query", "tokens", "tsquery"]

_WORD: Final = re.compile(r"[^\W_]+", re.UNICODE)
_MAX_TOKENS: Final = 32
_STOP_TEXT: Final = """a an and are as at be but by do does did for from how i if in into is it
its me my no not of on or our s so t that the their them then there these they this to too us
was we were what when where which who why will with you your can could should would shall about
any all some has have had been being am"""
STOPWORDS: Final = frozenset(_STOP_TEXT.split())


def tokens(text: str) -> list[str]:
    """The query's search tokens: lower-cased words, stopwords out, first seen order, at
    most 32."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if word in STOPWORDS or word in seen:
            continue
        seen[word] = None
        if len(seen) >= _MAX_TOKENS:
            break
    return list(seen)


def fts5_query(text: str) -> str | None:
    """An FTS5 ``MATCH`` expression: every token quoted, ORed; ``None`` when empty."""
    words = tokens(text)
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


def tsquery(text: str) -> str | None:
    """A PostgreSQL ``to_tsquery('simple', ...)``-safe expression: each token quoted as a
    lexeme, ORed; ``None`` when empty."""
    words = tokens(text)
    if not words:
        return None
    return " | ".join("'" + w.replace("'", "''") + "'" for w in words)
