"""``[openai_api]``: the OpenAI-compatible ``/v1`` API's config section (this app's README
documents each key)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Final

import msgspec

from lemon_core.config import Section

__all__ = ["SECTIONS", "OpenAIApiConfig"]


class OpenAIApiConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[openai_api]``: off by default; when on, ``/v1`` is mounted on the daemon's server
    behind the control plane's tokens."""

    enabled: bool = False
    agent_id: str = "default"
    max_body_bytes: Annotated[int, msgspec.Meta(ge=1024, le=64 * 1024 * 1024)] = 4 * 1024 * 1024
    """A request body larger than this is a 413 (images come as data URLs: keep room)."""
    body_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=600)] = 30.0
    run_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 900.0
    """A run that has not ended by then is cancelled and answered as a 500 ``timeout``."""
    cors_origins: tuple[str, ...] = ()
    """Browser origins (``https://host[:port]``) allowed to call ``/v1`` cross-origin; empty:
    CORS off (only the daemon's own origin and non-browser clients)."""
    preapprove: tuple[str, ...] = ()
    """Tools (or ``"*"``) whose approval a run of a token with the ``approvals`` scope skips;
    every other approval is denied (an HTTP client cannot answer one)."""


#: The config sections this app owns, by name (the ``lemon.config`` entry point names it).
SECTIONS: Final[Mapping[str, type[Section]]] = {"openai_api": OpenAIApiConfig}
