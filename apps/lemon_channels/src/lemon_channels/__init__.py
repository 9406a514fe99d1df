"""Chat channels: plugins (Telegram) on the session port, with bounded coalescers, access
control and a durable outbox. See the README."""

from __future__ import annotations

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
