"""Failed authentications counted per client address, so guessing a token is slow and one
address cannot lock out the others.

Guarantees:

- An address that failed ``failures`` times within ``window_s`` is refused (:meth:`retry_after`
  says for how long) until the oldest of those failures leaves the window, even if it then
  presents a valid token. Refused attempts are not failures: they do not extend the window.
- Only that address is refused; another address (and a success anywhere) changes nothing.
- IPv6 addresses count per /64 (one host usually holds a whole /64); IPv4-mapped IPv6
  addresses count as the IPv4 address. An unknown address (no peer name) is one address.
- At most ``addresses`` addresses are remembered; beyond that the one that failed least
  recently is forgotten (an attacker with many addresses can make the daemon forget some,
  never grow it).

What it does not do: it cannot tell two accounts of one machine apart (both are 127.0.0.1),
so another local account can delay the owner's clients by failing on purpose; it cannot get in.
"""

from __future__ import annotations

import ipaddress
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["AddressLimiter", "LimiterStatistics", "address_key"]


@dataclass(frozen=True, kw_only=True, slots=True)
class LimiterStatistics:
    addresses: int
    """Addresses with failures remembered."""
    limited: int
    """Of them, refused right now."""
    failures: int
    """Failures counted since start."""
    refused: int
    """Attempts refused because their address was limited, since start."""
    forgotten: int
    """Addresses dropped to keep the table bounded."""


def address_key(address: str | None) -> str:
    """The key ``address`` counts under (see the module docstring)."""
    if not address:
        return "unknown"
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class AddressLimiter:
    """See the module docstring. ``clock`` is monotonic seconds (injectable for tests)."""

    def __init__(
        self,
        *,
        failures: int = 20,
        window_s: float = 60.0,
        addresses: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limit = failures
        self._window = window_s
        self._max = addresses
        self._clock = clock
        self._seen: OrderedDict[str, deque[float]] = OrderedDict()
        self._failures = 0
        self._refused = 0
        self._forgotten = 0

    def retry_after(self, address: str | None) -> float | None:
        """Seconds until ``address`` may try again, or ``None`` when it may now. A refusal is
        counted (:meth:`statistics`)."""
        wait = self._wait(address_key(address), self._clock())
        if wait is not None:
            self._refused += 1
        return wait

    def _wait(self, key: str, now: float) -> float | None:
        times = self._seen.get(key)
        if times is None or len(times) < self._limit:
            return None
        left = self._window - (now - times[0])
        return left if left > 0 else None

    def failed(self, address: str | None) -> None:
        """Count one failed authentication of ``address``."""
        key = address_key(address)
        times = self._seen.get(key)
        if times is None:
            times = self._seen[key] = deque(maxlen=self._limit)
        times.append(self._clock())
        self._seen.move_to_end(key)
        self._failures += 1
        while len(self._seen) > self._max:
            self._seen.popitem(last=False)
            self._forgotten += 1

    def statistics(self) -> LimiterStatistics:
        now = self._clock()
        return LimiterStatistics(
            addresses=len(self._seen),
            limited=sum(1 for key in self._seen if self._wait(key, now) is not None),
            failures=self._failures,
            refused=self._refused,
            forgotten=self._forgotten,
        )
