"""What the client asks the daemon beyond the session port: the control plane's own methods
(``models.list``, ``status``, ``usage.status``, ``sessions.patch``, ``exec.approvals.get``;
``tasks.list``, ``tasks.cancel`` and ``runs.tree`` where the coding agent registers them),
each only when the daemon advertised it in ``hello-ok.features.methods``.

The session port is the one required API; these are optional features that degrade to what
the client knows itself when a daemon does not offer them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "DaemonCalls",
    "ModelInfo",
    "advertised",
    "models_from_wire",
    "offered",
    "server_version",
]


@runtime_checkable
class DaemonCalls(Protocol):
    """A connection that can call the control plane's methods by name (the session port
    client, ``WebSocketSessionPort``: its ``hello`` and ``call``)."""

    hello: dict[str, Any]
    """The daemon's ``hello-ok`` frame."""

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """The method's payload; a refusal raises ``WireError`` (``ValueError`` for bad
        params), a gone connection ``ControlPlaneError``."""
        ...


def advertised(port: DaemonCalls) -> frozenset[str]:
    """The methods the daemon said it serves (``hello-ok.features.methods``)."""
    features = port.hello.get("features") or {}
    return frozenset(m for m in features.get("methods") or () if isinstance(m, str))


def server_version(port: DaemonCalls) -> str:
    return str((port.hello.get("server") or {}).get("version") or "unknown")


def offered(port: object, method: str) -> DaemonCalls | None:
    """``port`` as :class:`DaemonCalls` when it can call ``method``, else ``None``."""
    if isinstance(port, DaemonCalls) and method in advertised(port):
        return port
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelInfo:
    """One row of ``models.list``: ``ref`` is what a run request's ``model`` takes."""

    ref: str
    provider: str
    name: str
    context_window: int = 0
    default: bool = False


def models_from_wire(payload: Any) -> list[ModelInfo]:
    """The rows of a ``models.list`` payload that have an id (others are skipped)."""
    rows = payload.get("models") if isinstance(payload, dict) else None
    found: list[ModelInfo] = []
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not row["id"]:
            continue
        window = row.get("contextWindow")
        found.append(
            ModelInfo(
                ref=row["id"],
                provider=str(row.get("provider") or row["id"].split(":", 1)[0]),
                name=str(row.get("name") or row["id"]),
                context_window=window if isinstance(window, int) and window > 0 else 0,
                default=row.get("default") is True,
            )
        )
    return found
