"""Delivery intents: the semantic, platform-free description of something to show a person.

Whoever decides *what* to say (the channel's coalescers, later the router or automation)
builds a :class:`DeliveryIntent`; only the channel that owns the route turns it into platform
payloads (rendering, splitting, buttons). No consumer constructs platform payloads.
"""

from __future__ import annotations

import enum
from typing import Any

import msgspec

from lemon_core.sessions import PeerKind

__all__ = ["DeliveryIntent", "DeliveryRoute", "IntentKind"]


class IntentKind(enum.StrEnum):
    """What an intent is, which decides how a channel renders and replaces it."""

    STREAM_SNAPSHOT = "stream_snapshot"
    """The answer so far (transient: replaced by the next snapshot, fenced by the final)."""
    FINAL_TEXT = "final_text"
    """The run's canonical final answer (from its completion, never a concatenation)."""
    TOOL_STATUS = "tool_status"
    """A compact line of the run's tool calls (transient until finalised)."""
    APPROVAL_PROMPT = "approval_prompt"
    """A tool call waits for a decision: show the choices."""
    APPROVAL_RESOLVED = "approval_resolved"
    """An approval ended: replace its prompt with the outcome."""
    NOTICE = "notice"
    """A plain message to the peer (a command's answer, a pairing code)."""


#: Kinds that are transient: a later intent on the same slot supersedes a pending one.
TRANSIENT_KINDS: frozenset[IntentKind] = frozenset(
    {IntentKind.STREAM_SNAPSHOT, IntentKind.TOOL_STATUS}
)


class DeliveryRoute(msgspec.Struct, frozen=True, kw_only=True):
    """Where an intent goes: one peer (optionally one thread) on one account of a channel."""

    channel_id: str
    account_id: str
    peer_kind: PeerKind
    peer_id: str
    thread_id: str | None = None


class DeliveryIntent(msgspec.Struct, frozen=True, kw_only=True):
    """One thing to show. ``slot`` names the message it lives in: intents with the same slot
    edit that message (a stream snapshot, then the final answer; a prompt, then its outcome).

    ``text`` is Markdown-ish plain text; ``approval_id`` and ``choices`` come with
    ``approval_prompt``; ``meta`` is opaque context no renderer relies on.
    """

    intent_id: str
    kind: IntentKind
    route: DeliveryRoute
    slot: str
    text: str
    run_id: str | None = None
    session_key: str | None = None
    approval_id: str | None = None
    choices: tuple[str, ...] = ()
    meta: dict[str, Any] = msgspec.field(default_factory=dict)
