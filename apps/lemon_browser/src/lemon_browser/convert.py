"""What a fetched body becomes for the model: HTML as Markdown, PDF as text, JSON indented.

* HTML: comments, scripts, styles, templates, frames and hidden elements (``hidden``,
  ``aria-hidden``, ``display:none``, ``visibility:hidden``, zero font size or opacity) are
  removed first (text a person never sees is where injected instructions hide; the count is
  reported); links are made absolute; the main content is picked by readability-lxml (a port
  of Mozilla's Readability), falling back to the whole body when it keeps too little (forum
  threads, link lists); and markdownify writes Markdown with headings, lists, code blocks,
  tables and links.
* PDF: pypdf's text of each page (at most ``max_pages``), pages separated by a rule.
* JSON: parsed and indented (invalid JSON is shown as text, with a note).

All of it is blocking CPU work: callers run it in a worker thread.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from lemon_browser.errors import FetchRefused

if TYPE_CHECKING:
    import lxml.html

# lxml, readability, markdownify (BeautifulSoup) and pypdf are imported by the conversion
# that needs them: loading them is a large part of a process's start, and most runs of the
# coding agent (which registers the web tools) never fetch a page.

__all__ = ["Converted", "html_to_markdown", "json_to_text", "pdf_to_text"]

_DROP_TAGS: Final = ("script", "style", "noscript", "template", "iframe", "frame", "frameset",
                     "object", "embed", "svg", "canvas", "head", "button", "select")  # fmt: skip
_HIDDEN_STYLE: Final = re.compile(
    r"display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?![.\d]*[1-9])|"
    r"opacity\s*:\s*0(?![.\d]*[1-9])",
    re.IGNORECASE,
)
_BLANK_LINES: Final = re.compile(r"\n{3,}")
_MIN_KEPT: Final = 0.4  # readability must keep this share of the body's text, else the body


@dataclass(frozen=True, kw_only=True, slots=True)
class Converted:
    """A body as text: the text, the title (``""`` when none) and how many hidden elements
    (comments included) were removed."""

    text: str
    title: str = ""
    hidden_removed: int = 0


def _strip_hidden(root: lxml.html.HtmlElement) -> int:
    removed = 0
    for element in list(root.iter()):
        if not isinstance(element.tag, str):
            continue  # comments and processing instructions: dropped by the serializer below
        style = element.get("style") or ""
        if (
            element.get("hidden") is not None
            or (element.get("aria-hidden") or "").lower() == "true"
            or _HIDDEN_STYLE.search(style)
        ):
            parent = element.getparent()
            if parent is not None:
                element.drop_tree()
                removed += 1
    return removed


def _text_length(html: str) -> int:
    import lxml.etree
    import lxml.html

    try:
        return len(lxml.html.fromstring(html).text_content().split()) if html.strip() else 0
    except (lxml.etree.ParserError, ValueError):
        return 0


def html_to_markdown(html: str, base_url: str) -> Converted:
    """The main content of ``html`` (fetched from ``base_url``) as Markdown."""
    if not html.strip():
        return Converted(text="")
    import lxml.etree
    import lxml.html
    from markdownify import markdownify
    from readability import Document

    try:
        root = lxml.html.document_fromstring(html)
    except (lxml.etree.ParserError, ValueError):
        return Converted(text="")
    title_el = root.find(".//title")
    title = " ".join((title_el.text_content() if title_el is not None else "").split())
    comments = len(root.xpath("//comment()"))
    lxml.etree.strip_elements(root, lxml.etree.Comment, with_tail=False)
    for tag in _DROP_TAGS:
        for element in list(root.iter(tag)):
            element.drop_tree()
    removed = comments + _strip_hidden(root)
    for img in root.iter("img"):
        if (img.get("src") or "").startswith("data:"):
            img.set("src", "")
    root.make_links_absolute(base_url, resolve_base_href=True, handle_failures="discard")
    body = root.find("body")
    cleaned = lxml.html.tostring(body if body is not None else root, encoding="unicode")
    try:
        main = Document(cleaned).summary(html_partial=True)
    except (lxml.etree.ParserError, ValueError):  # readability found nothing to score
        main = ""
    if _text_length(main) < _MIN_KEPT * _text_length(cleaned):
        main = cleaned
    text = markdownify(main, heading_style="ATX", bullets="-", strip=["span"])
    text = "\n".join(line.rstrip() for line in text.splitlines())
    text = _BLANK_LINES.sub("\n\n", text).strip()
    if title and not text.startswith("# "):
        text = f"# {title}\n\n{text}"
    return Converted(text=text, title=title, hidden_removed=removed)


def pdf_to_text(data: bytes, *, max_pages: int = 200) -> Converted:
    """The text of a PDF, page by page (at most ``max_pages``); an unreadable or encrypted
    PDF is refused with the reason."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise FetchRefused("the PDF is encrypted; it cannot be read", reason="content_type")
        pages = reader.pages
        parts = [(page.extract_text() or "").strip() for page in list(pages)[:max_pages]]
        title = ""
        meta = reader.metadata
        if meta is not None and meta.title:
            title = str(meta.title)
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise FetchRefused(f"not a readable PDF ({exc})", reason="content_type") from None
    text = "\n\n---\n\n".join(p for p in parts if p)
    if len(pages) > max_pages:
        text += f"\n\n[... {len(pages) - max_pages} more pages not shown]"
    if title:
        text = f"# {title}\n\n{text}"
    return Converted(text=text, title=title)


def json_to_text(text: str) -> Converted:
    """JSON indented by two spaces; text that is not JSON is shown as it is, with a note."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        return Converted(text=f"[the body is not valid JSON ({exc}); shown as text]\n{text}")
    return Converted(text=json.dumps(value, indent=2, ensure_ascii=False))
