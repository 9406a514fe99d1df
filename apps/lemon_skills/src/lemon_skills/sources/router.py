"""From a user-facing identifier to a :class:`SkillSource` (the seed's "Source Kinds" table).

The input is trimmed; the first matching form wins:

====================================  ===========  ==========  =================================
form                                  kind         trust       where it is fetched from
====================================  ===========  ==========  =================================
``builtin`` / ``builtin:<name>``      builtin      builtin     the skills shipped with Lemon
``git+<url>``                         git          community   ``<url>`` (any git URL form)
``gh:<owner>/<repo>``                 git          community   ``<github_url>/<o>/<r>.git``
``hermes:<collection>/<path>``        git          official    the hermes repository, a subdir
``git@host:path``, ``ssh://...``      git          community   over SSH
``https://...``, ``file://...``       git          community   (``http://`` only to loopback)
``/abs``, ``./rel``, ``../rel``, ``~`` local       trusted     a directory (outside the install)
``<ns>/<group>/<name>[/...]``         registry     official    when ``<ns>`` is ``official``,
                                                   community   else; looked up in the index
====================================  ===========  ==========  =================================

``well_known`` sources have no identifier form: they come from discovery
(:func:`~lemon_skills.sources.well_known.discover_well_known`) and are community.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from lemon_skills.errors import SkillsUsageError
from lemon_skills.settings import SkillsSettings
from lemon_skills.taxonomy import SourceKind, TrustLevel
from lemon_skills.trust import trust_for

__all__ = ["IDENTIFIER_FORMS", "SkillSource", "SourceRouter", "check_git_url", "check_index_url"]

IDENTIFIER_FORMS: Final = (
    ("builtin", "the skills shipped with Lemon (builtin:<name> for one)"),
    ("/path/to/skill, ./skill, ~/skill", "a local directory"),
    (
        "https://host/owner/repo.git",
        "a git repository (also git+<url>, git@host:path, ssh://, file://)",
    ),
    ("gh:<owner>/<repo>", "a GitHub repository"),
    ("hermes:<collection>/<path>", "an official Hermes skill"),
    ("<namespace>/<group>/<name>", "a registry entry, e.g. official/devops/k8s-rollout"),
)

_SEGMENT: Final = re.compile(r"[A-Za-z0-9_-]+")
_REGISTRY: Final = re.compile(r"[A-Za-z0-9_-]+(?:/[A-Za-z0-9_-]+){2,}")
_GH_OWNER: Final = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")
_GH_REPO: Final = re.compile(r"[A-Za-z0-9._-]{1,100}")
_HERMES_PART: Final = re.compile(r"[A-Za-z0-9_.-]+")
_SCP: Final = re.compile(r"[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s]+")
_LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True, kw_only=True, slots=True)
class SkillSource:
    """Where a skill comes from, as the router (or discovery) resolved it."""

    kind: SourceKind
    identifier: str
    """What the user wrote (trimmed); for ``well_known``, the probed URL."""
    location: str
    """The directory, clone URL, registry ref, or index document URL."""
    trust: TrustLevel
    subdir: str | None = None
    """A directory inside the git repository holding the skill (``hermes:``)."""


def _forms(identifier: str) -> str:
    lines = [f"cannot resolve the skill source {identifier!r}; use one of:"]
    lines += [f"  {form:<36} {what}" for form, what in IDENTIFIER_FORMS]
    return "\n".join(lines)


def check_git_url(url: str) -> str:
    """``url`` if it is a git URL Lemon clones (https, ssh, scp-like, file; http only to
    loopback), else :class:`SkillsUsageError`."""
    if _SCP.fullmatch(url) and "://" not in url:
        return url
    parts = urlsplit(url)
    if parts.scheme in ("https", "ssh") and parts.netloc:
        return url
    if parts.scheme == "file" and parts.path:
        return url
    if parts.scheme == "http" and parts.hostname in _LOOPBACK:
        return url
    if parts.scheme in ("http", "git"):
        raise SkillsUsageError(
            f"{url!r}: {parts.scheme}:// is not authenticated; use https:// or ssh://"
        )
    raise SkillsUsageError(f"{url!r} is not a git URL Lemon clones (https, ssh, file)")


def check_index_url(url: str) -> str:
    """``url`` if a registry or well-known index may be read from it (https; http only to
    loopback), else :class:`SkillsUsageError`."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.netloc:
        return url
    if parts.scheme == "http" and parts.hostname in _LOOPBACK:
        return url
    raise SkillsUsageError(f"{url!r}: a skill index is read over https:// only")


class SourceRouter:
    """Maps identifiers to sources (see the module docstring for the forms)."""

    def __init__(self, settings: SkillsSettings, *, cwd: Path | None = None) -> None:
        self.settings = settings
        self._cwd = cwd

    def route(self, identifier: str) -> SkillSource:
        """The source ``identifier`` names; :class:`SkillsUsageError` listing the forms for
        one that matches none."""
        ident = identifier.strip()
        if not ident:
            raise SkillsUsageError(_forms(identifier))
        if ident == "builtin" or ident.startswith("builtin:"):
            return self._builtin(ident)
        if ident.startswith("git+"):
            return self._git(ident, check_git_url(ident[4:]))
        if ident.startswith("gh:"):
            return self._github(ident)
        if ident.startswith("hermes:"):
            return self._hermes(ident)
        if ident.startswith(("git@", "ssh://", "https://", "http://", "file://", "git://")):
            return self._git(ident, check_git_url(ident))
        if ident.startswith(("/", "./", "../", "~")) or ident in (".", ".."):
            return self._local(ident)
        if _REGISTRY.fullmatch(ident):
            official = ident.split("/", 1)[0].lower() == "official"
            return SkillSource(
                kind=SourceKind.REGISTRY,
                identifier=ident,
                location=ident,
                trust=trust_for(SourceKind.REGISTRY, official=official),
            )
        raise SkillsUsageError(_forms(ident))

    def _builtin(self, ident: str) -> SkillSource:
        name = ident.partition(":")[2]
        if ":" in ident and not _SEGMENT.fullmatch(name):
            raise SkillsUsageError(f"{ident!r}: write builtin:<name>, e.g. builtin:skill-creator")
        return SkillSource(
            kind=SourceKind.BUILTIN, identifier=ident, location=name, trust=TrustLevel.BUILTIN
        )

    def _git(self, ident: str, url: str, *, official: bool = False,
             subdir: str | None = None) -> SkillSource:  # fmt: skip
        return SkillSource(
            kind=SourceKind.GIT,
            identifier=ident,
            location=url,
            trust=trust_for(SourceKind.GIT, official=official),
            subdir=subdir,
        )

    def _github(self, ident: str) -> SkillSource:
        owner, _, repo = ident[3:].partition("/")
        repo = repo.removesuffix(".git")
        if not (_GH_OWNER.fullmatch(owner) and _GH_REPO.fullmatch(repo)) or repo in (".", ".."):
            raise SkillsUsageError(f"{ident!r}: write gh:<owner>/<repo>, e.g. gh:acme/k8s-skill")
        base = self.settings.github_url.rstrip("/")
        return self._git(ident, check_git_url(f"{base}/{owner}/{repo}.git"))

    def _hermes(self, ident: str) -> SkillSource:
        parts = ident[len("hermes:") :].split("/")
        if len(parts) < 2 or any(not _HERMES_PART.fullmatch(p) or p in (".", "..") for p in parts):
            raise SkillsUsageError(
                f"{ident!r}: write hermes:<collection>/<path>, e.g. hermes:devops/docker"
            )
        subdir = "/".join([self.settings.hermes_subdir.strip("/"), *parts]).strip("/")
        url = check_git_url(self.settings.hermes_url)
        return self._git(ident, url, official=True, subdir=subdir)

    def _local(self, ident: str) -> SkillSource:
        base = self._cwd or Path.cwd()
        try:
            path = (base / Path(ident).expanduser()).resolve()
        except RuntimeError:  # ~user with no such user, or no home directory
            raise SkillsUsageError(
                f"{ident!r}: cannot expand '~' here (no such user or no home directory); "
                "give the full path"
            ) from None
        install = self.settings.skills_dir.resolve()
        if path == install or install in path.parents:
            raise SkillsUsageError(
                f"{path} is inside Lemon's skills directory; a local source is a directory "
                "of your own outside it"
            )
        return SkillSource(
            kind=SourceKind.LOCAL, identifier=ident, location=str(path), trust=TrustLevel.TRUSTED
        )
