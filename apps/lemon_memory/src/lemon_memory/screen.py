"""The write screen: every write path (tool, ingest, CLI, import) runs it *before* anything
is persisted, so neither the FTS index nor the WAL ever receives a secret.

:func:`find_secrets` finds spans that look like secrets (exact known values, provider
prefixes, JWTs, PEM private keys, ``password=``-style assignments, URIs with a password,
high-entropy runs); :func:`redact` replaces each with ``[REDACTED:kind]``. :func:`check_text`
refuses NUL bytes, unpaired surrogates, invisible or bidirectional control characters and
prompt-injection phrases.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from lemon_memory.errors import MemoryInputError

__all__ = ["SecretSpan", "check_text", "find_secrets", "redact"]

_PATTERNS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    ("pem_private_key", re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:.|\n)*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)"
    )),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{6,}\.eyJ[A-Za-z0-9_-]{6,}\.[A-Za-z0-9_-]{6,}")),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{12,}")),
    ("stripe_key", re.compile(r"\b(?:sk|rk)_live_[A-Za-z0-9]{12,}")),
    ("openai_key", re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")),
    ("aws_key", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    ("github_token", re.compile(r"\b(?:ghp_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})")),
    ("slack_token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("google_key", re.compile(r"\bAIza[0-9A-Za-z_-]{30,}")),
    ("google_oauth", re.compile(r"\bya29\.[0-9A-Za-z_-]{20,}")),
    ("gitlab_token", re.compile(r"\bglpat-[0-9A-Za-z_-]{20,}")),
    ("huggingface_token", re.compile(r"\bhf_[A-Za-z0-9]{20,}")),
    ("uri_password", re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:(?P<v>[^/\s@]+)@")),
    ("assignment", re.compile(
        r"(?i)\b(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|auth[_-]?token)"
        r"\b\s*[:=]\s*[\"']?(?P<v>[^\s\"',;]{4,})"
    )),
)  # fmt: skip
#: Every pattern at once (flags scoped, groups unnamed): one pass tells whether any of them can
#: match, so a text with no secret (nearly every write) is scanned once, not 14 times.
_ANY: Final = re.compile(
    "|".join(
        "(?:" + (f"(?i:{p.pattern[4:]})" if p.pattern.startswith("(?i)") else p.pattern) + ")"
        for _, p in _PATTERNS
    ).replace("(?P<v>", "(?:")
)
#: For ASCII text (where case folding is plain ASCII), a pattern can only match when one of
#: these is in the text (case-sensitive literals), or one of the assignment keywords is in
#: its lower-cased form: a text with none of them skips every pattern.
_LITERALS: Final = (
    "-----BEGIN", "eyJ", "sk-", "_live_", "AKIA", "ASIA", "ghp_", "github_pat_", "xox",
    "AIza", "ya29.", "glpat-", "hf_", "://",
)  # fmt: skip
_ASSIGNMENT_WORDS: Final = ("pass", "pwd", "secret", "token", "api", "access", "auth")
#: Likewise for the injection phrases: each alternative needs one of these (lower-cased).
_INJECTION_WORDS: Final = ("ignore", "disregard", "forget", "now", "system", "<")
_RUN_MIN: Final = 32
_RUN: Final = re.compile(r"[A-Za-z0-9+=_\-]{32,}")
_ENTROPY_BITS: Final = 4.0
_MIN_KNOWN: Final = 8
_INVISIBLE: Final = re.compile(
    "[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)
_INJECTION: Final = re.compile(
    r"(?i)\b(?:ignore|disregard|forget)\s+(?:all\s+|any\s+|the\s+)?(?:previous|prior|above|earlier)"
    r"\s+(?:instructions|prompts?|rules)"
    r"|\byou\s+are\s+now\s+(?:a|an|in)\b"
    r"|\bnew\s+system\s+prompt\b"
    r"|\b(?:reveal|print|show)\s+(?:your|the)\s+system\s+prompt\b"
    r"|<\s*/?\s*(?:system|assistant)\s*>"
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class SecretSpan:
    """One secret-looking span of a text (never logged: only its kind and place)."""

    kind: str
    start: int
    end: int


def _entropy(text: str) -> float:
    counts = Counter(text)
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _high_entropy(run: str) -> bool:
    classes = sum(
        (
            any(c.islower() for c in run),
            any(c.isupper() for c in run),
            any(c.isdigit() for c in run),
        )
    )
    return classes >= 2 and any(c.isdigit() for c in run) and _entropy(run) >= _ENTROPY_BITS


def _may_match(text: str) -> bool:
    """False only when no pattern of :data:`_PATTERNS` can match ``text`` (a cheap gate
    before the regular expressions; non-ASCII text always goes on to them)."""
    if not text.isascii():
        return True
    for lit in _LITERALS:
        if lit in text:
            return True
    lower = text.lower()
    for word in _ASSIGNMENT_WORDS:  # noqa: SIM110  (a loop: no generator on the hot path)
        if word in lower:
            return True
    return False


def find_secrets(text: str, known: Iterable[str] = ()) -> list[SecretSpan]:
    """The secret-looking spans of ``text``, sorted, overlaps merged (the first kind wins)."""
    if not text:
        return []
    spans: list[SecretSpan] = []
    for value in known:
        if len(value) < _MIN_KNOWN:
            continue
        start = text.find(value)
        while start >= 0:
            spans.append(SecretSpan("known_secret", start, start + len(value)))
            start = text.find(value, start + 1)
    for kind, pattern in _PATTERNS if _may_match(text) and _ANY.search(text) else ():
        for m in pattern.finditer(text):
            if "v" in pattern.groupindex and m.group("v") is not None:
                spans.append(SecretSpan(kind, m.start("v"), m.end("v")))
            else:
                spans.append(SecretSpan(kind, m.start(), m.end()))
    # A run is inside one whitespace-separated word: no word of 32+ characters, no run.
    long_word = max(map(len, text.split()), default=0) >= _RUN_MIN
    for m in _RUN.finditer(text) if long_word else ():
        if _high_entropy(m.group()):
            spans.append(SecretSpan("high_entropy", m.start(), m.end()))
    spans.sort(key=lambda s: (s.start, -s.end))
    merged: list[SecretSpan] = []
    for span in spans:
        if merged and span.start < merged[-1].end:
            last = merged[-1]
            merged[-1] = SecretSpan(last.kind, last.start, max(last.end, span.end))
        else:
            merged.append(span)
    return merged


def redact(text: str, known: Iterable[str] = ()) -> tuple[str, int]:
    """``text`` with each secret span replaced by ``[REDACTED:kind]``, and how many."""
    spans = find_secrets(text, known)
    if not spans:
        return text, 0
    out: list[str] = []
    at = 0
    for span in spans:
        out.append(text[at : span.start])
        out.append(f"[REDACTED:{span.kind}]")
        at = span.end
    out.append(text[at:])
    return "".join(out), len(spans)


def check_text(field: str, text: str) -> None:
    """Refuse (``MemoryInputError``) NUL bytes, text that is not valid UTF-8, invisible or
    bidirectional control characters and prompt-injection phrases."""
    if "\x00" in text:
        raise MemoryInputError(f"{field} contains a NUL byte: remove it")
    if not text:
        return
    if text.isascii():  # no surrogate, no invisible character; phrases only with their words
        lower = text.lower()
        for word in _INJECTION_WORDS:
            if word in lower:
                _check_injection(field, text)
                return
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise MemoryInputError(f"{field} is not valid UTF-8 (an unpaired surrogate)") from None
    m = _INVISIBLE.search(text)
    if m is not None:
        raise MemoryInputError(
            f"{field} contains an invisible or bidirectional control character "
            f"(U+{ord(m.group()):04X}) at {m.start()}: remove it"
        )
    _check_injection(field, text)


def _check_injection(field: str, text: str) -> None:
    if _INJECTION.search(text):
        raise MemoryInputError(
            f"{field} reads like an instruction to the model (a prompt-injection phrase); "
            "memory stores facts and notes, not instructions: rephrase it as a fact"
        )
