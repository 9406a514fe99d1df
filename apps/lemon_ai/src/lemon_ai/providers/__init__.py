"""The providers: one module per wire protocol."""

from __future__ import annotations

from lemon_ai.providers.anthropic_messages import AnthropicMessagesProvider
from lemon_ai.providers.offline import OfflineProvider
from lemon_ai.providers.openai_completions import OpenAICompletionsProvider

__all__ = ["AnthropicMessagesProvider", "OfflineProvider", "OpenAICompletionsProvider"]
