"""Index documents: what a registry entry or a well-known URL says about a skill.

A registry entry ``<ns>/<group>/<name>`` is looked up at ``<registry_url>/skills/<ref>``; a
well-known source at the URL discovery probed. Both answer a JSON object::

    {"clone_url": "https://...", "ref": "v1.2.0", "subdir": "skills/k8s-rollout"}

(``ref`` and ``subdir`` optional; ``url`` is accepted for ``clone_url``). The document is read
with a deadline and a size bound, over https (http only to loopback), redirects not followed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx

from lemon_skills.errors import SkillsError, SkillSourceError
from lemon_skills.sources.router import check_git_url, check_index_url

__all__ = ["IndexEntry", "read_index"]


@dataclass(frozen=True, kw_only=True, slots=True)
class IndexEntry:
    """Where an index says a skill's repository is."""

    clone_url: str
    ref: str | None = None
    subdir: str | None = None


def read_index(url: str, *, timeout: float, max_bytes: int) -> IndexEntry | None:
    """The index document at ``url``; ``None`` when the index has no such entry (404)."""
    check_index_url(url)
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
                if len(body) > max_bytes:
                    raise SkillSourceError(f"{url}: the index document is over {max_bytes} bytes")
    except httpx.HTTPError as exc:
        raise SkillSourceError(f"{url} could not be read: {type(exc).__name__}: {exc}") from None
    try:
        doc = json.loads(body)
    except ValueError:
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
    return IndexEntry(clone_url=clone, ref=ref or None, subdir=subdir or None)
