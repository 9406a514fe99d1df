"""Wire codecs: the port's typed records as the terminal client's JSON, field by field.

Nothing here dumps a struct: every wire key is written out, so a field added to a port record
does not leak onto the wire by accident.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from lemon_core.events import RunUsage
from lemon_core.sessions import (
    ActiveRun,
    PendingApproval,
    SessionSnapshot,
    SessionSummary,
    TranscriptEntry,
)

__all__ = [
    "agent_id_of",
    "history_message",
    "model_parts",
    "pending_approval",
    "session_row",
    "snapshot_payload",
    "usage_payload",
]


def _name(value: object) -> str:
    """An enum's value, or the text itself (the in-process port hands some kinds over as plain
    strings although they are typed as enums)."""
    return value.value if isinstance(value, Enum) else str(value)


def agent_id_of(session_key: str, default: str = "default") -> str:
    """The agent of a canonical key (``agent:<id>:...``), else ``default``."""
    parts = session_key.split(":")
    if len(parts) >= 3 and parts[0] == "agent" and parts[1]:
        return parts[1]
    return default


def model_parts(model: str | None) -> tuple[str | None, str | None]:
    """(provider, model) of ``provider:model``; ``(None, model)`` without a provider."""
    if not model:
        return None, None
    provider, sep, name = model.partition(":")
    return (provider, name) if sep else (None, model)


def usage_payload(usage: RunUsage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    context = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    return {
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "cacheReadTokens": usage.cache_read_tokens,
        "cacheWriteTokens": usage.cache_write_tokens,
        "totalTokens": usage.total_tokens,
        "contextTokens": context,
        "costUsd": usage.cost_usd,
    }


def pending_approval(session_key: str, p: PendingApproval) -> dict[str, Any]:
    return {
        "approvalId": p.approval_id,
        "id": p.approval_id,
        "runId": p.run_id,
        "sessionKey": session_key,
        "agentId": agent_id_of(session_key),
        "tool": p.tool,
        "action": p.action,
        "rationale": p.rationale,
        "requestedAtMs": p.requested_at_ms,
        "expiresAtMs": p.expires_at_ms,
    }


def _active(a: ActiveRun | None) -> dict[str, Any] | None:
    if a is None:
        return None
    return {
        "runId": a.run_id,
        "attemptId": a.attempt_id,
        "attempt": a.attempt,
        "phase": _name(a.phase),
        "text": a.text,
        "textSeq": a.text_seq,
        "textTruncated": a.text_truncated,
        "actions": [
            {
                "id": s.action_id,
                "kind": _name(s.kind),
                "title": s.title,
                "phase": s.phase,
                "ok": s.ok,
                "message": s.message,
            }
            for s in a.actions
        ],
    }


def _message(e: TranscriptEntry) -> dict[str, Any]:
    return {
        "index": e.index,
        "role": e.role,
        "text": e.text,
        "truncated": e.truncated,
        "timestampMs": e.timestamp_ms,
        "tool": e.tool,
        "outcome": e.outcome,
    }


def snapshot_payload(s: SessionSnapshot) -> dict[str, Any]:
    """Seed 003's ``sessions.snapshot`` on the wire."""
    return {
        "sessionKey": s.session_key,
        "status": s.status,
        "revision": s.revision,
        "branch": s.branch,
        "nativeSessionId": s.native_session_id,
        "active": _active(s.active),
        "queued": list(s.queued),
        "pendingApprovals": [pending_approval(s.session_key, p) for p in s.pending_approvals],
        "messages": [_message(m) for m in s.messages],
        "messagesTruncated": s.messages_truncated,
        "lastRunId": s.last_run_id,
        "lastOk": s.last_ok,
        "lastErrorCode": None if s.last_error_code is None else _name(s.last_error_code),
        "todos": [{"text": t.text, "status": t.status} for t in s.todos],
        "tasks": [
            {
                "taskId": t.task_id,
                "parentRunId": t.parent_run_id,
                "runId": t.child_run_id,
                "sessionKey": t.session_key,
                "depth": t.depth,
                "status": t.status,
                "agent": t.agent,
                "description": t.description,
                "reason": t.reason,
                "tokens": t.tokens,
            }
            for t in s.tasks
        ],
    }


def session_row(s: SessionSummary) -> dict[str, Any]:
    return {
        "sessionKey": s.session_key,
        "agentId": agent_id_of(s.session_key),
        "origin": None,
        "createdAtMs": None,
        "updatedAtMs": s.updated_at_ms,
        "runCount": s.runs,
        "model": s.model,
        "label": s.label,
        "active": s.active,
        "lastRunId": s.last_run_id,
        "lastOk": s.last_ok,
        "lastAnswerPreview": s.last_answer_preview,
    }


def history_message(session_key: str, e: TranscriptEntry) -> dict[str, Any]:
    return {
        "id": f"{session_key}#{e.index}",
        "role": e.role,
        "content": e.text,
        "timestampMs": e.timestamp_ms,
        "truncated": e.truncated,
        # A tool call's outcome from the transcript (ok / failed / denied / expired /
        # cancelled); ``ok`` is true only for a call that ran and succeeded.
        "tool": e.tool,
        "outcome": e.outcome,
        "ok": None if e.outcome is None else e.outcome == "ok",
    }
