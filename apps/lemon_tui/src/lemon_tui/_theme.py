"""Light or dark: which of Textual's themes suits the terminal.

``LEMON_TUI_THEME=light|dark`` (or ``lemon tui --theme``) decides; else ``COLORFGBG`` (set by
rxvt, Konsole, iTerm2 and others as ``"fg;bg"``) says whether the background is light;
else dark. ``NO_COLOR`` (any value) is honoured by Textual itself: the screen is drawn
without hue, and nothing here depends on colour alone (✓ ✗, ``+``/``-``, words).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

__all__ = ["THEMES", "Shade", "pick_shade"]

Shade = Literal["light", "dark"]
THEMES: Final[dict[Shade, str]] = {"dark": "textual-dark", "light": "textual-light"}
_LIGHT_BACKGROUNDS: Final = frozenset({7, 9, 10, 11, 12, 13, 14, 15})


def pick_shade(environ: Mapping[str, str], asked: str | None = None) -> Shade:
    """``asked`` (``light``/``dark``), else ``LEMON_TUI_THEME``, else ``COLORFGBG``, else
    dark. An unknown value raises ``ValueError`` naming the choices."""
    for given in (asked, environ.get("LEMON_TUI_THEME")):
        if given:
            if given not in THEMES:
                raise ValueError(f"unknown theme {given!r}: use light or dark")
            return given
    background = environ.get("COLORFGBG", "").rsplit(";", 1)[-1]
    if background.isdigit() and int(background) in _LIGHT_BACKGROUNDS:
        return "light"
    return "dark"
