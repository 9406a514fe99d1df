"""The Telegram channel: the Bot API plugin and its Markdown-to-HTML rendering."""

from __future__ import annotations

from lemon_channels.telegram._plugin import (
    CHOICE_LABELS,
    POLL_FAILURES_BEFORE_FAILED,
    WEBHOOK_PATH,
    TelegramPayload,
    TelegramPlugin,
)
from lemon_channels.telegram._render import MAX_MESSAGE_CHARS, markdown_to_html, split_markdown

__all__ = [
    "CHOICE_LABELS",
    "MAX_MESSAGE_CHARS",
    "POLL_FAILURES_BEFORE_FAILED",
    "WEBHOOK_PATH",
    "TelegramPayload",
    "TelegramPlugin",
    "markdown_to_html",
    "split_markdown",
]
