"""The address guard: which hosts a web request may reach, judged after DNS resolution.

:meth:`AddressGuard.check` takes a URL and returns the :class:`Target` to connect to: the
host, the port and one *checked* address. The fetcher connects to that address (the host
name goes in ``Host`` and in TLS SNI), so a name that answers a public address to the check
and a private one to the connection (DNS rebinding) never reaches the private one. It is called
for the first URL and again for every redirect hop.

Refused (``FetchRefused(reason="address")``), whatever the name looks like:

* schemes other than ``http`` and ``https`` (``file://``, ``ftp://``, ``data:``, ...);
* the cloud metadata names (``metadata.google.internal``, ...) and addresses
  (``169.254.169.254``, ``fd00:ec2::254``, ...);
* any address that is not globally reachable: loopback, private (RFC 1918, unique local
  ``fc00::/7``), link-local, CGNAT (``100.64.0.0/10``), unspecified, reserved, documentation,
  and multicast; IPv4-mapped and 6to4/NAT64 forms are judged by the IPv4 address inside;
* a name with *any* refused address among its answers.

``allow_hosts`` (``[web] allow_hosts``, home config only) lists exact ``host`` or
``host:port`` entries whose addresses are not judged (a local service the person trusts);
the metadata names and addresses stay refused even then.

What it does not do: it does not judge what a public server does with a request.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Protocol

import httpx

from lemon_browser.errors import FetchFailed, FetchRefused, WebUsageError

__all__ = [
    "METADATA_ADDRESSES",
    "METADATA_HOSTS",
    "AddressGuard",
    "Resolver",
    "SystemResolver",
    "Target",
    "address_refusal",
]

METADATA_HOSTS: Final = frozenset(
    {"metadata.google.internal", "metadata.goog", "metadata", "instance-data",
     "instance-data.ec2.internal", "metadata.azure.internal"}
)  # fmt: skip
"""Host names of cloud instance-metadata services: always refused."""
METADATA_ADDRESSES: Final = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200")
)
"""Addresses of cloud instance-metadata services: always refused, even when allowed."""

_CGNAT: Final = ipaddress.ip_network("100.64.0.0/10")
_NAT64: Final = ipaddress.ip_network("64:ff9b::/96")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_RESOLVE_TIMEOUT_S: Final = 10.0


class Resolver(Protocol):
    """Turns a host name into the addresses a connection could use."""

    async def resolve(self, host: str, port: int) -> list[str]:
        """The addresses of ``host`` (IPv4 / IPv6 text); raise ``OSError`` when it has none."""
        ...


class SystemResolver:
    """The system's resolver (``getaddrinfo``, run by the event loop off its thread)."""

    async def resolve(self, host: str, port: int) -> list[str]:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    """Where a checked request goes: ``address`` is the one the connection must use."""

    url: httpx.URL
    host: str
    port: int
    address: str
    allowed_by_config: bool


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_refusal(address: str) -> str | None:
    """Why ``address`` may not be reached (``"loopback"``, ``"private"``, ...), or ``None``."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return "not an IP address"
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_v4(ip)
        if inner is not None:
            reason = address_refusal(str(inner))
            return None if reason is None else f"{reason} (inside an IPv6 address)"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_unspecified:
        return "the unspecified address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "a CGNAT (shared) address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global:
        return "a reserved (not globally reachable) address"
    return None


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _normal_host(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


def _allow_key(entry: str) -> str:
    """An ``allow_hosts`` entry in the form :meth:`AddressGuard._allowed` compares."""
    text = entry.strip().lower()
    if text.startswith("["):  # [v6]:port or [v6]
        inner, _, rest = text[1:].partition("]")
        return inner + (rest if rest.startswith(":") else "")
    if text.count(":") > 1:  # a bare IPv6 address
        return text
    return text.rstrip(".") if ":" not in text else text


class AddressGuard:
    """Checks every URL a web tool would request (see the module docstring)."""

    def __init__(
        self, *, allow_hosts: Iterable[str] = (), resolver: Resolver | None = None
    ) -> None:
        self._allow = frozenset(_allow_key(e) for e in allow_hosts if e.strip())
        self._resolver: Resolver = resolver or SystemResolver()

    def _allowed(self, host: str, port: int) -> bool:
        return host in self._allow or f"{host}:{port}" in self._allow

    async def _resolve(self, host: str, port: int) -> list[str]:
        try:
            addresses = await asyncio.wait_for(
                self._resolver.resolve(host, port), _RESOLVE_TIMEOUT_S
            )
        except (OSError, TimeoutError) as exc:
            raise FetchFailed(f"could not resolve {host}: {exc}") from None
        if not addresses:
            raise FetchFailed(f"could not resolve {host}: no addresses")
        return addresses

    async def check(self, url: httpx.URL | str) -> Target:
        """The target of ``url``; raises ``FetchRefused`` (scheme, address) or ``FetchFailed``
        (the name does not resolve)."""
        try:
            parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise WebUsageError(f"{url!r} is not a valid URL ({exc})") from None
        scheme = parsed.scheme.lower()
        if scheme not in _DEFAULT_PORTS:
            raise FetchRefused(
                f"{scheme or 'a URL without a'}:// URLs are refused; only http and https URLs "
                "can be fetched",
                reason="scheme",
            )
        host = _normal_host(parsed.host)
        if not host:
            raise WebUsageError(f"{str(parsed)!r} has no host name")
        port = parsed.port or _DEFAULT_PORTS[scheme]
        if host in METADATA_HOSTS or host.endswith(".metadata.google.internal"):
            raise FetchRefused(
                f"{host} is a cloud metadata service; it is never fetched", reason="address"
            )
        allowed = self._allowed(host, port)
        addresses = [host] if _is_address(host) else await self._resolve(host, port)
        for address in addresses:
            reason = address_refusal(address)
            if reason is None:
                continue
            if allowed and reason != "a cloud metadata address":
                continue
            shown = host if host == address else f"{host} ({address})"
            raise FetchRefused(
                f"{shown} is {reason}; web tools only reach public addresses. To allow a "
                f'service you trust, add "{host}:{port}" to [web] allow_hosts in '
                "$LEMON_HOME/config.toml",
                reason="address",
            )
        return Target(
            url=parsed, host=host, port=port, address=addresses[0], allowed_by_config=allowed
        )
