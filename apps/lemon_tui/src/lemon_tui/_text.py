"""Text shown on screen: escaped for markup, clipped to one line."""

from __future__ import annotations

from typing import Final

__all__ = ["clip", "count", "escape"]

_SHOWN: Final = 200


def escape(text: str) -> str:
    """``text`` shown as itself inside markup. Textual's own ``escape`` leaves ``[N]`` (an
    upper-case start) alone, which its parser then drops as a tag; every ``[`` is escaped
    here, so a model's answer or a command's output can never style or link anything."""
    return text.replace("[", "\\[")


def clip(text: str, limit: int = _SHOWN) -> str:
    """One line of at most ``limit`` characters (``…`` when cut)."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def count(n: object, noun: str) -> str:
    """``1 run``, ``3 runs``, ``? runs`` (a figure the daemon did not give)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
