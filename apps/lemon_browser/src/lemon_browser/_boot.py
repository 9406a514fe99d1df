"""lemon_browser's ``lemon.apps`` entry: it boots nothing (no profile), it owns ``[web]``.

The web tools are built by whoever offers them (the coding agent's ``web_fetch`` and
``web_search``); the entry point is here so the loader knows the section
(:class:`~lemon_browser.WebConfig`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Final

from lemon_browser._section import SECTIONS
from lemon_runtime import AppSpec, Runtime

__all__ = ["lemon_browser_app"]


@contextlib.asynccontextmanager
async def _lifespan(runtime: Runtime) -> AsyncIterator[None]:
    yield None


lemon_browser_app: Final = AppSpec(
    name="lemon_browser",
    lifespan=_lifespan,
    description="the web: fetch (SSRF-guarded) and search providers (owns [web]; boots nothing)",
    sections=SECTIONS,
)
