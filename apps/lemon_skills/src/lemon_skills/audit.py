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
from typing import BinaryIO, Final, Literal

from lemon_skills.bundle import (
    INVISIBLE_CHARS,
    BundleEntry,
    BundleLimits,
    bundle_entries,
    bundle_hash,
    open_inside,
)
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
             summary="reads credentials (~/.ssh, ~/.aws, .env files, keychains, token files) "
                     "or ships them (private keys, API tokens)"),
        Rule(code="exfil_endpoint", severity="block",
             summary="sends data out: known exfiltration endpoints, raw-IP URLs, file uploads"),
        Rule(code="obfuscated_exec", severity="block",
             summary="base64 / hex encoded code fed to exec, eval or a shell"),
        Rule(code="prompt_injection", severity="block",
             summary="text aimed at the agent to override its instructions or hide from the user"),
        Rule(code="hidden_unicode", severity="block",
             summary="invisible, bidirectional-control or terminal-control characters in text"),
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
             summary="a file over the size bound (scanned in parts; too big to review)"),
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
    """A larger file is reported ``oversized_file`` and scanned in parts of this size (the
    whole bundle is bounded by :class:`BundleLimits`)."""
    bundle: BundleLimits = field(default_factory=BundleLimits)


# -- the text rules ---------------------------------------------------------------------------

_I: Final = re.IGNORECASE
_FETCH: Final = r"(?:curl|wget|iwr|irm|invoke-webrequest|invoke-restmethod|fetch)"
# Every repetition below is bounded and unambiguous (one way to split a token): a pattern like
# ``(?:\S+=\S*\s+)*`` lets the engine try exponentially many splits of ``a=a=a=...`` before
# failing, so a crafted line would stall the audit.
_INTERP: Final = (
    r"(?:sudo\s+(?:-\S+\s+){0,8})?(?:env\s+(?:[^\s=]+=\S*\s+){0,16})?"
    r"(?:/usr/local/bin/|/usr/bin/|/bin/)?"
    r"(?:(?:bash|sh|zsh|ksh|dash|fish|python[0-9.]*|perl|ruby|node|php|pwsh|powershell|iex)\b|"
    r"\$\{?SHELL\b\}?)"
)
_HOME: Final = r"(?:~|\$HOME|\$\{HOME\}|%USERPROFILE%|/home/[^/\s]+|/Users/[^/\s]+|/root)"

_TEXT_RULES: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    (
        "remote_exec",
        re.compile(
            rf"\b{_FETCH}\b[^\n]{{0,500}}?\|\s*(?:xargs\s+(?:-\S+\s+){{0,6}})?{_INTERP}", _I
        ),
    ),
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
            r"-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File|"
            r"\b(?:AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36}|github_pat_\w{22,}|"
            r"xox[abposr]-[A-Za-z0-9-]{10,}|sk-(?:ant|proj)-[A-Za-z0-9_-]{20,}|"
            r"glpat-[A-Za-z0-9_-]{20})"
        ),
    ),
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
        # reverse shells and DNS exfiltration
        "exfil_endpoint",
        re.compile(
            r"/dev/(?:tcp|udp)/[\w.$:{}-]+/\w+|"
            r"\b(?:nc|ncat|netcat)\b[^\n|]{0,200}\s-(?:e|c)\s+\S|"
            r"\bsocat\b[^\n|]{0,200}\b(?:exec|system):|"
            r"\b(?:dig|nslookup|host|drill)\b[^\n|]{0,200}(?:\$\(|`)",
            _I,
        ),
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
        re.compile(
            r"\b(?:gunzip|gzip\s+-\w*d|zcat|bzcat|bunzip2|bzip2\s+-\w*d|xzcat|unxz|xz\s+-\w*d|"
            r"zstdcat|unzstd|zstd\s+-\w*d|unzip\s+-\w*p|tar\s+-?\w*O\w*|xxd\s+-\w*r|uudecode|"
            r"openssl\s+(?:enc|base64)|rev)\b"
            rf"[^\n]{{0,500}}?\|\s*(?:xargs\s+(?:-\S+\s+){{0,6}})?{_INTERP}",
            _I,
        ),
    ),
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

# What every match of each text rule's pattern contains (aligned with _TEXT_RULES): groups that
# must all be present, each satisfied by any one of its literals, looked up (``in``) in the text
# lowered the way the IGNORECASE patterns compare it (:func:`_haystack`). A pattern whose groups
# are not all present cannot match and is not run: most text (a web page, a README) then costs a
# few substring searches instead of a regex scan per rule. A pattern's needles may only ever be
# loosened (a test checks every pattern's triggers, case-folded and look-alike variants too).
_FETCH_WORDS: Final = ("curl", "wget", "iwr", "irm", "invoke-webrequest", "invoke-restmethod",
                       "fetch")  # fmt: skip
_INTERP_WORDS: Final = ("sh", "python", "perl", "ruby", "node", "php", "iex")  # bash, pwsh ...
_Needles = tuple[tuple[str, ...], ...]
_NEEDLES: Final[tuple[_Needles, ...]] = (
    (_FETCH_WORDS, ("|",), _INTERP_WORDS),
    (("<(",), _FETCH_WORDS),
    (("$(",), _FETCH_WORDS),
    (("eval",), _FETCH_WORDS),
    (("iex", "invoke-expression"),
     ("iwr", "irm", "invoke-webrequest", "invoke-restmethod", "downloadstring")),
    (("exec",), ("urlopen", "requests.get", "httpx.get", "urllib.request")),
    (("/.ssh", "/.aws", "/.gnupg", "/.netrc", "/.git-credentials", "/.pypirc", "/.docker/",
      "/.kube/", "/.config/gh/", "/.lemon/secrets"),),
    (("id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", ".aws/credentials"),),
    (("-----begin ", "putty-user-key-file", "akia", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
      "github_pat_", "xox", "sk-ant-", "sk-proj-", "glpat-"),),
    ((".env",),),
    (("security", "login.keychain", "library/keychains", "secret-tool", "keyring.get_password",
      "kwallet-query", "cmdkey", "credread", "login data"),),
    (("webhook.site", "requestbin.", "pipedream.net", "ngrok", "burpcollaborator.net",
      "oastify.com", "interact.sh", ".oast.", "canarytokens.com", "hookbin.com",
      "beeceptor.com", "transfer.sh", "pastebin.com/api", "0x0.st", "discord",
      "api.telegram.org/bot", "hooks.slack.com/services"),),
    (("://",),),
    (("curl",), ("@",)),
    (("curl",), ("-t", "--upload-file")),
    (("wget",), ("--post-file",)),
    (("nc", "netcat", "socat", "telnet"), ("<",)),
    (("/dev/tcp/", "/dev/udp/", "nc", "netcat", "socat", "$(", "`"),),
    (("base64",), ("|",), _INTERP_WORDS),
    (("eval", "exec", "function"),
     ("b64decode", "base64.decodebytes", "codecs.decode", "bytes.fromhex", "binascii.", "atob",
      "buffer.from", "zlib.decompress", "marshal.loads", "__import__")),
    (("eval",), ("$(",), ("base64", "xxd")),
    (("|",), _INTERP_WORDS),
    (("powershell",),),
    (("ignore", "disregard", "forget", "override"),
     ("instruction", "prompt", "rules", "direction", "guideline", "message")),
    (("you",), ("mode",)),
    (("user",), ("not", "don't", "never", "without")),
    (("system", "bypass"),),
    (("rm", "mkfs", "dd", "shred", ":(", "chmod"),),
)  # fmt: skip
if len(_NEEDLES) != len(_TEXT_RULES):  # pragma: no cover - a table edited without the other
    raise RuntimeError("_NEEDLES must have one entry per _TEXT_RULES pattern")


def _haystack(text: str) -> str:
    """``text`` lowered as the IGNORECASE patterns compare it: ``str.lower`` plus the
    equivalences of Python's regex engine that it does not give (dotless i and long s read as
    ``i`` and ``s``; capital I with dot above lowers to ``i`` and a combining dot)."""
    return text.lower().replace("\u0131", "i").replace("\u017f", "s").replace("i\u0307", "i")


def _may_match(needles: _Needles, hay: str) -> bool:
    return all(any(n in hay for n in group) for group in needles)


# Download-then-run in two steps (``curl -o /tmp/i URL && sh /tmp/i``, ``wget -O f URL; bash f``,
# the steps on one line or on later lines): a fetch that saves to a file, then that file run by
# an interpreter, sourced, or executed as a command within the next _RUN_WINDOW characters.
# The flags are case-sensitive (``wget -o`` is a log file, ``curl -O`` the remote name).
_SAVED_FILE: Final = r"[\"']?(?P<file>[^\s\"';&|<>()-][^\s\"';&|<>()]{0,300})"
_URL_NAME: Final = (
    r"(?:https?|ftp)://[^\s\"';&|<>]{0,300}/"
    r"(?P<file>[\w.-]{1,200})(?=[\s\"';&|)]|$)"
)
_SAVES: Final[tuple[re.Pattern[str], ...]] = (
    re.compile(
        rf"\bcurl\b[^\n;&|]{{0,500}}?\s(?:-[a-zA-Z]{{0,12}}o|--output)(?:[ \t]+|=){_SAVED_FILE}"
    ),
    re.compile(
        rf"\bwget\b[^\n;&|]{{0,500}}?\s(?:-[a-zA-Z]{{0,12}}O[ \t]*|--output-document(?:[ \t]+|=))"
        rf"{_SAVED_FILE}"
    ),
    re.compile(rf"\b(?:curl|wget)\b[^\n;&|>]{{0,500}}?(?<![0-9&])>>?[ \t]*{_SAVED_FILE}"),
    re.compile(
        rf"\b(?:iwr|irm|invoke-webrequest|invoke-restmethod)\b[^\n;&|]{{0,500}}?\s-OutFile[ \t]+"
        rf"{_SAVED_FILE}",
        _I,
    ),
    # wget without -O, curl -O: the file is named after the URL's last segment
    re.compile(
        rf"\bwget\b(?![^\n;&|]{{0,500}}\s(?:-[a-zA-Z]{{0,12}}O|--output-document|-[a-zA-Z]{{0,12}}P))"
        rf"[^\n;&|]{{0,500}}?{_URL_NAME}"
    ),
    re.compile(
        rf"\bcurl\b(?=[^\n;&|]{{0,500}}\s(?:-[a-zA-Z]{{0,12}}O\b|--remote-name\b))"
        rf"[^\n;&|]{{0,500}}?{_URL_NAME}"
    ),
)
_SAVE_NEEDLES: Final[_Needles] = (("curl", "wget", "iwr", "irm", "invoke-webrequest",
                                    "invoke-restmethod"),)  # fmt: skip
_RUN_WINDOW: Final = 1500


def _runs_file(after: str, file: str) -> bool:
    """Whether ``after`` (the text following a download that saved ``file``) runs ``file``:
    ``sh FILE``, ``python3 FILE``, ``. FILE``, ``source FILE``, or ``FILE`` / ``./FILE`` as a
    command."""
    bare = file.removeprefix("./")
    names = "|".join(re.escape(n) for n in {file, bare})
    direct = "|".join(re.escape(n if "/" in n else f"./{n}") for n in {file, bare})
    run = re.compile(
        rf"(?<![\w./-])(?:{_INTERP}|source\b|\.(?=[ \t]))[ \t]+(?:-\S+[ \t]+){{0,4}}[\"']?"
        rf"(?:\./)?(?:{names})(?![\w./-])|"
        rf"[;&|(\n][ \t]*(?:sudo[ \t]+)?[\"']?(?:{direct})(?![\w./-])",
        _I,
    )
    return run.search(after[:_RUN_WINDOW]) is not None


_HIDDEN: Final = re.compile(f"[{INVISIBLE_CHARS}]")
# Terminal control characters in a text file (ESC sequences that conceal or overwrite text when
# the file is shown, backspaces, C1 controls such as the 8-bit CSI); tab, newline, carriage
# return, vertical tab and form feed are ordinary.
_CONTROL: Final = re.compile("[\x01-\x08\x0e-\x1f\x7f\x80-\x9f]")
# A shell line continuation: scanned as if the two lines were one (same length, so positions
# keep their line numbers).
_CONTINUATION: Final = re.compile(r"\\\r?\n")
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


_VS: Final = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")


def _emoji_style(text: str, pos: int) -> bool:
    """Whether the character at ``pos`` is one text / emoji presentation selector (U+FE0E,
    U+FE0F) right after a visible character, as in a warning sign emoji: ordinary. A run of
    selectors, or one after a space, is how a hidden message is smuggled: not ordinary."""
    if text[pos] not in "\ufe0e\ufe0f" or pos == 0:
        return False
    before, after = text[pos - 1], text[pos + 1 : pos + 2]
    return not (before.isspace() or _VS.match(before) or (after and _VS.match(after)))


def _joined(text: str) -> str:
    return _CONTINUATION.sub(lambda m: " " * len(m.group()), text)


# Cyrillic and Greek letters that look like Latin ones ("ignore" with a Cyrillic i): folded to
# the Latin letter in the normalized pass.
_CONFUSABLES: Final = str.maketrans(
    "\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0456\u0458\u0455\u0501\u04bb"
    "\u051b\u051d\u0410\u0412\u0415\u041a\u041c\u041d\u041e\u0420\u0421\u0422"
    "\u0425\u0406\u0408\u0405\u03bf\u03b1\u03b5\u03b9\u03c1\u03c4\u03c5\u03bd"
    "\u03ba\u03c7\u0391\u0392\u0395\u0397\u0399\u039a\u039c\u039d\u039f\u03a1"
    "\u03a4\u03a5\u03a7\u0396",
    "aeopcyxijsdhqwABEKMHOPCTXIJSoaeiptuvkxABEHIKMNOPTYXZ",
)
# Shell quoting inside a word (``c'u'rl``, ``c""url``, ``c\\url``) reads as the word itself.
_WORD_QUOTES: Final = re.compile(r"(?<=\w)(?:''|\"\"|['\"\\])(?=\w)|(?<=\w)''|''(?=\w)")


def _normalized(text: str) -> str | None:
    """The lines of ``text`` that change when invisible characters are removed, compatibility
    forms folded (NFKC: fullwidth and mathematical letters become ASCII), Cyrillic and Greek
    look-alikes folded to Latin letters, and shell quotes
    inside words dropped, normalized, with their neighbour lines (a phrase may run on to the
    next line); every other line blank, so the line numbers stay and a second scan costs only
    what changed. ``None`` when nothing changes."""
    lines = text.split("\n")
    out: list[str] = []
    changed: list[int] = []
    for i, line in enumerate(lines):
        norm = line
        if not norm.isascii():
            norm = unicodedata.normalize("NFKC", _HIDDEN.sub("", norm)).replace("\n", " ")
            norm = norm.translate(_CONFUSABLES)
        norm = _WORD_QUOTES.sub("", norm)
        out.append(norm)
        if norm != line:
            changed.append(i)
    if not changed:
        return None
    keep = {j for i in changed for j in (i - 1, i, i + 1)}
    return "\n".join(line if i in keep else "" for i, line in enumerate(out))


def audit_text(
    text: str, *, file: str, characters: bool = True, rules: frozenset[str] | None = None
) -> list[Finding]:
    """The findings of the text rules in ``text`` (the content of ``file``), one per rule and
    line. Each pattern runs once over the whole text (every repetition in a pattern is bounded
    and unambiguous, so a long line costs linear time); a match is reported on the line it
    starts on. Shell line continuations are read as one line, and a text that changes when
    normalized is scanned a second time with invisible characters removed, shell quotes inside
    words dropped and compatibility forms folded (fullwidth ``ignore`` reads as ``ignore``).
    ``characters=False`` leaves out the invisible / control character checks (for the text
    found in a binary file, where such bytes are ordinary). ``rules`` runs only those rules
    (``None``: all). A pattern runs only when the text holds the literals every match of it
    contains (``_NEEDLES``): the findings are the same, found faster."""
    if rules is not None and "hidden_unicode" not in rules:
        characters = False
    lines = text.split("\n")
    findings: list[Finding] = []
    seen: set[tuple[str, int]] = set()

    def add(rule: str, number: int) -> None:
        if (rule, number) in seen:
            return
        seen.add((rule, number))
        findings.append(
            Finding(rule=rule, severity=RULES[rule].severity, file=file, line=number,
                    excerpt=_excerpt(lines[number - 1]))
        )  # fmt: skip

    def scan(variant: str) -> None:
        offsets = list(
            itertools.accumulate((len(line) + 1 for line in variant.split("\n")), initial=0)
        )
        vlines = variant.split("\n")

        def line_of(pos: int) -> int:
            return bisect.bisect_right(offsets, pos)

        hay = _haystack(variant)
        for (rule, pattern), needles in zip(_TEXT_RULES, _NEEDLES, strict=True):
            if (rules is not None and rule not in rules) or not _may_match(needles, hay):
                continue
            for match in pattern.finditer(variant):
                add(rule, line_of(match.start()))
        saves = (rules is None or "remote_exec" in rules) and _may_match(_SAVE_NEEDLES, hay)
        for pattern in _SAVES if saves else ():
            for match in pattern.finditer(variant):
                if _runs_file(variant[match.end() :], match.group("file")):
                    add("remote_exec", line_of(match.start()))
        blobs = rules is None or "obfuscated_exec" in rules
        for match in _BLOB.finditer(variant) if blobs else ():
            number = line_of(match.start())
            if _EXEC_WORD.search(vlines[number - 1]):
                add("obfuscated_exec", number)

    start_offsets = list(itertools.accumulate((len(line) + 1 for line in lines), initial=0))
    for match in _HIDDEN.finditer(text) if characters else ():
        if match.start() == 0 and match.group() == "\ufeff":
            continue  # a byte-order mark opening the file
        if _emoji_style(text, match.start()):
            continue
        add("hidden_unicode", bisect.bisect_right(start_offsets, match.start()))
    for match in _CONTROL.finditer(text) if characters else ():
        add("hidden_unicode", bisect.bisect_right(start_offsets, match.start()))
    scan(_joined(text))
    normalized = _normalized(text)
    if normalized is not None:
        scan(_joined(normalized))
    findings.sort(key=lambda f: (f.line, f.rule))
    return findings


def _is_escape(root: Path, entry: BundleEntry) -> bool:
    """Whether the link ``entry`` leads out of the bundle: by its target text (absolute, or
    ``..`` past the top), or once resolved on disk (a chain through other links of the bundle,
    e.g. ``x/up -> ..`` then ``home -> x/up/x/up/../..``); a loop counts as an escape. Only
    link targets are read, never the files they lead to."""
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
    try:
        base = root.resolve(strict=True)
        resolved = (root / entry.path).resolve()
    except (OSError, RuntimeError):  # a loop (RuntimeError before Python 3.13)
        return True
    return resolved != base and base not in resolved.parents


_BOMS: Final = (
    (b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"),
)  # fmt: skip


def _bom_text(data: bytes) -> str | None:
    """The text of a UTF-16 / UTF-32 file that opens with its byte-order mark (PowerShell and
    Windows tools read those as text, so the audit must too), else ``None``."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(codec, errors="replace").replace("\r\n", "\n")
    return None


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
        if _is_escape(root, entry):
            return [whole("symlink_escape", f"-> {entry.target}")]
        return []
    findings: list[Finding] = []
    # Opened without following any link: a file swapped for a link after the walk is refused.
    with os.fdopen(open_inside(root, entry.path), "rb") as handle:
        data = handle.read(limits.max_file_bytes)
        oversized = entry.size > limits.max_file_bytes
        if oversized:
            findings.append(
                whole(
                    "oversized_file",
                    f"{entry.size} bytes (bound {limits.max_file_bytes}); scanned in parts",
                )
            )
        head = data
        if _bom_text(head[:4]) is not None:  # UTF-16 / UTF-32: decoded whole
            wide_text = _bom_text(head + handle.read())
            assert wide_text is not None
            findings.extend(audit_text(wide_text, file=entry.path))
            return findings
        try:
            binary = "\x00" in head.decode("utf-8")
        except UnicodeDecodeError as exc:
            # A file cut at the size bound may end inside a character: still text.
            binary = not (oversized and exc.start >= len(head) - 3)
        if binary:
            if head.startswith(_EXEC_MAGIC):
                findings.append(whole("native_executable", f"{entry.size} bytes, {head[:4]!r}"))
            else:
                findings.append(whole("binary_file", f"{entry.size} bytes, not UTF-8 text"))
        # A "binary" file is scanned too: a Latin-1 text, or a text with a NUL byte far from
        # its start, is still read to the model by read_skill (which sees only its head).
        findings.extend(
            _scan_in_parts(head, handle, entry.path, limits.max_file_bytes, characters=not binary)
        )
    return findings


def _scan_in_parts(
    head: bytes, handle: BinaryIO, file: str, part_bytes: int, *, characters: bool = True
) -> list[Finding]:
    """The text rules over the whole file, ``part_bytes`` at a time, each part cut after its
    last newline (a newline byte is never inside a UTF-8 character) so no line is split unless
    it is longer than a part; line numbers count from the top of the file."""
    findings: list[Finding] = []
    buf, eof, base = head, False, 0
    while True:
        while not eof and len(buf) <= part_bytes:
            more = handle.read(part_bytes)
            eof = not more
            buf += more
        if len(buf) <= part_bytes:
            part, buf = buf, b""
        else:
            cut = buf.rfind(b"\n", 0, part_bytes)
            cut = cut + 1 if cut != -1 else part_bytes
            part, buf = buf[:cut], buf[cut:]
        text = part.decode("utf-8", errors="replace")
        findings.extend(
            Finding(rule=f.rule, severity=f.severity, file=f.file, line=f.line + base,
                    excerpt=f.excerpt)
            for f in audit_text(text, file=file, characters=characters)
        )  # fmt: skip
        base += text.count("\n")
        if eof and not buf:
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
        # read_skill lists file names to the model: a name is text like any other
        findings.extend(
            Finding(rule=f.rule, severity=f.severity, file=entry.path, line=0,
                    excerpt=_excerpt(f"file name: {entry.path}"))
            for f in audit_text(entry.path, file=entry.path)
        )  # fmt: skip
    if manifest is not None and manifest.kind == "file":
        try:
            parsed = parse_manifest((root / MANIFEST_FILE).read_text("utf-8", errors="replace"))
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
        else:
            # The description as parsed is what the system prompt lists: YAML escapes
            # ("\x69gnore ...") must not hide a phrase the raw text scan cannot see.
            raw_rules = {f.rule for f in findings if f.file == MANIFEST_FILE}
            findings.extend(
                Finding(rule=f.rule, severity=f.severity, file=MANIFEST_FILE, line=0,
                        excerpt=_excerpt(f"description (as parsed): {parsed.description}"))
                for f in audit_text(parsed.description, file=MANIFEST_FILE)
                if f.rule not in raw_rules
            )  # fmt: skip
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
