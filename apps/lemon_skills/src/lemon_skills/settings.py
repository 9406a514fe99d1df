"""Where skills live and where sources are looked up.

Layout under ``$LEMON_HOME/skills/``: ``installed/<name>/`` (one directory per installed skill),
``skills.lock`` (the lockfile), ``.staging/`` (temporary; emptied by every operation).

The registry index URL comes from ``LEMON_SKILLS_REGISTRY_URL`` (default
``https://skills.lemon.agent``); the repository behind ``hermes:`` IDs from
``LEMON_SKILLS_HERMES_URL``; the host behind ``gh:`` from ``LEMON_SKILLS_GITHUB_URL`` (default
``https://github.com``, e.g. a GitHub Enterprise host); the well-known discovery patterns from
``LEMON_SKILLS_WELL_KNOWN`` (space-separated URL templates with ``{name}``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from lemon_core.config import lemon_home
from lemon_core.home import Home
from lemon_skills.audit import AuditLimits

__all__ = [
    "DEFAULT_GITHUB_URL",
    "DEFAULT_HERMES_URL",
    "DEFAULT_REGISTRY_URL",
    "DEFAULT_WELL_KNOWN",
    "SkillsSettings",
]

DEFAULT_REGISTRY_URL: Final = "https://skills.lemon.agent"
DEFAULT_GITHUB_URL: Final = "https://github.com"
DEFAULT_HERMES_URL: Final = "https://github.com/NousResearch/hermes-agent.git"
DEFAULT_WELL_KNOWN: Final = (
    "https://skills.lemon.agent/.well-known/skills/{name}.json",
    "https://raw.githubusercontent.com/lemon-agent/skills/main/.well-known/{name}.json",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class SkillsSettings:
    """The skills home and the source configuration."""

    home: Path
    """``$LEMON_HOME``."""
    registry_url: str = DEFAULT_REGISTRY_URL
    hermes_url: str = DEFAULT_HERMES_URL
    github_url: str = DEFAULT_GITHUB_URL
    """Where ``gh:<owner>/<repo>`` is cloned from (``<github_url>/<owner>/<repo>.git``)."""
    hermes_subdir: str = "skills"
    """The directory of the hermes repository that holds ``<collection>/<path>``."""
    well_known: tuple[str, ...] = DEFAULT_WELL_KNOWN
    git_timeout_s: float = 120.0
    http_timeout_s: float = 15.0
    max_index_bytes: int = 64 * 1024
    audit: AuditLimits = field(default_factory=AuditLimits)
    builtin_dir: Path = field(default_factory=lambda: Path(__file__).parent / "builtin")

    @classmethod
    def from_env(
        cls, home: Path | None = None, environ: Mapping[str, str] | None = None
    ) -> SkillsSettings:
        """Settings for ``home`` (default ``$LEMON_HOME``) from the environment."""
        env = os.environ if environ is None else environ
        well_known = tuple(env.get("LEMON_SKILLS_WELL_KNOWN", "").split()) or DEFAULT_WELL_KNOWN
        return cls(
            home=home if home is not None else lemon_home(env),
            registry_url=env.get("LEMON_SKILLS_REGISTRY_URL") or DEFAULT_REGISTRY_URL,
            hermes_url=env.get("LEMON_SKILLS_HERMES_URL") or DEFAULT_HERMES_URL,
            github_url=env.get("LEMON_SKILLS_GITHUB_URL") or DEFAULT_GITHUB_URL,
            well_known=well_known,
        )

    @property
    def skills_dir(self) -> Path:
        return Home(root=self.home).skills

    @property
    def installed_dir(self) -> Path:
        return self.skills_dir / "installed"

    @property
    def lockfile(self) -> Path:
        return self.skills_dir / "skills.lock"

    @property
    def staging_dir(self) -> Path:
        return self.skills_dir / ".staging"
