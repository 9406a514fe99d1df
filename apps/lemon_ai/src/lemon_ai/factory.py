"""Building the provider for a model's wire protocol."""

from __future__ import annotations

import httpx

from lemon_ai.errors import LemonAiUsageError
from lemon_ai.models import Api
from lemon_ai.provider import Provider
from lemon_ai.providers import (
    AnthropicMessagesProvider,
    OfflineProvider,
    OpenAICompletionsProvider,
)
from lemon_ai.retry import RetryPolicy

__all__ = ["create_provider"]


def create_provider(
    api: Api,
    *,
    api_key: str | None = None,
    client: httpx.AsyncClient | None = None,
    retry: RetryPolicy | None = None,
) -> Provider:
    """The provider speaking ``api`` (``model.api``); close it with ``aclose()`` when done."""
    if api == "openai_completions":
        return OpenAICompletionsProvider(api_key=api_key, client=client, retry=retry)
    if api == "anthropic_messages":
        return AnthropicMessagesProvider(api_key=api_key, client=client, retry=retry)
    if api == "offline":
        return OfflineProvider()
    raise LemonAiUsageError(
        f"unknown wire protocol {api!r}; use openai_completions, anthropic_messages or offline"
    )
