"""Discovery by probing well-known URL patterns (the ``well_known`` source kind).

Each pattern (``SkillsSettings.well_known``, URL templates with ``{name}``) is formatted with
the skill name and read as an index document (:mod:`lemon_skills.sources.index`); every hit is
a ``well_known`` source with trust ``community``, whatever host answered. There is no
identifier form for it: an install of a discovered skill records the probed URL.
"""

from __future__ import annotations

from lemon_skills.errors import SkillSourceError, SkillsUsageError
from lemon_skills.manifest import valid_skill_name
from lemon_skills.settings import SkillsSettings
from lemon_skills.sources.index import read_index
from lemon_skills.sources.router import SkillSource
from lemon_skills.taxonomy import SourceKind
from lemon_skills.trust import trust_for

__all__ = ["discover_well_known"]


def discover_well_known(name: str, settings: SkillsSettings) -> list[SkillSource]:
    """The well-known sources that answer for ``name`` (unreachable patterns are skipped)."""
    if not valid_skill_name(name):
        raise SkillsUsageError(f"{name!r} is not a skill name (lowercase letters, digits, '-')")
    found: list[SkillSource] = []
    for pattern in settings.well_known:
        url = pattern.replace("{name}", name)
        try:
            entry = read_index(
                url, timeout=settings.http_timeout_s, max_bytes=settings.max_index_bytes
            )
        except (SkillSourceError, SkillsUsageError):
            continue
        if entry is not None:
            found.append(
                SkillSource(
                    kind=SourceKind.WELL_KNOWN,
                    identifier=url,
                    location=url,
                    trust=trust_for(SourceKind.WELL_KNOWN),
                )
            )
    return found
