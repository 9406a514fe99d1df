"""Channels: the contract between the platform and every chat channel plugin.

:class:`DeliveryIntent` is the semantic value producers emit; :class:`ChannelPlugin` is what a
channel implements (inbound messages, rendering intents into its own payloads, sending,
editing, answering button presses). The implementation host is lemon_channels; the contract
kit every plugin passes is ``lemon_platform_test.ChannelContract``. :class:`ChannelSupervision`
(:data:`CHANNEL_SUPERVISION`) is how automation delivers a terminal fact to a target.
"""

from __future__ import annotations

from lemon_core.channels._intent import (
    TRANSIENT_KINDS,
    DeliveryIntent,
    DeliveryRoute,
    IntentKind,
)
from lemon_core.channels._plugin import (
    CallbackQuery,
    ChannelPlugin,
    ChannelState,
    ChannelStatus,
    InboundImage,
    InboundMessage,
    InboundSink,
    SendResult,
    session_key_for,
)
from lemon_core.channels._supervision import (
    CHANNEL_SUPERVISION,
    ChannelSupervision,
    SupervisionReceipt,
    SupervisionTarget,
    parse_target,
)

__all__ = [
    "CHANNEL_SUPERVISION",
    "TRANSIENT_KINDS",
    "CallbackQuery",
    "ChannelPlugin",
    "ChannelState",
    "ChannelStatus",
    "ChannelSupervision",
    "DeliveryIntent",
    "DeliveryRoute",
    "InboundImage",
    "InboundMessage",
    "InboundSink",
    "IntentKind",
    "SendResult",
    "SupervisionReceipt",
    "SupervisionTarget",
    "parse_target",
    "session_key_for",
]
