"""Where skills live and where sources are looked up.

Layout under ``$LEMON_HOME/skills/``: ``installed/<name>/`` (one directory per installed skill),
``skills.lock`` (the lockfile), ``.staging/`` (temporary; emptied by every operation).

The registry index URL, the repository behind ``hermes:`` IDs, the host behind ``gh:`` and the
well-known discovery patterns come from the ``[skills]`` section (:class:`SkillsSection`:
``registry_url``, ``hermes_url``, ``github_url``, ``well_known``); the variables
``LEMON_SKILLS_REGISTRY_URL``, ``LEMON_SKILLS_HERMES_URL``, ``LEMON_SKILLS_GITHUB_URL`` and
``LEMON_SKILLS_WELL_KNOWN`` (space-separated templates) override it for one process.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lemon_core.config import lemon_home
from lemon_core.home import Home
from lemon_skills._section import (
    DEFAULT_GITHUB_URL,
    DEFAULT_HERMES_URL,
    DEFAULT_REGISTRY_URL,
    DEFAULT_WELL_KNOWN,
    SkillsSection,
)
from lemon_skills.audit import AuditLimits

__all__ = [
    "DEFAULT_GITHUB_URL",
    "DEFAULT_HERMES_URL",
    "DEFAULT_REGISTRY_URL",
    "DEFAULT_WELL_KNOWN",
    "SkillsSettings",
]


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
    def from_config(
        cls,
        section: SkillsSection | None = None,
        *,
        home: Path | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> SkillsSettings:
        """Settings for ``home`` (default ``$LEMON_HOME``) from the ``[skills]`` section, each
        key overridden by its ``LEMON_SKILLS_*`` variable when that is set."""
        env = os.environ if environ is None else environ
        config = section if section is not None else SkillsSection()
        well_known = tuple(env.get("LEMON_SKILLS_WELL_KNOWN", "").split()) or config.well_known
        return cls(
            home=home if home is not None else lemon_home(env),
            registry_url=env.get("LEMON_SKILLS_REGISTRY_URL") or config.registry_url,
            hermes_url=env.get("LEMON_SKILLS_HERMES_URL") or config.hermes_url,
            github_url=env.get("LEMON_SKILLS_GITHUB_URL") or config.github_url,
            well_known=well_known,
        )

    @classmethod
    def from_env(
        cls, home: Path | None = None, environ: Mapping[str, str] | None = None
    ) -> SkillsSettings:
        """Settings for ``home`` from the environment alone (the section's defaults)."""
        return cls.from_config(None, home=home, environ=environ)

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
