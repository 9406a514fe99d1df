"""Which files the coding tools may touch: the workspace boundary and secret files.

Two rules, applied to the path *after* ``~``, ``..`` and symlinks are resolved (and, for secret
names, to the path as written too, so neither a link called ``.env`` nor a link to one gets
through):

* **Secret files are refused outright**, inside the workspace too, by every file tool (read,
  ls, find, grep, write, edit): Lemon's own ``$LEMON_HOME/secrets.env`` always, and any path
  matching a secret pattern (:data:`DEFAULT_SECRET_PATTERNS` plus ``[file_access]
  secret_patterns``) unless it matches an ``allow_secrets`` pattern of the home config. Tree
  walks (grep, find) skip secret files and say how many they skipped.
* **The workspace** is the run's working directory and everything below it. The policy gate
  (:mod:`coding_agent.policy`) lets read-only tools run freely inside it and asks for an
  approval (like ``write``) outside it.

Pattern syntax: a glob without ``/`` is matched against the file's name (``*.pem``); one with a
``/`` against the end of the path (``.aws/credentials``, ``.ssh/*``); one starting with ``/`` or
``~`` against the whole path. Matching ignores case.

What this does not cover: ``bash`` can read anything the user can; it always needs an approval
under the default policy, and the approval shows the whole command.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from lemon_core.config import SECRETS_FILENAME, FileAccessConfig

__all__ = ["DEFAULT_SECRET_PATTERNS", "FileAccess"]

DEFAULT_SECRET_PATTERNS: Final[tuple[str, ...]] = (
    # environment files with keys
    ".env",
    ".env.*",
    "*.env",
    # private keys and key stores
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.kdbx",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".ssh/*",
    ".gnupg/*",
    # credential and token files of common tools
    ".netrc",
    "_netrc",
    ".pgpass",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".htpasswd",
    "credentials",
    "credentials.json",
    "*.credentials",
    ".aws/credentials",
    ".docker/config.json",
    ".kube/config",
    "gh/hosts.yml",
)
"""Secret patterns built in (``[file_access] secret_patterns`` adds to them)."""


@dataclass(frozen=True, slots=True)
class _Matcher:
    """A set of patterns compiled once: which one (if any) matches a lower-case path."""

    whole: tuple[tuple[str, re.Pattern[str]], ...]
    """(pattern, regex) matched against the whole path (patterns starting ``/`` or ``~``)."""
    tails: tuple[tuple[int, str, re.Pattern[str]], ...]
    """(number of path parts, pattern, regex) matched against the end of the path."""

    def first(self, path: str) -> str | None:
        parts = path.split("/")
        for pattern, regex in self.whole:
            if regex.match(path):
                return pattern
        for count, pattern, regex in self.tails:
            if len(parts) >= count and regex.match("/".join(parts[-count:])):
                return pattern
        return None


@functools.lru_cache(maxsize=64)
def _matcher(patterns: tuple[str, ...]) -> _Matcher:
    whole: list[tuple[str, re.Pattern[str]]] = []
    tails: list[tuple[int, str, re.Pattern[str]]] = []
    for pattern in patterns:
        text = pattern.strip().lower()
        if not text:
            continue
        if text.startswith(("/", "~")):
            whole.append((pattern, re.compile(fnmatch.translate(os.path.expanduser(text)))))
            continue
        parts = [p for p in text.split("/") if p]
        tails.append((len(parts), pattern, re.compile(fnmatch.translate("/".join(parts)))))
    return _Matcher(whole=tuple(whole), tails=tuple(tails))


@dataclass(frozen=True, kw_only=True, slots=True)
class FileAccess:
    """Secret-file rules of the coding tools (see the module docstring)."""

    secret_patterns: tuple[str, ...] = DEFAULT_SECRET_PATTERNS
    allow_secrets: tuple[str, ...] = ()
    """Patterns exempted from the secret refusal (never Lemon's own secrets file)."""
    protected: tuple[Path, ...] = ()
    """Files refused whatever the patterns say (resolved): Lemon's own secrets file."""

    @classmethod
    def from_config(cls, config: FileAccessConfig, *, home: Path) -> FileAccess:
        """The built-in patterns plus ``config``'s, and ``home``'s secrets file protected."""
        return cls(
            secret_patterns=DEFAULT_SECRET_PATTERNS + tuple(config.secret_patterns),
            allow_secrets=tuple(config.allow_secrets),
            protected=(Path(os.path.realpath(home / SECRETS_FILENAME)),),
        )

    def secret_reason(self, written: Path, *, resolved: Path | None = None) -> str | None:
        """Why ``written`` (an absolute path, not yet resolved) is refused as a secret, or None.

        Both the path as written (``..`` collapsed) and its resolved target (``resolved`` when
        the caller already knows it) are checked; each one that looks secret must be exempted
        by ``allow_secrets`` for the path to pass.
        """
        lexical = Path(os.path.normpath(written))
        if resolved is None:
            resolved = Path(os.path.realpath(written))
        if resolved in self.protected or lexical in self.protected:
            return "it is Lemon's own secrets file (API keys); tools never read or change it"
        secrets, allowed = _matcher(self.secret_patterns), _matcher(self.allow_secrets)
        for candidate in _unique((lexical, resolved)):
            text = candidate.as_posix().lower()
            pattern = secrets.first(text)
            if pattern is None or allowed.first(text) is not None:
                continue
            shown = "" if candidate == lexical else f" (it leads to {candidate})"
            return (
                f"it looks like a secret file{shown}: it matches the secret pattern "
                f"{pattern!r}, so tools never read or change it. If the user really wants the "
                "agent to use it, they can exempt it with [file_access] allow_secrets in their "
                "Lemon home config.toml"
            )
        return None


def _unique(paths: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for path in paths:
        if path not in out:
            out.append(path)
    return out
