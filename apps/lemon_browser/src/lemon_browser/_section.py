"""``[web]``: the web tools' config section (this app's README documents each key)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, ClassVar, Final, Literal

import msgspec

from lemon_core.config import Section

__all__ = ["SECTIONS", "BraveSearchConfig", "SearxngConfig", "TavilySearchConfig", "WebConfig"]

_EnvName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
_HostPort = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9.\-\[\]:]{1,300}$")]


class SearxngConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[web.searxng]``: a SearXNG instance's JSON API (``format=json`` must be enabled)."""

    url: str = ""
    """The instance's base URL, e.g. ``https://search.example.org``."""
    api_key_env: _EnvName | None = None
    """A variable holding a bearer token, for an instance behind one (optional)."""


class BraveSearchConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[web.brave]``: the Brave Search API."""

    api_key_env: _EnvName = "BRAVE_API_KEY"
    url: str = "https://api.search.brave.com/res/v1/web/search"


class TavilySearchConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[web.tavily]``: the Tavily search API."""

    api_key_env: _EnvName = "TAVILY_API_KEY"
    url: str = "https://api.tavily.com/search"


class WebConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[web]``: ``web_fetch`` (on by default) and ``web_search`` (off until ``search`` names
    a provider).

    ``allow_hosts`` (exact ``host`` or ``host:port``) lets the fetcher reach an address the
    address guard refuses (a service on this machine or the LAN); it widens what a page can
    make the agent reach, so only ``$LEMON_HOME/config.toml`` may set it.
    """

    home_only: ClassVar[tuple[str, ...]] = ("allow_hosts",)
    hints: ClassVar[Mapping[str, str]] = {
        "web.allow_hosts": 'exact hosts, with a port when it matters: ["127.0.0.1:8080"]',
        "web.search": 'one of "searxng", "brave", "tavily" (or "" for no web_search)',
    }

    enabled: bool = True
    """Whether ``web_fetch`` is offered to the agent."""
    allow_hosts: tuple[_HostPort, ...] = ()
    max_bytes: Annotated[int, msgspec.Meta(ge=1024, le=64 * 1024 * 1024)] = 5 * 1024 * 1024
    """A body larger than this (after decompression) is refused."""
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=300)] = 20.0
    """The whole fetch (every redirect hop and the body) must end within this."""
    max_redirects: Annotated[int, msgspec.Meta(ge=0, le=20)] = 5
    max_chars: Annotated[int, msgspec.Meta(ge=1000, le=1_000_000)] = 50_000
    """What one ``web_fetch`` call returns at most (the model pages on with ``offset``)."""
    cache_ttl_s: Annotated[float, msgspec.Meta(ge=0, le=86_400)] = 900.0
    browser: bool = False
    """Whether the daemon offers the ``browser`` tool (Debian's Chromium; off until set)."""
    search: Literal["", "searxng", "brave", "tavily"] = ""
    searxng: SearxngConfig = SearxngConfig()
    brave: BraveSearchConfig = BraveSearchConfig()
    tavily: TavilySearchConfig = TavilySearchConfig()

    def secret_env_names(self) -> Iterable[str | None]:
        return (self.searxng.api_key_env, self.brave.api_key_env, self.tavily.api_key_env)


#: The config sections this app owns, by name (the ``lemon.config`` entry point names it).
SECTIONS: Final[Mapping[str, type[Section]]] = {"web": WebConfig}
