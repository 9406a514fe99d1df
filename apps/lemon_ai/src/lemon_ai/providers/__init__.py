"""The providers: one module per wire protocol (each imported on first use, so the offline
provider never loads the HTTP stack)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lemon_ai.providers.anthropic_messages import AnthropicMessagesProvider
    from lemon_ai.providers.offline import OfflineProvider
    from lemon_ai.providers.openai_completions import OpenAICompletionsProvider

__all__ = ["AnthropicMessagesProvider", "OfflineProvider", "OpenAICompletionsProvider"]

_LAZY: dict[str, str] = {
    "AnthropicMessagesProvider": "lemon_ai.providers.anthropic_messages",
    "OfflineProvider": "lemon_ai.providers.offline",
    "OpenAICompletionsProvider": "lemon_ai.providers.openai_completions",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lemon_ai.providers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
