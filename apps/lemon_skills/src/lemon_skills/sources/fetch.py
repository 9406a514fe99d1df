"""Fetching any :class:`~lemon_skills.sources.router.SkillSource` into a staging directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lemon_skills.bundle import copy_bundle
from lemon_skills.errors import SkillSourceError, SkillsUsageError
from lemon_skills.settings import SkillsSettings
from lemon_skills.sources.git import git_fetch
from lemon_skills.sources.index import read_index
from lemon_skills.sources.router import SkillSource
from lemon_skills.taxonomy import SourceKind

__all__ = ["FetchResult", "SourceFetcher"]


@dataclass(frozen=True, kw_only=True, slots=True)
class FetchResult:
    """What a fetch resolved: the commit (git-backed kinds) and the clone URL used."""

    resolved_ref: str | None = None
    clone_url: str | None = None


class SourceFetcher:
    """Copies a source's bundle into a new directory (nothing of it runs)."""

    def __init__(self, settings: SkillsSettings) -> None:
        self.settings = settings

    def fetch(self, source: SkillSource, dest: Path) -> FetchResult:
        """Fetch ``source`` into ``dest`` (which must not exist; its parent must)."""
        s = self.settings
        limits = s.audit.bundle
        if source.kind is SourceKind.BUILTIN:
            if not source.location:
                raise SkillsUsageError("name one builtin skill: builtin:<name>")
            path = s.builtin_dir / source.location
            if not (path / "SKILL.md").is_file():
                raise SkillsUsageError(f"no builtin skill named {source.location!r}")
            copy_bundle(path, dest, limits)
            return FetchResult()
        if source.kind is SourceKind.LOCAL:
            path = Path(source.location)
            if not path.is_dir():
                raise SkillSourceError(f"{path} is not a directory")
            copy_bundle(path, dest, limits)
            return FetchResult()
        if source.kind is SourceKind.GIT:
            commit = git_fetch(
                source.location, dest, subdir=source.subdir, timeout=s.git_timeout_s, limits=limits
            )
            return FetchResult(resolved_ref=commit, clone_url=source.location)
        if source.kind is SourceKind.REGISTRY:
            url = f"{s.registry_url.rstrip('/')}/skills/{source.location}"
        else:
            url = source.location
        entry = read_index(url, timeout=s.http_timeout_s, max_bytes=s.max_index_bytes)
        if entry is None:
            raise SkillSourceError(f"{url}: no such skill in the index (HTTP 404)")
        commit = git_fetch(
            entry.clone_url,
            dest,
            ref=entry.ref,
            subdir=entry.subdir,
            timeout=s.git_timeout_s,
            limits=limits,
        )
        return FetchResult(resolved_ref=commit, clone_url=entry.clone_url)
