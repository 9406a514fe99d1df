"""LLM providers, streaming, retries, usage and cost.

One streaming event vocabulary (:mod:`lemon_ai.events`) over three providers: OpenAI-compatible
chat completions, Anthropic messages and the offline default. See the README for usage.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lemon_ai.errors import (
    AuthError,
    BadRequestError,
    ContextOverflowError,
    ErrorKind,
    InvalidImageError,
    LemonAiError,
    LemonAiUsageError,
    ProtocolError,
    ProviderConnectionError,
    ProviderError,
    RateLimitError,
    ServerError,
    UnknownModelError,
)
from lemon_ai.events import (
    DoneEvent,
    ErrorEvent,
    StartEvent,
    StreamEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from lemon_ai.factory import api_key_variable, create_provider, missing_key, provider_for
from lemon_ai.images import (
    IMAGE_MIME_TYPES,
    ImageLimits,
    check_images,
    decode_image,
    image_note,
    tool_result_turn,
    user_turn,
)
from lemon_ai.messages import (
    AssistantContent,
    AssistantMessage,
    Context,
    ImageContent,
    Message,
    StopReason,
    TextContent,
    ThinkingContent,
    ThinkingLevel,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from lemon_ai.models import (
    Api,
    Model,
    ModelCatalogue,
    ProviderTemplate,
    default_catalogue,
    offline_model,
)
from lemon_ai.provider import Provider, StreamOptions, complete
from lemon_ai.retry import RetryPolicy, parse_retry_after
from lemon_ai.sse import ServerSentEvent, SSEDecoder, SSEError
from lemon_ai.usage import Cost, Usage

if TYPE_CHECKING:  # the providers load on first use (the offline path never loads httpx)
    from lemon_ai.providers import (
        AnthropicMessagesProvider,
        OfflineProvider,
        OpenAICompletionsProvider,
    )

_LAZY_PROVIDERS = frozenset(
    {"AnthropicMessagesProvider", "OfflineProvider", "OpenAICompletionsProvider"}
)


def __getattr__(name: str) -> Any:
    if name not in _LAZY_PROVIDERS:
        raise AttributeError(f"module 'lemon_ai' has no attribute {name!r}")
    value = getattr(importlib.import_module("lemon_ai.providers"), name)
    globals()[name] = value
    return value


__all__ = [
    "IMAGE_MIME_TYPES",
    "AnthropicMessagesProvider",
    "Api",
    "AssistantContent",
    "AssistantMessage",
    "AuthError",
    "BadRequestError",
    "Context",
    "ContextOverflowError",
    "Cost",
    "DoneEvent",
    "ErrorEvent",
    "ErrorKind",
    "ImageContent",
    "ImageLimits",
    "InvalidImageError",
    "LemonAiError",
    "LemonAiUsageError",
    "Message",
    "Model",
    "ModelCatalogue",
    "OfflineProvider",
    "OpenAICompletionsProvider",
    "ProtocolError",
    "Provider",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTemplate",
    "RateLimitError",
    "RetryPolicy",
    "SSEDecoder",
    "SSEError",
    "ServerError",
    "ServerSentEvent",
    "StartEvent",
    "StopReason",
    "StreamEvent",
    "StreamOptions",
    "TextContent",
    "TextDeltaEvent",
    "ThinkingContent",
    "ThinkingDeltaEvent",
    "ThinkingLevel",
    "ToolCall",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "ToolCallStartEvent",
    "ToolResultMessage",
    "ToolSpec",
    "UnknownModelError",
    "Usage",
    "UserMessage",
    "api_key_variable",
    "check_images",
    "complete",
    "create_provider",
    "decode_image",
    "default_catalogue",
    "image_note",
    "missing_key",
    "offline_model",
    "parse_retry_after",
    "provider_for",
    "tool_result_turn",
    "user_turn",
]
