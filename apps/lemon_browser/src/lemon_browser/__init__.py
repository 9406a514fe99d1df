"""lemon_browser: the web for the agent, safely.

* :class:`AddressGuard` judges every URL after DNS resolution (loopback, private, link-local,
  CGNAT, multicast and cloud-metadata addresses refused; ``[web] allow_hosts`` lifts it for
  exact hosts);
* :class:`Fetcher` GETs a URL through the guard on every redirect hop, bounded in size and
  time, and converts it (HTML to Markdown, PDF to text, JSON indented);
* :class:`Browsers` drives Debian's Chromium through Playwright, a context per session, every
  request through the guard and every connection through :class:`PinningProxy` (to the
  checked address);
* :func:`search_provider` builds the ``[web] search`` provider (SearXNG, Brave, Tavily)
  behind :class:`SearchProvider`.

The tools the model calls (``web_fetch``, ``web_search``) are the coding agent's; it fences
what they return as untrusted data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lemon_core.facade import lazy_exports

if TYPE_CHECKING:
    from lemon_browser._boot import lemon_browser_app
    from lemon_browser._section import (
        BraveSearchConfig,
        SearxngConfig,
        TavilySearchConfig,
        WebConfig,
    )
    from lemon_browser.browser import CHROMIUM, CHROMIUM_ARGS, Browsers, BrowserSession
    from lemon_browser.convert import Converted, html_to_markdown, json_to_text, pdf_to_text
    from lemon_browser.errors import (
        FetchFailed,
        FetchRefused,
        SearchError,
        WebError,
        WebUsageError,
    )
    from lemon_browser.fetch import FetchedPage, Fetcher, FetchLimits, PageKind
    from lemon_browser.guard import (
        METADATA_ADDRESSES,
        METADATA_HOSTS,
        AddressGuard,
        Resolver,
        SystemResolver,
        Target,
        address_refusal,
    )
    from lemon_browser.proxy import PinningProxy, ProxyRefusal
    from lemon_browser.search import (
        MAX_RESULTS,
        BraveSearch,
        SearchProvider,
        SearchResult,
        SearxngSearch,
        TavilySearch,
        search_provider,
    )

#: Where each facade name lives (loading the config imports the section module only).
_EXPORTS: Final[dict[str, tuple[str, str]]] = {
    "lemon_browser_app": ("lemon_browser._boot", "lemon_browser_app"),
    "CHROMIUM": ("lemon_browser.browser", "CHROMIUM"),
    "CHROMIUM_ARGS": ("lemon_browser.browser", "CHROMIUM_ARGS"),
    "BrowserSession": ("lemon_browser.browser", "BrowserSession"),
    "Browsers": ("lemon_browser.browser", "Browsers"),
    "BraveSearchConfig": ("lemon_browser._section", "BraveSearchConfig"),
    "SearxngConfig": ("lemon_browser._section", "SearxngConfig"),
    "TavilySearchConfig": ("lemon_browser._section", "TavilySearchConfig"),
    "WebConfig": ("lemon_browser._section", "WebConfig"),
    "Converted": ("lemon_browser.convert", "Converted"),
    "html_to_markdown": ("lemon_browser.convert", "html_to_markdown"),
    "json_to_text": ("lemon_browser.convert", "json_to_text"),
    "pdf_to_text": ("lemon_browser.convert", "pdf_to_text"),
    "FetchFailed": ("lemon_browser.errors", "FetchFailed"),
    "FetchRefused": ("lemon_browser.errors", "FetchRefused"),
    "SearchError": ("lemon_browser.errors", "SearchError"),
    "WebError": ("lemon_browser.errors", "WebError"),
    "WebUsageError": ("lemon_browser.errors", "WebUsageError"),
    "FetchLimits": ("lemon_browser.fetch", "FetchLimits"),
    "FetchedPage": ("lemon_browser.fetch", "FetchedPage"),
    "Fetcher": ("lemon_browser.fetch", "Fetcher"),
    "PageKind": ("lemon_browser.fetch", "PageKind"),
    "METADATA_ADDRESSES": ("lemon_browser.guard", "METADATA_ADDRESSES"),
    "METADATA_HOSTS": ("lemon_browser.guard", "METADATA_HOSTS"),
    "AddressGuard": ("lemon_browser.guard", "AddressGuard"),
    "Resolver": ("lemon_browser.guard", "Resolver"),
    "SystemResolver": ("lemon_browser.guard", "SystemResolver"),
    "Target": ("lemon_browser.guard", "Target"),
    "address_refusal": ("lemon_browser.guard", "address_refusal"),
    "PinningProxy": ("lemon_browser.proxy", "PinningProxy"),
    "ProxyRefusal": ("lemon_browser.proxy", "ProxyRefusal"),
    "MAX_RESULTS": ("lemon_browser.search", "MAX_RESULTS"),
    "BraveSearch": ("lemon_browser.search", "BraveSearch"),
    "SearchProvider": ("lemon_browser.search", "SearchProvider"),
    "SearchResult": ("lemon_browser.search", "SearchResult"),
    "SearxngSearch": ("lemon_browser.search", "SearxngSearch"),
    "TavilySearch": ("lemon_browser.search", "TavilySearch"),
    "search_provider": ("lemon_browser.search", "search_provider"),
}

__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "MAX_RESULTS",
    "METADATA_ADDRESSES",
    "METADATA_HOSTS",
    "AddressGuard",
    "BraveSearch",
    "BraveSearchConfig",
    "BrowserSession",
    "Browsers",
    "Converted",
    "FetchFailed",
    "FetchLimits",
    "FetchRefused",
    "FetchedPage",
    "Fetcher",
    "PageKind",
    "PinningProxy",
    "ProxyRefusal",
    "Resolver",
    "SearchError",
    "SearchProvider",
    "SearchResult",
    "SearxngConfig",
    "SearxngSearch",
    "SystemResolver",
    "Target",
    "TavilySearch",
    "TavilySearchConfig",
    "WebConfig",
    "WebError",
    "WebUsageError",
    "address_refusal",
    "html_to_markdown",
    "json_to_text",
    "lemon_browser_app",
    "pdf_to_text",
    "search_provider",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
