"""Index documents: what a registry entry or a well-known URL says about a skill.

A registry entry ``<ns>/<group>/<name>`` is looked up at ``<registry_url>/skills/<ref>``; a
well-known source at the URL discovery probed. Both answer a JSON object::

    {"clone_url": "https://...", "ref": "v1.2.0", "subdir": "skills/k8s-rollout"}

(``ref`` and ``subdir`` optional; ``url`` is accepted for ``clone_url``). The document is read
with an overall deadline (not only per read: a server dripping one byte at a time is cut off)
and a size bound, over https (http only to loopback), redirects not followed.

A remote index (any host but loopback) names only remote repositories: its ``clone_url`` must
be ``https://``, ``ssh://`` or ``user@host:path`` to a host that is not loopback, link-local,
private or otherwise reserved when written as an address (``file://`` would copy a repository
of this machine into a skill the model reads; an internal address would make Lemon a proxy into
the user's network). Host *names* are not resolved here: a name that resolves to an internal
address is not caught. An index on loopback (a mirror the user runs) may name anything
:func:`~lemon_skills.sources.router.check_git_url` accepts.
"""

from __future__ import annotations

import ipaddress
import json
import re
import time
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from lemon_skills.errors import SkillsError, SkillSourceError
from lemon_skills.sources.router import check_git_url, check_index_url

__all__ = ["IndexEntry", "check_index_clone_url", "read_index"]

_LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
_SCP_HOST: Final = re.compile(r"[^@/:]+@(\[[^\]]+\]|[^:/]+):")


def _is_local_host(host: str) -> bool:
    """Whether ``host`` (a name or an address literal) is this machine or an internal
    network: loopback names, and loopback, private, link-local, reserved, unspecified or
    multicast addresses (IPv4-mapped IPv6 included)."""
    name = host.strip("[]").rstrip(".").lower()
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return not address.is_global or address.is_multicast


def check_index_clone_url(clone_url: str, index_url: str) -> str:
    """``clone_url`` if the index at ``index_url`` may name it (see the module docstring),
    else :class:`SkillSourceError`."""
    index_host = urlsplit(index_url).hostname or ""
    if _is_local_host(index_host):
        return clone_url
    scp = _SCP_HOST.match(clone_url) if "://" not in clone_url else None
    parts = urlsplit(clone_url)
    if scp is not None:
        host = scp.group(1)
    elif parts.scheme in ("https", "ssh"):
        host = parts.hostname or ""
    else:
        raise SkillSourceError(
            f"{index_url}: clone_url {clone_url!r}: a remote index may only name https:// or "
            "ssh:// repositories (never file:// or a path of this machine)"
        )
    if not host or _is_local_host(host):
        raise SkillSourceError(
            f"{index_url}: clone_url {clone_url!r}: a remote index may not name a repository "
            "on this machine or an internal address"
        )
    return clone_url


@dataclass(frozen=True, kw_only=True, slots=True)
class IndexEntry:
    """Where an index says a skill's repository is."""

    clone_url: str
    ref: str | None = None
    subdir: str | None = None


def read_index(url: str, *, timeout: float, max_bytes: int) -> IndexEntry | None:
    """The index document at ``url``; ``None`` when the index has no such entry (404)."""
    import httpx

    check_index_url(url)
    deadline = time.monotonic() + timeout
    try:
        with (
            httpx.Client(timeout=timeout, follow_redirects=False) as client,
            client.stream("GET", url, headers={"Accept": "application/json"}) as response,
        ):
            if response.status_code == 404:
                return None
            if response.status_code != 200:
                raise SkillSourceError(f"{url} answered HTTP {response.status_code}")
            body = b""
            for chunk in response.iter_bytes():
                body += chunk
                if time.monotonic() > deadline:
                    raise SkillSourceError(
                        f"{url}: the index document took longer than {timeout:g}s (the overall "
                        "deadline); gave up"
                    )
                if len(body) > max_bytes:
                    raise SkillSourceError(f"{url}: the index document is over {max_bytes} bytes")
    except httpx.HTTPError as exc:
        raise SkillSourceError(f"{url} could not be read: {type(exc).__name__}: {exc}") from None
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: `[[[[...` nested thousands deep
        raise SkillSourceError(f"{url}: the index document is not JSON") from None
    if not isinstance(doc, dict):
        raise SkillSourceError(f"{url}: the index document is not a JSON object")
    clone = doc.get("clone_url", doc.get("url"))
    ref, subdir = doc.get("ref"), doc.get("subdir")
    if not isinstance(clone, str):
        raise SkillSourceError(f"{url}: the index document has no clone_url")
    if not (ref is None or isinstance(ref, str)) or not (subdir is None or isinstance(subdir, str)):
        raise SkillSourceError(f"{url}: 'ref' and 'subdir' must be strings")
    if subdir is not None and (subdir.startswith("/") or ".." in subdir.split("/")):
        raise SkillSourceError(f"{url}: 'subdir' must be a relative path inside the repository")
    try:
        check_git_url(clone)
    except SkillsError as exc:
        raise SkillSourceError(f"{url}: clone_url {exc}") from None
    check_index_clone_url(clone, url)
    return IndexEntry(clone_url=clone, ref=ref or None, subdir=subdir or None)
