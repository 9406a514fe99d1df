"""The static audit of a skill bundle: findings, a verdict, and the bundle hash.

Guarantees: the audit only *reads bytes*. Nothing of the bundle is imported, executed, sourced,
rendered or followed (symlinks are judged by their target text); a ``setup.py``, a hook or a
script in the bundle is text like any other. Every entry of the bundle is looked at (not only
``SKILL.md``): text files line by line against the rules below, binaries by their header, links
by where they point.

Each :class:`Finding` has a rule, a severity, the file, the line (0: the whole file) and an
excerpt (non-printable and invisible characters escaped, clipped). Its ``id``
(``<rule>@<file>:<line>``) is what ``lemon skills override --accept-findings`` names.

Verdict: any ``block`` finding -> ``block``; else any ``warn`` -> ``warn``; else ``pass``.

What it does not guarantee: a regex scan catches known shapes of attack, not intent. It is the
floor under the trust policy (every non-builtin install also needs explicit approval), not a
sandbox.
"""

from __future__ import annotations

import bisect
import itertools
import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from lemon_skills.bundle import BundleEntry, BundleLimits, bundle_entries, bundle_hash
from lemon_skills.errors import ManifestError
from lemon_skills.manifest import MANIFEST_FILE, parse_manifest

__all__ = [
    "RULES",
    "AuditLimits",
    "AuditReport",
    "Finding",
    "Rule",
    "Severity",
    "Verdict",
    "audit_bundle",
    "audit_text",
]

Severity = Literal["warn", "block"]
Verdict = Literal["pass", "warn", "block"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Rule:
    """One audit rule: its code, severity and what it is about."""

    code: str
    severity: Severity
    summary: str


RULES: Final[dict[str, Rule]] = {
    r.code: r
    for r in (
        Rule(code="remote_exec", severity="block",
             summary="code from the network piped into an interpreter (curl ... | sh)"),
        Rule(code="credential_read", severity="block",
             summary="reads credentials: ~/.ssh, ~/.aws, .env files, keychains, token files"),
        Rule(code="exfil_endpoint", severity="block",
             summary="sends data out: known exfiltration endpoints, raw-IP URLs, file uploads"),
        Rule(code="obfuscated_exec", severity="block",
             summary="base64 / hex encoded code fed to exec, eval or a shell"),
        Rule(code="prompt_injection", severity="block",
             summary="text aimed at the agent to override its instructions or hide from the user"),
        Rule(code="hidden_unicode", severity="block",
             summary="invisible or bidirectional-control characters in text"),
        Rule(code="native_executable", severity="block",
             summary="a compiled executable (ELF, Mach-O, PE)"),
        Rule(code="symlink_escape", severity="block",
             summary="a symbolic link pointing outside the bundle (or absolute)"),
        Rule(code="manifest_invalid", severity="block",
             summary="no valid SKILL.md at the bundle's top level"),
        Rule(code="destructive_command", severity="warn",
             summary="destructive shell commands (rm -rf, mkfs, dd if=, shred, fork bombs)"),
        Rule(code="binary_file", severity="warn",
             summary="a binary (non-text) file: it cannot be reviewed as text"),
        Rule(code="oversized_file", severity="warn",
             summary="a file over the size bound (only its first part was scanned)"),
    )
}  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    """One thing the audit found."""

    rule: str
    severity: Severity
    file: str
    line: int
    excerpt: str

    @property
    def id(self) -> str:
        """``<rule>@<file>:<line>``: stable for the same bytes; names it in an override."""
        return f"{self.rule}@{self.file}:{self.line}"


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditReport:
    """The outcome of auditing one bundle."""

    verdict: Verdict
    bundle_hash: str
    findings: tuple[Finding, ...] = ()
    files_scanned: int = 0

    @property
    def finding_ids(self) -> frozenset[str]:
        return frozenset(f.id for f in self.findings)

    def to_json(self) -> dict[str, object]:
        """The report as the CLI's ``audit --json`` prints it."""
        return {
            "verdict": self.verdict,
            "bundle_hash": self.bundle_hash,
            "files_scanned": self.files_scanned,
            "findings": [
                {"id": f.id, "rule": f.rule, "severity": f.severity, "file": f.file,
                 "line": f.line, "excerpt": f.excerpt}
                for f in self.findings
            ],
        }  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class AuditLimits:
    """Bounds of the scan."""

    max_file_bytes: int = 1024 * 1024
    """A larger file is reported ``oversized_file`` and only its first part is scanned."""
    bundle: BundleLimits = field(default_factory=BundleLimits)


# -- the text rules ---------------------------------------------------------------------------

_I: Final = re.IGNORECASE
_FETCH: Final = r"(?:curl|wget|iwr|irm|invoke-webrequest|invoke-restmethod|fetch)"
_INTERP: Final = (
    r"(?:sudo\s+(?:-\S+\s+)*)?(?:env\s+(?:\S+=\S*\s+)*)?(?:/usr/local/bin/|/usr/bin/|/bin/)?"
    r"(?:bash|sh|zsh|ksh|dash|fish|python[0-9.]*|perl|ruby|node|php|pwsh|powershell|iex)\b"
)
_HOME: Final = r"(?:~|\$HOME|\$\{HOME\}|%USERPROFILE%|/home/[^/\s]+|/Users/[^/\s]+|/root)"

_TEXT_RULES: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    ("remote_exec", re.compile(rf"\b{_FETCH}\b[^|\n]{{0,500}}\|\s*{_INTERP}", _I)),
    ("remote_exec", re.compile(rf"\b(?:bash|sh|zsh|source|\.)\s+(?:-\S+\s+)*<\(\s*{_FETCH}\b", _I)),
    ("remote_exec", re.compile(rf"\b(?:bash|sh|zsh)\s+-c\s+[\"']?\$\(\s*{_FETCH}\b", _I)),
    ("remote_exec", re.compile(rf"\beval\s+[\"']?(?:\$\(|`)\s*{_FETCH}\b", _I)),
    (
        "remote_exec",
        re.compile(
            r"\b(?:iex|invoke-expression)\b[^\n]{0,500}\b(?:iwr|irm|invoke-webrequest|invoke-restmethod|"
            r"downloadstring)\b",
            _I,
        ),
    ),
    (
        "remote_exec",
        re.compile(
            r"\bexec\s*\([^\n]{0,500}\b(?:urlopen|requests\.get|httpx\.get|urllib\.request)\b", _I
        ),
    ),
    (
        "credential_read",
        re.compile(
            rf"{_HOME}/\.(?:ssh|aws|gnupg|netrc|git-credentials|pypirc|docker/config\.json|"
            r"kube/config|config/gh/hosts\.yml|lemon/secrets)",
            _I,
        ),
    ),
    ("credential_read", re.compile(r"\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws/credentials\b")),
    (
        "credential_read",
        re.compile(
            r"\b(?:cat|less|more|head|tail|strings|xxd|base64|cp|scp|rsync|tar|zip|source|open|"
            r"read_text|read_bytes|readFile\w*|load_dotenv|dotenv_values|Get-Content|type|grep)\b"
            r"[^\n]{0,80}?(?<![\w./-])\.env(?:\.[\w-]+)?\b"
        ),
    ),
    (
        "credential_read",
        re.compile(
            r"\bsecurity\s+(?:find-(?:generic|internet)-password|dump-keychain|export)\b|"
            r"login\.keychain|Library/Keychains|\bsecret-tool\s+lookup\b|\bkeyring\.get_password\b|"
            r"\bkwallet-query\b|\bcmdkey\s+/list\b|\bCredRead\w*|Login Data\b",
            _I,
        ),
    ),
    (
        "exfil_endpoint",
        re.compile(
            r"webhook\.site|requestbin\.(?:com|net)|pipedream\.net|ngrok(?:-free)?\.(?:io|app|dev)|"
            r"burpcollaborator\.net|oastify\.com|interact\.sh|\.oast\.(?:fun|me|pro|live|site|online)|"
            r"canarytokens\.com|hookbin\.com|beeceptor\.com|transfer\.sh|pastebin\.com/api|"
            r"0x0\.st|discord(?:app)?\.com/api/webhooks|api\.telegram\.org/bot|"
            r"hooks\.slack\.com/services",
            _I,
        ),
    ),
    (
        "exfil_endpoint",
        re.compile(r"\b(?:https?|ftp)://(?!127\.|0\.0\.0\.0)(?:\d{1,3}\.){3}\d{1,3}\b", _I),
    ),
    (
        "exfil_endpoint",
        re.compile(
            r"\bcurl\b[^\n]{0,500}\s(?:-d|--data(?:-binary|-raw|-urlencode)?|-F|--form)"
            r"[ \t=]+[\"']?(?:[\w.-]+=)?@",
            _I,
        ),
    ),
    ("exfil_endpoint", re.compile(r"\bcurl\b[^\n]{0,500}\s(?:-T|--upload-file)[ \t]+\S", _I)),
    ("exfil_endpoint", re.compile(r"\bwget\b[^\n]{0,500}--post-file", _I)),
    (
        "exfil_endpoint",
        re.compile(r"\b(?:nc|ncat|netcat|socat|telnet)\b[^\n|]{0,500}[ \t]<[ \t]*\S", _I),
    ),
    (
        "obfuscated_exec",
        re.compile(rf"\bbase64\s+(?:-d|--decode|-D)\b[^\n]{{0,500}}\|\s*{_INTERP}", _I),
    ),
    (
        "obfuscated_exec",
        re.compile(
            r"\b(?:eval|exec|Function)\s*\(\s*(?:compile\s*\(\s*)?(?:base64\.b64decode|b64decode|"
            r"base64\.decodebytes|codecs\.decode|bytes\.fromhex|binascii\.(?:a2b_base64|unhexlify)|"
            r"atob|Buffer\.from|zlib\.decompress|marshal\.loads|__import__\s*\(\s*['\"]base64)",
            _I,
        ),
    ),
    ("obfuscated_exec", re.compile(r"\beval\s+[\"']?\$\([^)\n]*\b(?:base64|xxd)\b", _I)),
    (
        "obfuscated_exec",
        re.compile(r"\bpowershell(?:\.exe)?\s[^\n]{0,500}-(?:e|enc|encodedcommand)\s", _I),
    ),
    (
        "prompt_injection",
        re.compile(
            r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+)?(?:of\s+)?(?:the\s+|your\s+)?"
            r"(?:previous|prior|above|earlier|preceding|system|original)\s+"
            r"(?:instructions|prompts?|rules|directions|guidelines|messages)",
            _I,
        ),
    ),
    (
        "prompt_injection",
        re.compile(
            r"\byou\s+are\s+now\s+(?:in\s+)?(?:developer|dan|jailbreak|god|unrestricted)\s+mode", _I
        ),
    ),
    (
        "prompt_injection",
        re.compile(
            r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|alert|notify|show)\s+(?:this\s+to\s+)?"
            r"the\s+user\b|"
            r"\bwithout\s+(?:telling|informing|asking|notifying|alerting)\s+the\s+user",
            _I,
        ),
    ),
    (
        "prompt_injection",
        re.compile(
            r"\b(?:reveal|print|output|leak|send)\s+(?:your|the)\s+system\s+prompt|"
            r"\bnew\s+system\s+prompt\s*:|<\s*/?\s*system\s*>|"
            r"\bbypass\s+(?:the\s+)?(?:approval|permission|sandbox|safety)\b",
            _I,
        ),
    ),
    (
        "destructive_command",
        re.compile(
            r"\brm\s+(?:-[a-zA-Z]*(?:r[a-zA-Z]*f|f[a-zA-Z]*r)[a-zA-Z]*|--recursive\s+--force|"
            r"--force\s+--recursive)\b|\bmkfs(?:\.\w+)?\b|\bdd\s+if=|\bshred\b|"
            r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:|\bchmod\s+-R\s+777\s+/",
            _I,
        ),
    ),
)

_HIDDEN: Final = re.compile(
    "[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\U000e0000-\U000e007f]"
)
# An encoded blob, and the words that make a line holding one "fed to exec".
_BLOB: Final = re.compile(r"[A-Za-z0-9+/]{120,}={0,2}|(?:\\x[0-9a-fA-F]{2}){24,}|[0-9a-fA-F]{160,}")
_EXEC_WORD: Final = re.compile(r"\b(?:eval|exec|bash|sh|python[0-9.]*|node|Function)\b")
_MAX_EXCERPT: Final = 200
_EXEC_MAGIC: Final = (
    b"\x7fELF", b"MZ", b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf", b"\xce\xfa\xed\xfe",
    b"\xcf\xfa\xed\xfe", b"\xca\xfe\xba\xbe",
)  # fmt: skip


def _excerpt(text: str) -> str:
    """``text`` safe to show: invisible, control and non-printable characters escaped."""
    out: list[str] = []
    for ch in text.strip():
        if ch == "\t":
            out.append(" ")
        elif _HIDDEN.match(ch) or not ch.isprintable() or unicodedata.category(ch) == "Cf":
            out.append(f"\\u{{{ord(ch):04x}}}")
        else:
            out.append(ch)
    joined = "".join(out)
    if len(joined) > _MAX_EXCERPT:
        return joined[:_MAX_EXCERPT] + "..."
    return joined


def audit_text(text: str, *, file: str) -> list[Finding]:
    """The findings of the text rules in ``text`` (the content of ``file``), one per rule and
    line. Each pattern runs once over the whole text (every repetition in a pattern is bounded,
    so a long line costs linear time); a match is reported on the line it starts on."""
    lines = text.split("\n")
    offsets = list(itertools.accumulate((len(line) + 1 for line in lines), initial=0))
    findings: list[Finding] = []
    seen: set[tuple[str, int]] = set()

    def add(rule: str, pos: int) -> None:
        number = bisect.bisect_right(offsets, pos)
        if (rule, number) in seen:
            return
        seen.add((rule, number))
        findings.append(
            Finding(rule=rule, severity=RULES[rule].severity, file=file, line=number,
                    excerpt=_excerpt(lines[number - 1]))
        )  # fmt: skip

    for match in _HIDDEN.finditer(text):
        if match.start() == 0 and match.group() == "\ufeff":
            continue  # a byte-order mark opening the file
        add("hidden_unicode", match.start())
    for rule, pattern in _TEXT_RULES:
        for match in pattern.finditer(text):
            add(rule, match.start())
    for match in _BLOB.finditer(text):
        number = bisect.bisect_right(offsets, match.start())
        if _EXEC_WORD.search(lines[number - 1]):
            add("obfuscated_exec", match.start())
    return findings


def _is_escape(entry: BundleEntry) -> bool:
    target = entry.target or ""
    if target.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", target):
        return True
    parts = [*entry.path.split("/")[:-1], *target.replace("\\", "/").split("/")]
    depth = 0
    for part in parts:
        if part in ("", "."):
            continue
        depth += -1 if part == ".." else 1
        if depth < 0:
            return True
    return False


def _audit_entry(root: Path, entry: BundleEntry, limits: AuditLimits) -> list[Finding]:
    def whole(rule: str, excerpt: str) -> Finding:
        return Finding(
            rule=rule,
            severity=RULES[rule].severity,
            file=entry.path,
            line=0,
            excerpt=_excerpt(excerpt),
        )

    if entry.kind == "symlink":
        if _is_escape(entry):
            return [whole("symlink_escape", f"-> {entry.target}")]
        return []
    findings: list[Finding] = []
    # O_NOFOLLOW: a file swapped for a link after the walk is refused, never followed.
    with os.fdopen(os.open(root / entry.path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as handle:
        data = handle.read(limits.max_file_bytes)
    if entry.size > limits.max_file_bytes:
        findings.append(
            whole(
                "oversized_file",
                f"{entry.size} bytes (bound {limits.max_file_bytes}); the rest was not scanned",
            )
        )
    try:
        text = data.decode("utf-8")
        binary = "\x00" in text
    except UnicodeDecodeError as exc:
        # A file cut at the size bound may end inside a character: still text.
        binary = not (entry.size > limits.max_file_bytes and exc.start >= len(data) - 3)
        text = data[: exc.start].decode("utf-8") if not binary else ""
    if binary:
        if data.startswith(_EXEC_MAGIC):
            findings.append(whole("native_executable", f"{entry.size} bytes, {data[:4]!r}"))
        else:
            findings.append(whole("binary_file", f"{entry.size} bytes, not UTF-8 text"))
        return findings
    findings.extend(audit_text(text, file=entry.path))
    return findings


def audit_bundle(root: Path, limits: AuditLimits | None = None) -> AuditReport:
    """Audit the bundle under ``root`` (read only; see the module docstring).

    Raises :class:`~lemon_skills.errors.SkillSourceError` when ``root`` is not a readable
    bundle at all (missing, a special file inside, over the bundle limits).
    """
    lim = limits or AuditLimits()
    entries = bundle_entries(root, lim.bundle)
    findings: list[Finding] = []
    manifest = next((e for e in entries if e.path == MANIFEST_FILE), None)
    if manifest is None or manifest.kind != "file":
        findings.append(
            Finding(
                rule="manifest_invalid",
                severity="block",
                file=MANIFEST_FILE,
                line=0,
                excerpt="missing (or a link)",
            )
        )
    for entry in entries:
        findings.extend(_audit_entry(root, entry, lim))
    if manifest is not None and manifest.kind == "file":
        try:
            parse_manifest((root / MANIFEST_FILE).read_text("utf-8", errors="replace"))
        except ManifestError as exc:
            findings.append(
                Finding(
                    rule="manifest_invalid",
                    severity="block",
                    file=MANIFEST_FILE,
                    line=0,
                    excerpt=_excerpt(str(exc)),
                )
            )
    findings.sort(key=lambda f: (f.file, f.line, f.rule))
    if any(f.severity == "block" for f in findings):
        verdict: Verdict = "block"
    elif findings:
        verdict = "warn"
    else:
        verdict = "pass"
    return AuditReport(
        verdict=verdict,
        bundle_hash=bundle_hash(entries),
        findings=tuple(findings),
        files_scanned=len(entries),
    )
