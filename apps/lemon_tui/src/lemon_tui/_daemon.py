"""What the client asks the daemon beyond the session port: the control plane's own methods
(``models.list``, ``status``, ``usage.status``, ``sessions.patch``, ``exec.approvals.get``),
each only when the daemon advertised it in ``hello-ok.features.methods``.

The session port is the one required API; these are optional features that degrade to what
the client knows itself when a daemon does not offer them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["DaemonCalls", "ModelInfo", "models_from_wire", "offered"]


@runtime_checkable
class DaemonCalls(Protocol):
    """A connection that can call the control plane's methods by name."""

    @property
    def advertised(self) -> frozenset[str]:
        """The methods the daemon said it serves (``hello-ok.features.methods``)."""
        ...

    @property
    def server_version(self) -> str: ...

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """The method's payload; a refusal raises ``WireError`` (``ValueError`` for bad
        params), a gone connection ``ControlPlaneError``."""
        ...


def offered(port: object, method: str) -> DaemonCalls | None:
    """``port`` as :class:`DaemonCalls` when it can call ``method``, else ``None``."""
    if isinstance(port, DaemonCalls) and method in port.advertised:
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
