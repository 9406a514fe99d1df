"""Local Markdown links: every relative link in the checked documents must resolve.

Checked: inline links and images ``[text](target)``, and reference definitions
``[label]: target``, outside fenced code blocks and inline code. Skipped: targets with a URL
scheme (``https:``, ``mailto:``...) and protocol-relative ``//host`` targets. A target resolves
against the linking file's directory (or the root for ``/path``), must stay inside the root and
exist as a file or directory. A ``#fragment`` on a Markdown target (or on an empty path: the same
file) must match one of its headings' GitHub anchors (lower case; punctuation other than ``-``
and ``_`` removed; spaces to ``-``; repeats get ``-1``, ``-2``...) or an explicit
``<a name>``/``id`` anchor, or a heading attribute ``{#id}`` (the heading's text without the
attribute also gives its slug). A symlink loop or an unreadable target is a finding.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from urllib.parse import unquote

from lemon_quality.findings import Finding

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
_INLINE = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"
)
_REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_ATX = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)\s*$")
_HTML_ANCHOR = re.compile(r"<(?:a\s[^>]*name|[a-z][a-z0-9]*\s[^>]*\bid)=[\"']([^\"']+)[\"']", re.I)
# A heading attribute (Pandoc, kramdown, MkDocs attr_list): ``## Install {#setup .cls}``.
_HEADING_ID = re.compile(r"\s*\{[^}]*#([A-Za-z][\w:.-]*)[^}]*\}\s*$")
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def slug(text: str) -> str:
    """The GitHub anchor of a heading's text (before de-duplication)."""
    text = _MD_LINK.sub(r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("`", "").replace("*", "").replace("~~", "")
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _lines_outside_code(text: str) -> list[tuple[int, str]]:
    out = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        out.append((number, line))
    return out


def anchors(text: str) -> set[str]:
    """Every anchor a document offers: heading slugs (de-duplicated) and HTML anchors."""
    found: set[str] = set()
    counts: dict[str, int] = {}
    lines = _lines_outside_code(text)
    previous: tuple[int, str] | None = None
    for number, line in lines:
        found.update(a.lower() for a in _HTML_ANCHOR.findall(line))
        heading = None
        m = _ATX.match(line)
        if m:
            heading = m.group(2)
        elif (
            _SETEXT.match(line)
            and previous is not None
            and previous[0] == number - 1
            and previous[1].strip()
            and not previous[1].lstrip().startswith(("|", "-", "#"))
        ):
            heading = previous[1].strip()
        previous = (number, line)
        if heading is None:
            continue
        attr = _HEADING_ID.search(heading)
        if attr is not None:
            found.add(attr.group(1).lower())
            heading = heading[: attr.start()]
        base = slug(heading)
        n = counts.get(base, 0)
        counts[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def _targets(text: str) -> list[tuple[int, str]]:
    out = []
    for number, line in _lines_outside_code(text):
        plain = _CODE.sub("", line)
        m = _REFDEF.match(plain)
        if m:
            out.append((number, m.group(1)))
            continue
        out.extend((number, t.group(1)) for t in _INLINE.finditer(plain))
    return out


def _problem(dest: Path, fragment: str, real_root: Path, cache: dict[Path, set[str]]) -> str | None:
    """Why the link target is broken, or None. Never raises: a symlink loop, an unreadable
    file or a too-long path is a finding, not a traceback."""
    try:
        inside = dest.resolve().is_relative_to(real_root)
    except RuntimeError:  # Python < 3.13 reports a symlink loop this way
        return "the target is a symlink loop"
    except OSError as exc:
        return f"the target cannot be resolved ({exc.strerror or exc})"
    if not inside:
        return "points outside the repository"
    try:
        os.stat(dest)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "the target is a symlink loop"
        return "the target does not exist"
    if fragment and dest.is_file() and dest.suffix.lower() in (".md", ".markdown"):
        if dest not in cache:
            try:
                cache[dest] = anchors(dest.read_text(encoding="utf-8", errors="replace"))
            except OSError as exc:
                return f"the target cannot be read ({exc.strerror or exc})"
        if unquote(fragment).lower() not in cache[dest]:
            return f"no heading with anchor #{fragment} in {dest.name}"
    return None


def check_links(root: Path, files: list[str]) -> list[Finding]:
    """Findings for every broken local link in ``files`` (paths relative to ``root``)."""
    findings: list[Finding] = []
    cache: dict[Path, set[str]] = {}
    real_root = root.resolve()
    for rel in files:
        path = root / rel
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue  # vanished or unreadable since the walk: nothing to check
        for line, raw in _targets(text):
            target = raw[1:-1].strip() if raw.startswith("<") else raw
            if not target or _SCHEME.match(target) or target.startswith("//"):
                continue
            file_part, _, fragment = target.partition("#")
            file_part = unquote(file_part.split("?", 1)[0])
            if file_part:
                base = root if file_part.startswith("/") else path.parent
                dest = Path(os.path.normpath(base / file_part.lstrip("/")))
            else:
                dest = path
            problem = _problem(dest, fragment, real_root, cache)
            if problem is not None:
                findings.append(
                    Finding(
                        code="broken_link",
                        app=None,
                        path=rel,
                        line=line,
                        message=f"broken link ({target}): {problem}",
                        hint="fix the path or anchor (anchors are GitHub heading slugs)",
                    )
                )
    return findings
