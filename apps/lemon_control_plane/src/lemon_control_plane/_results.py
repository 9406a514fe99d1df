"""The structured results of Lemon's dialect, one msgspec struct each (camelCase on the wire,
every field written, ``null`` included, as the terminal client reads them). The ``port.*``
methods answer with the port's own records (:mod:`lemon_core.sessions`)."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = [
    "ApprovalResolved",
    "ChatSent",
    "DetailSummary",
    "Health",
    "PatchSummary",
    "SentSummary",
    "SessionDetail",
    "SessionPatched",
    "SettingsView",
]


class _Result(msgspec.Struct, rename="camel", kw_only=True):
    pass


class Health(msgspec.Struct, kw_only=True):
    """``health`` (snake_case: the reference's own spelling)."""

    ok: bool
    uptime_ms: int


class SentSummary(_Result):
    run_id: str
    session_key: str
    agent_id: str
    queue_mode: str
    prompt_bytes: int


class ChatSent(_Result):
    """``chat.send``: the run that carries the prompt."""

    run_id: str
    session_key: str
    summary: SentSummary


class SettingsView(_Result):
    model: str | None
    thinking_level: str | None
    label: str | None
    workspace: str | None
    updated_at_ms: int


class PatchSummary(_Result):
    patched_keys: list[str]


class SessionPatched(_Result):
    """``sessions.patch``."""

    success: bool
    session_key: str
    session: SettingsView
    summary: PatchSummary


class ApprovalResolved(_Result):
    """``exec.approval.resolve``."""

    resolved: bool
    approval_id: str
    decision: str


class DetailSummary(_Result):
    run_count: int
    active: bool


class SessionDetail(_Result):
    """``session.detail``: the session block (its settings and its row: ``agentId``,
    ``runCount``, ``active``, ``createdAtMs``, ``updatedAtMs``, ``origin``, the model with its
    ``contextWindow`` / ``maxOutput``), its recent runs (newest first, ``runs.recent.list``'s
    rows) and ``runCount``."""

    session_key: str
    session: dict[str, Any]
    runs: list[dict[str, Any]]
    run_count: int
    summary: DetailSummary
