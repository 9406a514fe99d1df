"""The web tools' line on a tool card: what ``web_fetch``, ``web_search`` and ``browser`` left
in the card's ``detail["web"]`` (the URL, HTTP status, size and time; the flag rules; a
screenshot's size), as escaped Rich markup.

A terminal cannot show images reliably (few support an image protocol, none over every
multiplexer and SSH hop), so a browser screenshot is named, not drawn: its size, that the model
was sent it as an image, and that the web page shows its thumbnail.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lemon_tui._text import clip, escape

__all__ = ["web_lines"]


def _size(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / 1024 / 1024:.1f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n} B"


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def web_lines(detail: Mapping[str, Any] | None, width: int = 100) -> list[str]:
    """The card's web lines (none when ``detail`` has no web card)."""
    web = detail.get("web") if detail else None
    if not isinstance(web, Mapping):
        return []
    url = web.get("final_url") or web.get("url") or ""
    facts: list[str] = []
    status = _int(web.get("status"))
    if status is not None:
        facts.append(f"HTTP {status}")
    size = _int(web.get("bytes"))
    if web.get("cached") is True:
        facts.append("cached")
    elif size is not None:
        facts.append(_size(size))
    elapsed = web.get("elapsed_s")
    if isinstance(elapsed, int | float) and not isinstance(elapsed, bool):
        facts.append(f"{elapsed:.2f} s")
    results = _int(web.get("results"))
    if results is not None:
        facts.append(f"{results} result(s)")
    shown = " · ".join([clip(str(url), width), *facts]) if url else " · ".join(facts)
    lines = [f"[dim]↳ {escape(shown)}[/]"] if shown else []
    shot = web.get("screenshot")
    if isinstance(shot, Mapping):
        w, h, b = _int(shot.get("width")), _int(shot.get("height")), _int(shot.get("bytes"))
        what = " · ".join(x for x in (f"{w}x{h} PNG" if w and h else "", _size(b) if b else "")
                          if x)  # fmt: skip
        lines.append(
            f"[dim]▣ screenshot{f' ({escape(what)})' if what else ''} sent to the model as an "
            "image; not drawn here (a terminal cannot show images reliably): the web page shows "
            "its thumbnail[/]"
        )
    if web.get("flagged") is True:
        flags = web.get("flags")
        rules = [str(f.get("rule", "")) if isinstance(f, Mapping) else str(f)
                 for f in (flags if isinstance(flags, list) else [])][:5]  # fmt: skip
        named = ", ".join(r for r in rules if r) or "suspicious content"
        lines.append(f"[yellow]⚠ flagged as untrusted: {escape(named)}[/]")
    return lines
