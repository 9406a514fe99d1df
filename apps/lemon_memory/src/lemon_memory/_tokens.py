"""Documents tokenized as FTS5's ``porter unicode61 remove_diacritics 2`` tokenizes them (the
in-memory backend's index and the SQLite backend's recall index)."""

from __future__ import annotations

import re
import unicodedata
from typing import Final

from lemon_memory._porter import stem

__all__ = ["index_tokens"]

_WORD: Final = re.compile(r"[^\W_]+", re.UNICODE)


def _fold(text: str) -> str:
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFD", text.lower())
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn")


def index_tokens(text: str) -> list[str]:
    """``text`` as FTS5's ``porter unicode61 remove_diacritics 2`` splits it: lower-cased,
    diacritics folded, runs of letters and digits, each Porter-stemmed."""
    return [stem(w) for w in _WORD.findall(_fold(text))]
