"""Model-facing tool names: ``mcp_<server>_<tool>``, sanitised, bounded, collision-free.

Providers accept ``[A-Za-z0-9_-]{1,64}``: any other character becomes ``_``; a name longer
than 64 is cut and given an 8-character hash suffix of the full name, as is every name that two
(server, tool) pairs share after sanitising, so each pair keeps one stable name of its own.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Final

__all__ = ["MAX_NAME", "tool_names"]

MAX_NAME: Final = 64
_BAD: Final = re.compile(r"[^A-Za-z0-9_-]")


def _base(server: str, tool: str) -> str:
    return _BAD.sub("_", f"mcp_{server}_{tool}")


def _suffixed(base: str, server: str, tool: str) -> str:
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{base[: MAX_NAME - 9]}_{digest}"


def tool_names(pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """A unique model-facing name for each distinct ``(server, tool)``."""
    unique = list(dict.fromkeys(pairs))
    bases = {pair: _base(*pair) for pair in unique}
    counts: dict[str, int] = {}
    for base in bases.values():
        counts[base] = counts.get(base, 0) + 1
    out: dict[tuple[str, str], str] = {}
    for pair, base in bases.items():
        if counts[base] > 1 or len(base) > MAX_NAME:
            out[pair] = _suffixed(base, *pair)
        else:
            out[pair] = base
    return out
