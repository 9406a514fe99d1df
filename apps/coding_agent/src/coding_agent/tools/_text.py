"""Reading text files and cutting long outputs with a marker."""

from __future__ import annotations

from pathlib import Path

from lemon_agent import ToolError

_SNIFF = 8192


def read_text(path: Path, shown: str, max_bytes: int) -> str:
    """The file as text; a missing, oversized or binary file is a ToolError for the model."""
    if not path.exists():
        raise ToolError(f"{shown}: no such file")
    if path.is_dir():
        raise ToolError(f"{shown} is a directory; use ls to list it")
    size = path.stat().st_size
    if size > max_bytes:
        raise ToolError(f"{shown} is {size} bytes, over the {max_bytes}-byte limit for text tools")
    data = path.read_bytes()
    if b"\0" in data[:_SNIFF]:
        raise ToolError(f"{shown} looks like a binary file; it was not read")
    return data.decode("utf-8", errors="replace")


def cap(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` with a marker stating how much was left out."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + f"\n[... output truncated: {len(text) - max_chars} more characters]"
