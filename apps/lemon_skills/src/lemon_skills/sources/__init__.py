"""Skill sources: the identifier forms (:class:`SourceRouter`) and how each kind is fetched."""

from __future__ import annotations

from lemon_skills.sources.fetch import FetchResult, SourceFetcher
from lemon_skills.sources.router import IDENTIFIER_FORMS, SkillSource, SourceRouter
from lemon_skills.sources.well_known import discover_well_known

__all__ = [
    "IDENTIFIER_FORMS",
    "FetchResult",
    "SkillSource",
    "SourceFetcher",
    "SourceRouter",
    "discover_well_known",
]
