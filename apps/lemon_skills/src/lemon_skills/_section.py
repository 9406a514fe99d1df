"""``[skills]``: where skills are looked up (declared here, named on the app's AppSpec)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from lemon_core.config import Section

__all__ = [
    "DEFAULT_GITHUB_URL",
    "DEFAULT_HERMES_URL",
    "DEFAULT_REGISTRY_URL",
    "DEFAULT_WELL_KNOWN",
    "SkillsSection",
]

DEFAULT_REGISTRY_URL: Final = "https://skills.lemon.agent"
DEFAULT_GITHUB_URL: Final = "https://github.com"
DEFAULT_HERMES_URL: Final = "https://github.com/NousResearch/hermes-agent.git"
DEFAULT_WELL_KNOWN: Final = (
    "https://skills.lemon.agent/.well-known/skills/{name}.json",
    "https://raw.githubusercontent.com/lemon-agent/skills/main/.well-known/{name}.json",
)


class SkillsSection(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[skills]``: the registry index URL, the repository behind ``hermes:`` IDs, the host
    behind ``gh:`` (e.g. a GitHub Enterprise host) and the well-known discovery patterns (URL
    templates with ``{name}``). The ``LEMON_SKILLS_*`` variables override them (README)."""

    registry_url: str = DEFAULT_REGISTRY_URL
    hermes_url: str = DEFAULT_HERMES_URL
    github_url: str = DEFAULT_GITHUB_URL
    well_known: tuple[str, ...] = DEFAULT_WELL_KNOWN


#: The config sections this app owns, by name: what the ``lemon.config`` entry point names (the
#: loader reads it without importing the rest of the app), the same as its ``AppSpec`` declares.
SECTIONS: Final[Mapping[str, type[Section]]] = {"skills": SkillsSection}
