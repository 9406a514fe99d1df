"""lemon_skills' ``lemon.apps`` entry: it boots nothing (no profile), it owns ``[skills]``.

Skills are read by whoever needs them (the coding agent's skill tool, ``lemon skills``); the
entry point is here so the loader knows the section (:class:`SkillsSection`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Final

from lemon_runtime import AppSpec, Runtime
from lemon_skills._section import SECTIONS

__all__ = ["lemon_skills_app"]


@contextlib.asynccontextmanager
async def _lifespan(runtime: Runtime) -> AsyncIterator[None]:
    yield None


lemon_skills_app: Final = AppSpec(
    name="lemon_skills",
    lifespan=_lifespan,
    description="skills: sources, audit, installs (owns [skills]; boots nothing)",
    sections=SECTIONS,
)
