"""Building the provider for a model's wire protocol."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from lemon_ai.errors import AuthError, LemonAiUsageError
from lemon_ai.models import Api, Model
from lemon_ai.provider import Provider
from lemon_ai.retry import RetryPolicy

if TYPE_CHECKING:  # the HTTP stack is imported by the providers that use it, when built
    import httpx

__all__ = ["api_key_variable", "create_provider", "missing_key", "provider_for"]


def create_provider(
    api: Api,
    *,
    api_key: str | None = None,
    client: httpx.AsyncClient | None = None,
    retry: RetryPolicy | None = None,
) -> Provider:
    """The provider speaking ``api`` (``model.api``); close it with ``aclose()`` when done.

    The HTTP providers (and httpx with them) are imported only when one is built: a run on the
    offline model never loads the HTTP stack."""
    if api == "openai_completions":
        from lemon_ai.providers.openai_completions import OpenAICompletionsProvider

        _warm_sniffio()
        return OpenAICompletionsProvider(api_key=api_key, client=client, retry=retry)
    if api == "anthropic_messages":
        from lemon_ai.providers.anthropic_messages import AnthropicMessagesProvider

        _warm_sniffio()
        return AnthropicMessagesProvider(api_key=api_key, client=client, retry=retry)
    if api == "offline":
        from lemon_ai.providers.offline import OfflineProvider

        return OfflineProvider()
    raise LemonAiUsageError(
        f"unknown wire protocol {api!r}; use openai_completions, anthropic_messages or offline"
    )


def _warm_sniffio() -> None:
    # httpcore imports sniffio on every request to detect the async library; importing it once
    # makes that a dictionary lookup instead of a failing import with a sys.path scan (~0.5 ms).
    import sniffio  # noqa: F401  (imported for the side effect described above)


def api_key_variable(provider: str) -> str:
    """The environment variable holding ``provider``'s API key (``OPENAI_API_KEY``, ...)."""
    return provider.upper().replace("-", "_") + "_API_KEY"


def missing_key(model: Model, variable: str | None = None) -> str:
    """What to say when ``model`` needs a key (``requires_key``) and none is set: the
    variable (``variable``, default ``<PROVIDER>_API_KEY``) and where to set it."""
    name = variable or api_key_variable(model.provider)
    return (
        f"{model.ref} needs an API key and {name} is not set: set it in the environment or in "
        f"$LEMON_HOME/secrets.env (`lemon setup` writes it), or pick another model"
    )


def provider_for(
    model: Model,
    *,
    api_key: str | None = None,
    environ: Mapping[str, str] | None = None,
    client: httpx.AsyncClient | None = None,
    retry: RetryPolicy | None = None,
    key_variable: str | None = None,
) -> Provider:
    """The provider for ``model``: the given ``api_key``, else the variable ``key_variable``
    (default ``<PROVIDER>_API_KEY``) from ``environ`` (default ``os.environ``), else none
    (fine for local servers and offline).

    A model that ``requires_key`` (a hosted API) and has none raises :class:`AuthError`
    naming the variable, before anything connects."""
    variable = key_variable or api_key_variable(model.provider)
    if api_key is None:
        api_key = (os.environ if environ is None else environ).get(variable)
    if model.requires_key and not api_key:
        raise AuthError(missing_key(model, variable), provider=model.provider, retryable=False)
    return create_provider(model.api, api_key=api_key or None, client=client, retry=retry)
