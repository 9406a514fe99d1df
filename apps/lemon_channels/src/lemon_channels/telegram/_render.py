"""Markdown to Telegram HTML, and splitting at Telegram's 4,096-character limit.

Telegram's HTML parse mode knows ``<b> <i> <s> <u> <code> <pre> <a href>`` and the entities
``&lt; &gt; &amp; &quot;``. Everything a model writes is escaped first, then the few Markdown
forms models use are turned into tags: fenced code blocks, inline code, ``**bold**``,
``*italic*`` / ``_italic_``, ``~~strike~~``, ``[text](http(s) url)`` and ``#`` headings (bold).
A link to anything but http(s) stays text. Untrusted text can therefore never inject markup,
and the tags always nest (a form that would overlap another stays text: Telegram refuses a
whole message with mis-nested tags).

Splitting works on the source, so no chunk ever cuts a tag or an entity in half: blocks (lines,
code fences) are packed greedily while the *rendered* chunk fits the limit (4,096 UTF-16 code
units of displayed text, as Telegram counts: an emoji outside the BMP is 2; the tags
themselves are not counted by Telegram, but we count them to stay safe), and a block too
long on its own is cut at a space when there is one. A code fence cut across chunks is closed
and reopened.
"""

from __future__ import annotations

import html
import re
from typing import Final

__all__ = ["MAX_MESSAGE_CHARS", "markdown_to_html", "split_markdown", "utf16_units"]

#: Telegram's limit of one message's text, in UTF-16 code units (what Telegram counts).
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
_FORMS: Final = ((_BOLD, "b"), (_STRIKE, "s"), (_ITALIC_STAR, "i"), (_ITALIC_UNDER, "i"))
_OUR_TAG: Final = re.compile(r"<(/?)([a-z]+)>")


def _well_nested(markup: str) -> bool:
    """Whether the inline tags of ``markup`` (our own; the text itself is escaped) nest."""
    stack: list[str] = []
    for match in _OUR_TAG.finditer(markup):
        closing, name = match.groups()
        if not closing:
            stack.append(name)
        elif not stack or stack.pop() != name:
            return False
    return not stack


def utf16_units(text: str) -> int:
    """The length Telegram measures: UTF-16 code units (an emoji outside the BMP counts 2)."""
    return len(text.encode("utf-16-le")) // 2


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
    for form, tag in _FORMS:
        # Overlapping forms ("**a _b** c_") would make mis-nested tags, which Telegram refuses
        # (the whole message with them): a form that would cross another is left as text.
        formatted = form.sub(rf"<{tag}>\1</{tag}>", text)
        if _well_nested(formatted):
            text = formatted
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
    return utf16_units(markdown_to_html(source)) <= limit


def _cut(block: tuple[str, str | None], limit: int) -> list[tuple[str, str | None]]:
    """Cut one block too long for a message into pieces that each fit."""
    body, lang = block
    pieces: list[tuple[str, str | None]] = []
    rest = body
    while rest:
        if _fits(_source((rest, lang)), limit):
            pieces.append((rest, lang))
            break
        # Rendering escapes and adds tags, so a prefix longer than ``limit`` characters does
        # not fit (a shorter one is still a correct cut): each search looks at about one
        # message of text, not at the whole rest of a huge line.
        lo, hi = 1, min(len(rest), limit)
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
