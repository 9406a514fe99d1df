"""lemon_automation's ``lemon.apps`` hook: declares the ``[automation]`` section.

Not yet a scheduler: the app is in no profile (it starts nowhere), and a runtime that names it
explicitly gets a handle saying whether ``[automation] enabled`` is set and that the scheduler
is not built yet (an ``enabled = true`` config is refused with that message rather than
silently scheduling nothing).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Final

from lemon_automation._section import SECTIONS, AutomationConfig
from lemon_runtime import AppSpec, Runtime

__all__ = ["AutomationApp", "lemon_automation_app"]


class AutomationNotBuiltError(RuntimeError):
    """``[automation] enabled = true`` on a build without the scheduler."""


@dataclass(frozen=True, slots=True)
class AutomationApp:
    """The handle: the section as loaded."""

    config: AutomationConfig


@contextlib.asynccontextmanager
async def _lifespan(runtime: Runtime) -> AsyncIterator[AutomationApp]:
    config = runtime.section(AutomationConfig)
    if config.enabled:
        raise AutomationNotBuiltError(
            "[automation] enabled = true, but this build has no scheduler yet: set "
            "enabled = false (nothing is scheduled; no job is lost)"
        )
    yield AutomationApp(config)


lemon_automation_app: Final = AppSpec(
    name="lemon_automation",
    lifespan=_lifespan,
    profiles=frozenset(),
    description="cron jobs and heartbeats (not yet scheduling: no profile starts it)",
    sections=SECTIONS,
)
