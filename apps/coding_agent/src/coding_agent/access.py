"""Which files the coding tools may touch: the workspace boundary and secret files.

Two rules, applied to the path *after* ``~``, ``..`` and symlinks are resolved (and, for secret
names, to the path as written too, so neither a link called ``.env`` nor a link to one gets
through):

* **Secret files are refused outright**, inside the workspace too, by every file tool (read,
  ls, find, grep, write, edit): Lemon's own ``$LEMON_HOME/secrets.env`` always, and any path
  matching a secret pattern (:data:`DEFAULT_SECRET_PATTERNS` plus ``[file_access]
  secret_patterns``) unless it matches an ``allow_secrets`` pattern of the home config. Tree
  walks (grep, find) skip secret files and say how many they skipped.
* **The protected files are recognised by identity too** (device and inode, taken afresh at
  every check, so a secrets file rewritten by ``lemon setup`` is still known): a hard link is
  another name for the same file, which neither the name nor ``realpath`` reveals.
* **The workspace** is the run's working directory and everything below it. The policy gate
  (:mod:`coding_agent.policy`) lets read-only tools run freely inside it and asks for an
  approval (like ``write``) outside it.

Pattern syntax: a glob without ``/`` is matched against the file's name (``*.pem``); one with a
``/`` against the end of the path (``.aws/credentials``, ``.ssh/*``); one starting with ``/`` or
``~`` against the whole path. Matching ignores case.

What this does not cover: ``bash`` can read anything the user can; it always needs an approval
under the default policy, and the approval shows the whole command. A hard link to a file that
is secret only by its *name* (``~/.ssh/id_rsa`` linked as ``notes.txt``) is not recognised: only
the protected files are compared by identity. A file swapped between the check and the open (a
race another process would have to run) is not caught.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from coding_agent._sections import FileAccessConfig
from lemon_core.config import SECRETS_FILENAME

__all__ = ["DEFAULT_SECRET_PATTERNS", "FileAccess", "FileIdentity"]

FileIdentity = tuple[int, int]
"""``(st_dev, st_ino)``: what makes two names the same file."""

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

    def protected_identities(self) -> dict[FileIdentity, Path]:
        """The device and inode of each protected file that exists now (a missing one has none).

        Taken afresh by every check (one ``stat`` per protected file): the secrets file may be
        created or replaced, with a new inode, after the rules were built."""
        out: dict[FileIdentity, Path] = {}
        for path in self.protected:
            try:
                info = os.stat(path)
            except OSError:
                continue
            out[(info.st_dev, info.st_ino)] = path
        return out

    def secret_reason(
        self,
        written: Path,
        *,
        resolved: Path | None = None,
        identities: Mapping[FileIdentity, Path] | None = None,
    ) -> str | None:
        """Why ``written`` (an absolute path, not yet resolved) is refused as a secret, or None.

        Both the path as written (``..`` collapsed) and its resolved target (``resolved`` when
        the caller already knows it) are checked; each one that looks secret must be exempted
        by ``allow_secrets`` for the path to pass. Then the target's device and inode are
        compared with the protected files' (``identities`` when the caller took them once for
        a whole walk, else :meth:`protected_identities`): a hard link is refused like the file.
        """
        lexical = Path(os.path.normpath(written))
        if resolved is None:
            resolved = Path(os.path.realpath(written))
        if resolved in self.protected or lexical in self.protected:
            return "it is Lemon's own secrets file (API keys); tools never read or change it"
        if self.protected:
            same = self._same_file(resolved, identities)
            if same is not None:
                return (
                    f"it is a hard link to Lemon's own secrets file {same} (another name for the "
                    "same file, API keys); tools never read or change it"
                )
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

    def _same_file(
        self, resolved: Path, identities: Mapping[FileIdentity, Path] | None
    ) -> Path | None:
        """The protected file ``resolved`` is another name for, if any."""
        known = self.protected_identities() if identities is None else identities
        if not known:
            return None
        try:
            info = os.stat(resolved)
        except OSError:
            return None  # nothing there (yet): a new file is no link
        return known.get((info.st_dev, info.st_ino))


def _unique(paths: Iterable[Path]) -> list[Path]:
    out: list[Path] = []
    for path in paths:
        if path not in out:
            out.append(path)
    return out
