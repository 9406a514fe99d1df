"""The model reference a chat uses and where its key is found (the resolution itself is
coding_agent's ``resolve_model``, the one a run uses)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from lemon_core.config import Config, read_secrets

__all__ = ["OFFLINE_REF", "api_key_for", "model_ref"]

#: The model used when nothing is configured.
OFFLINE_REF: Final = "offline:offline"


def model_ref(config: Config, override: str | None = None) -> str:
    """The model reference to use: ``override``, else ``[defaults] model``, else offline."""
    return override or config.defaults.model or OFFLINE_REF


def api_key_for(
    variable: str | None, home: Path, environ: Mapping[str, str] | None = None
) -> str | None:
    """The key held by ``variable``: the environment first, then the secrets file."""
    if not variable:
        return None
    env = os.environ if environ is None else environ
    return env.get(variable) or read_secrets(home).get(variable) or None
