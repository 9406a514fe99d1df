"""The channel plugin contract: what every channel (Telegram, and the ones after it) does.

A plugin owns its platform's wire: it turns the platform's updates into
:class:`InboundMessage` records (handed to the :class:`InboundSink` the host gives it at
start), renders a :class:`~lemon_core.channels.DeliveryIntent` into platform payloads, and
sends, edits and answers callbacks on the platform. It never talks to the router or the
gateway: the host (lemon_channels) turns inbound messages into ``RunRequest``\\ s for the
session port and admits outbound payloads durably before the plugin sends them.

Payloads are the plugin's own type; :meth:`ChannelPlugin.encode_payload` /
:meth:`ChannelPlugin.decode_payload` give their JSON form so the host can store them.
Sending reports failures as data (:class:`SendResult`), never by raising, so a rate limit's
``retry_after`` and a permanent refusal reach the host's retry policy unchanged.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

import msgspec

from lemon_core.channels._intent import DeliveryIntent, DeliveryRoute
from lemon_core.sessions import SessionKey

__all__ = [
    "CallbackQuery",
    "ChannelPlugin",
    "ChannelState",
    "ChannelStatus",
    "InboundImage",
    "InboundMessage",
    "InboundSink",
    "SendResult",
    "session_key_for",
]

P = TypeVar("P")


class InboundImage(msgspec.Struct, frozen=True, kw_only=True):
    """An image a person sent (base64 data, as the model's image input takes it)."""

    data: str
    mime_type: str = "image/jpeg"


class CallbackQuery(msgspec.Struct, frozen=True, kw_only=True):
    """A press on one of the buttons a plugin rendered."""

    callback_id: str
    data: str
    message_id: str | None = None


class InboundMessage(msgspec.Struct, frozen=True, kw_only=True):
    """One update from a person: a text (or command), images, or a button press."""

    route: DeliveryRoute
    user_id: str
    """The platform's id of the person (what access control checks)."""
    text: str = ""
    images: tuple[InboundImage, ...] = ()
    message_id: str | None = None
    user_name: str | None = None
    callback: CallbackQuery | None = None


InboundSink = Callable[[InboundMessage], Awaitable[None]]


class ChannelState(enum.StrEnum):
    """A plugin's lifecycle."""

    STOPPED = "stopped"
    STARTING = "starting"
    RUNNING = "running"
    FAILED = "failed"


class ChannelStatus(msgspec.Struct, frozen=True, kw_only=True):
    """What ``lemon channels status`` and ``lemon doctor`` show for one channel."""

    channel_id: str
    state: ChannelState
    account_id: str | None = None
    mode: str | None = None
    detail: str = ""
    """A plain sentence: what runs, or what is wrong and how to fix it."""


class SendResult(msgspec.Struct, frozen=True, kw_only=True):
    """The platform's answer to one send or edit. ``ok`` with the ``message_id`` it made
    (or edited); else ``error`` (bounded text), ``retry_after`` seconds when the platform said
    when to come back, and ``permanent`` when retrying cannot help."""

    ok: bool
    message_id: str | None = None
    error: str | None = None
    retry_after: float | None = None
    permanent: bool = False


def session_key_for(inbound: InboundMessage, *, agent_id: str, sub_id: str | None = None) -> str:
    """The stable session key of the peer (and thread) an inbound message came from:
    ``agent:<agent>:<channel>:<account>:<peer kind>:<peer id>[:thread:<thread>][:sub:<n>]``."""
    route = inbound.route
    return SessionKey.channel(
        agent_id,
        channel_id=route.channel_id,
        account_id=route.account_id,
        peer_kind=route.peer_kind,
        peer_id=route.peer_id,
        thread_id=route.thread_id,
        sub_id=sub_id,
    ).format()


@runtime_checkable
class ChannelPlugin(Protocol[P]):
    """See the module docstring. ``max_text_chars`` is the platform's limit of one message."""

    channel_id: str
    max_text_chars: int

    async def start(self, sink: InboundSink) -> ChannelStatus:
        """Connect to the platform and start handing inbound messages to ``sink``. A refused
        credential is a ``FAILED`` status with a sentence saying how to fix it, not a raise."""
        ...

    async def stop(self) -> None:
        """Stop receiving and release the connection. Idempotent."""
        ...

    def status(self) -> ChannelStatus: ...

    def render(self, intent: DeliveryIntent) -> Sequence[P]:
        """The platform payloads showing ``intent`` (several when the text is longer than
        one message may be), in order."""
        ...

    async def deliver(self, payload: P) -> SendResult:
        """Send a new message."""
        ...

    async def edit(self, message_id: str, payload: P) -> SendResult:
        """Replace message ``message_id`` with ``payload`` (an unchanged text is ``ok``)."""
        ...

    async def answer_callback(self, callback_id: str, text: str) -> SendResult:
        """Acknowledge a button press with a short text."""
        ...

    def encode_payload(self, payload: P) -> dict[str, Any]:
        """The payload's JSON form (what the outbox stores)."""
        ...

    def decode_payload(self, data: dict[str, Any]) -> P:
        """The payload back from :meth:`encode_payload`'s form."""
        ...
