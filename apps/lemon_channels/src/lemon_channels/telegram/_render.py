"""Markdown to Telegram HTML, and splitting at Telegram's 4,096-character limit.

Telegram's HTML parse mode knows ``<b> <i> <s> <u> <code> <pre> <a href>`` and the entities
``&lt; &gt; &amp; &quot;``. Everything a model writes is escaped first, then the few Markdown
forms models use are turned into tags: fenced code blocks, inline code, ``**bold**``,
``*italic*`` / ``_italic_``, ``~~strike~~``, ``[text](http(s) url)`` and ``#`` headings (bold).
A link to anything but http(s) stays text. Untrusted text can therefore never inject markup.

Splitting works on the source, so no chunk ever cuts a tag or an entity in half: blocks (lines,
code fences) are packed greedily while the *rendered* chunk fits the limit (4,096 characters
of displayed text; the tags themselves are not counted by Telegram, but we count them to stay
safe), and a block too long on its own is cut at a space when there is one. A code fence cut
across chunks is closed and reopened.
"""

from __future__ import annotations

import html
import re
from typing import Final

__all__ = ["MAX_MESSAGE_CHARS", "markdown_to_html", "split_markdown"]

#: Telegram's limit of one message's text.
MAX_MESSAGE_CHARS: Final = 4096

_FENCE: Final = re.compile(r"^```([A-Za-z0-9_+-]*)\s*$")
_INLINE_CODE: Final = re.compile(r"`([^`\n]+)`")
_BOLD: Final = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_STRIKE: Final = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_ITALIC_STAR: Final = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
_ITALIC_UNDER: Final = re.compile(r"(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])")
_LINK: Final = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s)]+)\)")
_HEADING: Final = re.compile(r"^#{1,6}\s+(.+)$")
_PLACEHOLDER: Final = "\x00{}\x00"


def _inline(text: str) -> str:
    """Escape one line and apply the inline forms (code spans are protected first)."""
    spans: list[str] = []

    def keep(fragment: str) -> str:
        spans.append(fragment)
        return _PLACEHOLDER.format(len(spans) - 1)

    text = _INLINE_CODE.sub(lambda m: keep(f"<code>{html.escape(m.group(1))}</code>"), text)
    text = _LINK.sub(
        lambda m: keep(
            f'<a href="{html.escape(m.group(2), quote=True)}">{html.escape(m.group(1))}</a>'
        ),
        text,
    )
    text = html.escape(text, quote=False)
    heading = _HEADING.match(text)
    if heading:
        text = f"<b>{heading.group(1)}</b>"
    text = _BOLD.sub(r"<b>\1</b>", text)
    text = _STRIKE.sub(r"<s>\1</s>", text)
    text = _ITALIC_STAR.sub(r"<i>\1</i>", text)
    text = _ITALIC_UNDER.sub(r"<i>\1</i>", text)
    for index, fragment in enumerate(spans):
        text = text.replace(_PLACEHOLDER.format(index), fragment)
    return text


def markdown_to_html(text: str) -> str:
    """Render Markdown-ish ``text`` as Telegram HTML (see the module docstring)."""
    out: list[str] = []
    code: list[str] | None = None
    lang = ""
    for line in text.split("\n"):
        fence = _FENCE.match(line.strip())
        if code is None:
            if fence:
                code, lang = [], fence.group(1)
            else:
                out.append(_inline(line))
        elif fence and not fence.group(1):
            body = html.escape("\n".join(code), quote=False)
            cls = f' class="language-{lang}"' if lang else ""
            out.append(f"<pre><code{cls}>{body}</code></pre>")
            code = None
        else:
            code.append(line)
    if code is not None:  # an unclosed fence (a stream cut mid-block): still a code block
        body = html.escape("\n".join(code), quote=False)
        out.append(f"<pre><code>{body}</code></pre>")
    return "\n".join(out)


def _blocks(text: str) -> list[tuple[str, str | None]]:
    """Lines, with each fenced code block kept as one block: (source, fence language or None)."""
    blocks: list[tuple[str, str | None]] = []
    code: list[str] | None = None
    lang = ""
    for line in text.split("\n"):
        fence = _FENCE.match(line.strip())
        if code is None:
            if fence:
                code, lang = [], fence.group(1)
            else:
                blocks.append((line, None))
        elif fence and not fence.group(1):
            blocks.append(("\n".join(code), lang))
            code = None
        else:
            code.append(line)
    if code is not None:
        blocks.append(("\n".join(code), lang))
    return blocks


def _source(block: tuple[str, str | None]) -> str:
    body, lang = block
    return body if lang is None else f"```{lang}\n{body}\n```"


def _fits(source: str, limit: int) -> bool:
    return len(markdown_to_html(source)) <= limit


def _cut(block: tuple[str, str | None], limit: int) -> list[tuple[str, str | None]]:
    """Cut one block too long for a message into pieces that each fit."""
    body, lang = block
    pieces: list[tuple[str, str | None]] = []
    rest = body
    while rest:
        if _fits(_source((rest, lang)), limit):
            pieces.append((rest, lang))
            break
        lo, hi = 1, len(rest)
        while lo < hi:  # the longest prefix that fits
            mid = (lo + hi + 1) // 2
            if _fits(_source((rest[:mid], lang)), limit):
                lo = mid
            else:
                hi = mid - 1
        cut = lo
        space = max(rest.rfind(" ", 0, cut + 1), rest.rfind("\n", 0, cut + 1))
        if space > cut // 2:
            cut = space
        pieces.append((rest[:cut], lang))
        rest = rest[cut:].lstrip(" ") if lang is None else rest[cut:]
    return pieces


def split_markdown(text: str, *, limit: int = MAX_MESSAGE_CHARS) -> list[str]:
    """Split ``text`` into Markdown chunks whose rendering fits ``limit`` characters each
    (at least one chunk, possibly empty)."""
    if _fits(text, limit):
        return [text]
    chunks: list[str] = []
    current: list[str] = []
    for block in _blocks(text):
        pieces = [block] if _fits(_source(block), limit) else _cut(block, limit)
        for piece in pieces:
            source = _source(piece)
            candidate = "\n".join([*current, source])
            if current and not _fits(candidate, limit):
                chunks.append("\n".join(current))
                current = [source]
            else:
                current.append(source)
    if current:
        chunks.append("\n".join(current))
    return [chunk for chunk in chunks if chunk.strip()] or [text[:limit]]
