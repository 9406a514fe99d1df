"""Web search providers behind one Protocol: SearXNG (self-hosted JSON API), Brave Search and
Tavily.

:func:`search_provider` builds the provider ``[web] search`` names, with its key read from the
variable its section names (``api_key_env``); with ``search = ""`` it returns ``None`` and no
search tool is offered. Every provider returns at most ``limit`` (<= 10) :class:`SearchResult`
records (title, URL, snippet) and names itself; an HTTP error, a rate limit (with the
``Retry-After`` it gave), a timeout or an answer of the wrong shape is a
:class:`~lemon_browser.errors.SearchError` saying which provider and what to do.

The providers are reached at the URL their section configures, not through the address guard
(the person chose them: a self-hosted SearXNG is usually on the LAN); a key never appears in a
message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import httpx

from lemon_browser._section import WebConfig
from lemon_browser.errors import SearchError, WebUsageError

__all__ = [
    "MAX_RESULTS",
    "BraveSearch",
    "SearchProvider",
    "SearchResult",
    "SearxngSearch",
    "TavilySearch",
    "search_provider",
]

MAX_RESULTS: Final = 10
_TIMEOUT_S: Final = 15.0


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchResult:
    """One search hit."""

    title: str
    url: str
    snippet: str


class SearchProvider(Protocol):
    """A web search API."""

    name: str
    """How results name the provider (``"searxng"``, ``"brave"``, ``"tavily"``)."""

    async def search(self, query: str, *, limit: int = MAX_RESULTS) -> list[SearchResult]:
        """At most ``limit`` results for ``query``; raises :class:`SearchError`."""
        ...


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "").strip()
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


async def _call(
    name: str,
    timeout_s: float,
    transport: httpx.AsyncBaseTransport | None,
    method: str,
    url: str,
    **request: Any,
) -> Any:
    """Send one request to ``name``'s API and return its JSON, errors translated."""
    try:
        async with httpx.AsyncClient(timeout=timeout_s, transport=transport) as client:
            response = await client.request(method, url, **request)
    except httpx.TimeoutException:
        raise SearchError(f"{name} search timed out after {timeout_s:g} s; try again") from None
    except httpx.HTTPError as exc:
        raise SearchError(f"{name} search could not connect: {type(exc).__name__}") from None
    status = response.status_code
    if status in (401, 403):
        raise SearchError(
            f"{name} search refused the key (HTTP {status}); check the key in the variable "
            f"[web.{name}] api_key_env names",
            status=status,
        )
    if status == 429:
        after = _retry_after(response)
        wait = f"; retry after {after:g} s" if after is not None else ""
        raise SearchError(
            f"{name} search is rate limited (HTTP 429){wait}", status=status, retry_after_s=after
        )
    if status >= 400:
        raise SearchError(f"{name} search failed: HTTP {status}", status=status)
    try:
        return response.json()
    except ValueError:
        raise SearchError(f"{name} search answered something that is not JSON") from None


def _clean(value: object) -> str:
    return " ".join(str(value).split()) if value is not None else ""


def _results(items: object, name: str, *, title: str, url: str, snippet: str, limit: int
             ) -> list[SearchResult]:  # fmt: skip
    if not isinstance(items, list):
        raise SearchError(f"{name} search answered an unexpected shape (no result list)")
    out: list[SearchResult] = []
    for item in items:
        if not isinstance(item, Mapping) or not item.get(url):
            continue
        out.append(SearchResult(title=_clean(item.get(title)), url=str(item[url]),
                                snippet=_clean(item.get(snippet))))  # fmt: skip
        if len(out) >= min(limit, MAX_RESULTS):
            break
    return out


class SearxngSearch:
    """A SearXNG instance's JSON API (``GET /search?q=...&format=json``)."""

    name = "searxng"

    def __init__(self, *, base_url: str, token: str | None = None,
                 transport: httpx.AsyncBaseTransport | None = None,
                 timeout_s: float = _TIMEOUT_S) -> None:  # fmt: skip
        self._url = base_url.rstrip("/") + "/search"
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._transport = transport
        self._timeout_s = timeout_s

    async def search(self, query: str, *, limit: int = MAX_RESULTS) -> list[SearchResult]:
        params = {"q": query, "format": "json"}
        data = await _call(self.name, self._timeout_s, self._transport, "GET", self._url,
                           params=params, headers=self._headers)  # fmt: skip
        items = data.get("results") if isinstance(data, Mapping) else None
        return _results(items, self.name, title="title", url="url", snippet="content",
                        limit=limit)  # fmt: skip


class BraveSearch:
    """The Brave Search API (``GET /res/v1/web/search``, key in ``X-Subscription-Token``)."""

    name = "brave"

    def __init__(self, *, key: str, url: str,
                 transport: httpx.AsyncBaseTransport | None = None,
                 timeout_s: float = _TIMEOUT_S) -> None:  # fmt: skip
        self._url = url
        self._key = key
        self._transport = transport
        self._timeout_s = timeout_s

    async def search(self, query: str, *, limit: int = MAX_RESULTS) -> list[SearchResult]:
        headers = {"X-Subscription-Token": self._key, "Accept": "application/json"}
        count = min(limit, MAX_RESULTS)
        params: dict[str, str | int] = {"q": query, "count": count}
        data = await _call(self.name, self._timeout_s, self._transport, "GET", self._url,
                           params=params, headers=headers)  # fmt: skip
        web = data.get("web") if isinstance(data, Mapping) else None
        items = web.get("results", []) if isinstance(web, Mapping) else []
        return _results(items, self.name, title="title", url="url", snippet="description",
                        limit=limit)  # fmt: skip


class TavilySearch:
    """The Tavily search API (``POST /search`` with a JSON body, bearer key)."""

    name = "tavily"

    def __init__(self, *, key: str, url: str,
                 transport: httpx.AsyncBaseTransport | None = None,
                 timeout_s: float = _TIMEOUT_S) -> None:  # fmt: skip
        self._url = url
        self._key = key
        self._transport = transport
        self._timeout_s = timeout_s

    async def search(self, query: str, *, limit: int = MAX_RESULTS) -> list[SearchResult]:
        body = {"query": query, "max_results": min(limit, MAX_RESULTS)}
        headers = {"Authorization": f"Bearer {self._key}"}
        data = await _call(self.name, self._timeout_s, self._transport, "POST", self._url,
                           json=body, headers=headers)  # fmt: skip
        items = data.get("results") if isinstance(data, Mapping) else None
        return _results(items, self.name, title="title", url="url", snippet="content",
                        limit=limit)  # fmt: skip


def search_provider(config: WebConfig, environ: Mapping[str, str]) -> SearchProvider | None:
    """The provider ``config.search`` names (``None``: no search configured). Raises
    :class:`WebUsageError` naming the missing key variable or URL."""
    name = config.search
    if not name:
        return None
    if name == "searxng":
        if not config.searxng.url:
            raise WebUsageError(
                '[web] search = "searxng" needs [web.searxng] url (the instance\'s base URL)'
            )
        variable = config.searxng.api_key_env
        return SearxngSearch(base_url=config.searxng.url,
                             token=environ.get(variable) if variable else None)  # fmt: skip
    section = config.brave if name == "brave" else config.tavily
    key = environ.get(section.api_key_env, "")
    if not key:
        raise WebUsageError(
            f'[web] search = "{name}" needs its key in ${section.api_key_env} (or set '
            f"[web.{name}] api_key_env to the variable that holds it)"
        )
    if name == "brave":
        return BraveSearch(key=key, url=section.url)
    return TavilySearch(key=key, url=section.url)
