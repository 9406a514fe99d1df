"""The model reference a chat uses and where its key is found (the resolution itself is
coding_agent's ``resolve_model``, the one a run uses)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from lemon_core.config import Config, read_secrets

__all__ = ["OFFLINE_REF", "api_key_for", "model_problem", "model_ref", "used_model_note"]

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


def model_problem(config: Config, ref: str, home: Path) -> tuple[str, str] | None:
    """Why a chat on ``ref`` cannot start, said before anything connects: ``(error code,
    sentence)`` for an unknown provider or model (``model_unavailable``, naming the built-in
    and configured providers) or a hosted model whose key variable is not set
    (``provider_auth``), else ``None``. The check is the run's own (``check_model``)."""
    from coding_agent import check_model
    from lemon_ai import AuthError, LemonAiError

    environ = {**read_secrets(home), **os.environ}
    try:
        check_model(config, ref, environ=environ)
    except AuthError as exc:
        return "provider_auth", str(exc)
    except LemonAiError as exc:
        return "model_unavailable", str(exc)
    return None


def used_model_note(used: str | None, config: Config, override: str | None) -> str | None:
    """The stderr line of a one-shot chat whose run used another model than the config
    default (the session's model, picked in the TUI, or ``--model``), else ``None``."""
    default = model_ref(config)
    if not used or used == default:
        return None
    why = (
        "--model"
        if override == used
        else "this session's model (picked in the TUI; /model default there resets it)"
    )
    return f"lemon chat: model {used}: {why}, not the config default {default}"
