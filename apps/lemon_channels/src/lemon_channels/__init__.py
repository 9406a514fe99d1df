"""Chat channels: plugins (Telegram) on the session port, with bounded coalescers, access
control and a durable outbox. See the README."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lemon_core.facade import lazy_exports

if TYPE_CHECKING:
    from lemon_channels._access import (
        MAX_PAIRING_REQUESTS,
        PAIRING_TTL_MS,
        PairedUser,
        PairingRequest,
        PairingStore,
        PeerSettings,
        PeerStore,
    )
    from lemon_channels._boot import Channels
    from lemon_channels._coalescer import (
        MAX_STATUS_ITEMS,
        TERMINAL_RUNS,
        AnswerCoalescer,
        PumpStatistics,
        SessionPump,
        StatusCoalescer,
        TerminalRuns,
        approval_outcome_text,
    )
    from lemon_channels._host import MAX_RECEIPTS, STATUS_TABLE, ChannelHost
    from lemon_channels._outbox import PREVIEW_CHARS, Outbox, OutboxStatistics
    from lemon_channels._section import ChannelsConfig, ChannelsOptions, TelegramChannelConfig
    from lemon_channels._status import channel_statuses
    from lemon_channels.errors import ChannelsError, ChannelsUsageError

#: Where each facade name lives (the lazy loader reads it; the TYPE_CHECKING imports
#: repeat it for type checkers, ``__all__`` for the architecture gate).
_EXPORTS: Final[dict[str, tuple[str, str]]] = {
    "MAX_PAIRING_REQUESTS": ("lemon_channels._access", "MAX_PAIRING_REQUESTS"),
    "PAIRING_TTL_MS": ("lemon_channels._access", "PAIRING_TTL_MS"),
    "PairedUser": ("lemon_channels._access", "PairedUser"),
    "PairingRequest": ("lemon_channels._access", "PairingRequest"),
    "PairingStore": ("lemon_channels._access", "PairingStore"),
    "PeerSettings": ("lemon_channels._access", "PeerSettings"),
    "PeerStore": ("lemon_channels._access", "PeerStore"),
    "Channels": ("lemon_channels._boot", "Channels"),
    "MAX_STATUS_ITEMS": ("lemon_channels._coalescer", "MAX_STATUS_ITEMS"),
    "TERMINAL_RUNS": ("lemon_channels._coalescer", "TERMINAL_RUNS"),
    "AnswerCoalescer": ("lemon_channels._coalescer", "AnswerCoalescer"),
    "PumpStatistics": ("lemon_channels._coalescer", "PumpStatistics"),
    "SessionPump": ("lemon_channels._coalescer", "SessionPump"),
    "StatusCoalescer": ("lemon_channels._coalescer", "StatusCoalescer"),
    "TerminalRuns": ("lemon_channels._coalescer", "TerminalRuns"),
    "approval_outcome_text": ("lemon_channels._coalescer", "approval_outcome_text"),
    "MAX_RECEIPTS": ("lemon_channels._host", "MAX_RECEIPTS"),
    "STATUS_TABLE": ("lemon_channels._host", "STATUS_TABLE"),
    "ChannelHost": ("lemon_channels._host", "ChannelHost"),
    "PREVIEW_CHARS": ("lemon_channels._outbox", "PREVIEW_CHARS"),
    "Outbox": ("lemon_channels._outbox", "Outbox"),
    "OutboxStatistics": ("lemon_channels._outbox", "OutboxStatistics"),
    "ChannelsConfig": ("lemon_channels._section", "ChannelsConfig"),
    "ChannelsOptions": ("lemon_channels._section", "ChannelsOptions"),
    "TelegramChannelConfig": ("lemon_channels._section", "TelegramChannelConfig"),
    "channel_statuses": ("lemon_channels._status", "channel_statuses"),
    "ChannelsError": ("lemon_channels.errors", "ChannelsError"),
    "ChannelsUsageError": ("lemon_channels.errors", "ChannelsUsageError"),
}

__all__ = [
    "MAX_PAIRING_REQUESTS",
    "MAX_RECEIPTS",
    "MAX_STATUS_ITEMS",
    "PAIRING_TTL_MS",
    "PREVIEW_CHARS",
    "STATUS_TABLE",
    "TERMINAL_RUNS",
    "AnswerCoalescer",
    "ChannelHost",
    "Channels",
    "ChannelsConfig",
    "ChannelsError",
    "ChannelsOptions",
    "ChannelsUsageError",
    "Outbox",
    "OutboxStatistics",
    "PairedUser",
    "PairingRequest",
    "PairingStore",
    "PeerSettings",
    "PeerStore",
    "PumpStatistics",
    "SessionPump",
    "StatusCoalescer",
    "TelegramChannelConfig",
    "TerminalRuns",
    "approval_outcome_text",
    "channel_statuses",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
