"""Turning a ``provider:model`` reference and the config into a lemon_ai model and provider."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from lemon_ai import Model, Provider, create_provider, default_catalogue, offline_model
from lemon_core.config import Config, read_secrets

__all__ = ["OFFLINE_REF", "api_key_for", "model_ref", "resolve_model"]

#: The model used when nothing is configured.
OFFLINE_REF: Final = "offline:offline"
_ANTHROPIC_URL: Final = "https://api.anthropic.com"


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


def resolve_model(
    config: Config, ref: str, home: Path, environ: Mapping[str, str] | None = None
) -> tuple[Model, Provider]:
    """The model and a new provider for ``ref`` (the caller closes the provider).

    A provider named in ``[providers.<name>]`` wins; otherwise the built-in catalogue
    (``offline``, ``openai``, ``anthropic``, ``ollama``...) resolves it. Raises lemon_ai's
    ``UnknownModelError`` with what is wrong.
    """
    name, _, model_id = ref.partition(":")
    settings = config.providers.get(name)
    if settings is not None and model_id:
        base_url = settings.base_url or (
            _ANTHROPIC_URL if settings.kind == "anthropic_messages" else ""
        )
        model = Model(provider=name, id=model_id, api=settings.kind, base_url=base_url)
        key = api_key_for(settings.api_key_env, home, environ)
        return model, create_provider(model.api, api_key=key)
    if name == "offline":
        model = offline_model()
        return model, create_provider("offline")
    model = default_catalogue().resolve(ref)
    variable = name.upper().replace("-", "_") + "_API_KEY"
    return model, create_provider(model.api, api_key=api_key_for(variable, home, environ))
