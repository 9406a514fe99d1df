"""Which connections the control plane takes: caps in total and per client address.

Two pools, each capped at ``max_total`` and ``max_per_client``: the WebSockets, and the HTTP
connections still waiting for their request's headers (counted by the plane's h11 protocol,
``_http``, until the headers are complete; a slow client is also cut by its header deadline).
Over the waiting cap a new connection is answered ``503`` and closed before it sends anything.

A connection is counted from its admission (before the upgrade is accepted) until its handler
ends, whatever ended it. Over a cap the upgrade is refused with an HTTP answer instead of a
``101``, so a refused client costs no WebSocket session and sees why at once: ``503 Service
Unavailable`` when the daemon holds ``max_total`` connections, ``429 Too Many Requests`` when
its address holds ``max_per_client`` (both with ``Retry-After: 1``). Plain HTTP (``/healthz``,
the mounted apps) is never counted here: it stays answerable while the caps are reached.

The address is the TCP peer's (the plane reads no proxy headers): behind a reverse proxy every
client shares the proxy's address. Loop-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["Admission", "AdmissionStatistics", "Refusal"]

_RETRY_AFTER_S: Final = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class Refusal:
    """An upgrade refused: the HTTP status, its body and headers."""

    status: int
    message: str
    headers: tuple[tuple[str, str], ...] = (("Retry-After", str(_RETRY_AFTER_S)),)


@dataclass(frozen=True, kw_only=True, slots=True)
class AdmissionStatistics:
    """The control plane's WebSocket connections now, and what was refused or cut since start."""

    active: int
    clients: int
    """Distinct client addresses among the active connections."""
    busiest_client: int
    """Connections of the address that holds the most."""
    refused_total: int
    """Upgrades refused because ``max_connections`` were open (503)."""
    refused_per_client: int
    """Upgrades refused because their address held ``max_connections_per_client`` (429)."""
    waiting: int
    """HTTP connections waiting for their request's headers."""
    refused_waiting: int
    """HTTP connections closed at once because too many were waiting (in total or from their
    address)."""
    connect_timeouts: int
    """Connections closed because they sent no successful ``connect`` in time."""


class Admission:
    """The connection counts of one control plane (see the module docstring)."""

    def __init__(self, *, max_total: int, max_per_client: int) -> None:
        self.max_total = max_total
        self.max_per_client = max_per_client
        self._per_client: dict[str, int] = {}
        self._active = 0
        self._refused_total = 0
        self._refused_per_client = 0
        self._connect_timeouts = 0
        self._waiting: dict[str, int] = {}
        self._waiting_total = 0
        self._refused_waiting = 0

    def admit(self, address: str) -> Refusal | None:
        """Count a connection from ``address`` (then :meth:`release` it once), or say why not."""
        if self._active >= self.max_total:
            self._refused_total += 1
            return Refusal(
                status=503,
                message=f"the daemon holds its maximum of {self.max_total} connections; retry",
            )
        held = self._per_client.get(address, 0)
        if held >= self.max_per_client:
            self._refused_per_client += 1
            return Refusal(
                status=429,
                message=(
                    f"{held} connections from this address are open, the most one address may "
                    "hold; close one and retry"
                ),
            )
        self._per_client[address] = held + 1
        self._active += 1
        return None

    def release(self, address: str) -> None:
        held = self._per_client.get(address, 0)
        if held <= 0:
            raise RuntimeError(f"released a connection of {address!r} that was not admitted")
        if held == 1:
            del self._per_client[address]
        else:
            self._per_client[address] = held - 1
        self._active -= 1

    def start_waiting(self, address: str) -> bool:
        """Count an HTTP connection of ``address`` waiting for its headers (then
        :meth:`stop_waiting` once); ``False``: too many wait, refuse it."""
        held = self._waiting.get(address, 0)
        if self._waiting_total >= self.max_total or held >= self.max_per_client:
            self._refused_waiting += 1
            return False
        self._waiting[address] = held + 1
        self._waiting_total += 1
        return True

    def stop_waiting(self, address: str) -> None:
        held = self._waiting.get(address, 0)
        if held <= 0:
            raise RuntimeError(f"{address!r} had no connection waiting for its headers")
        if held == 1:
            del self._waiting[address]
        else:
            self._waiting[address] = held - 1
        self._waiting_total -= 1

    def note_connect_timeout(self) -> None:
        self._connect_timeouts += 1

    def statistics(self) -> AdmissionStatistics:
        return AdmissionStatistics(
            active=self._active,
            clients=len(self._per_client),
            busiest_client=max(self._per_client.values(), default=0),
            refused_total=self._refused_total,
            refused_per_client=self._refused_per_client,
            connect_timeouts=self._connect_timeouts,
            waiting=self._waiting_total,
            refused_waiting=self._refused_waiting,
        )
