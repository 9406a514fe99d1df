"""Each search provider against a loopback stand-in answering in the provider's real wire
format (responses shaped like recorded ones); errors as clear SearchErrors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from lemon_browser import (
    BraveSearch,
    BraveSearchConfig,
    SearchError,
    SearxngConfig,
    SearxngSearch,
    TavilySearch,
    WebConfig,
    WebUsageError,
    search_provider,
)
from lemon_browser.testing import FixtureSite, SeenRequest, response_bytes

SEARXNG = {
    "query": "sqlite wal", "number_of_results": 0,
    "results": [
        {"url": "https://sqlite.org/wal.html", "title": "Write-Ahead Logging",
         "content": "The default method by which SQLite implements atomic commit...",
         "engine": "duckduckgo", "engines": ["duckduckgo", "brave"], "score": 2.5,
         "category": "general", "parsed_url": ["https", "sqlite.org", "/wal.html", "", "", ""]},
        {"url": "https://example.org/wal-explained", "title": "WAL explained",
         "content": "  A   gentle\nintroduction  ", "engine": "bing", "score": 1.0},
        {"title": "no url: skipped", "content": "x"},
    ] + [{"url": f"https://e.org/{n}", "title": f"r{n}", "content": ""} for n in range(20)],
    "answers": [], "corrections": [], "infoboxes": [], "suggestions": ["sqlite wal mode"],
    "unresponsive_engines": [],
}  # fmt: skip
BRAVE = {
    "query": {"original": "sqlite wal", "show_strict_warning": False, "is_navigational": False},
    "mixed": {"type": "mixed", "main": [{"type": "web", "index": 0, "all": False}]},
    "type": "search",
    "web": {"type": "search", "family_friendly": True, "results": [
        {"title": "Write-Ahead Logging - SQLite", "url": "https://sqlite.org/wal.html",
         "is_source_local": False, "is_source_both": False,
         "description": "The default method by which <strong>SQLite</strong> implements...",
         "profile": {"name": "SQLite", "url": "https://sqlite.org/wal.html"},
         "language": "en", "family_friendly": True, "type": "search_result",
         "meta_url": {"scheme": "https", "netloc": "sqlite.org", "hostname": "sqlite.org"}},
    ]},
}  # fmt: skip
TAVILY = {
    "query": "sqlite wal", "follow_up_questions": None, "answer": None, "images": [],
    "results": [
        {"title": "Write-Ahead Logging", "url": "https://sqlite.org/wal.html",
         "content": "The default method by which SQLite implements atomic commit",
         "score": 0.98, "raw_content": None},
    ],
    "response_time": 1.07,
}  # fmt: skip


@pytest.fixture
async def site() -> AsyncIterator[FixtureSite]:
    async with FixtureSite() as s:
        yield s


def json_page(site: FixtureSite, path: str, body: object, status: int = 200,
              headers: dict[str, str] | None = None) -> None:  # fmt: skip
    site.page(path, json.dumps(body), content_type="application/json", status=status,
              headers=headers)  # fmt: skip


async def test_searxng_speaks_its_json_api(site: FixtureSite) -> None:
    json_page(site, "/searx/search", SEARXNG)
    provider = SearxngSearch(base_url=site.url("/searx/"), token="tok-1")
    results = await provider.search("sqlite wal")
    assert len(results) == 10
    assert (results[0].title, results[0].url) == ("Write-Ahead Logging",
                                                  "https://sqlite.org/wal.html")  # fmt: skip
    assert results[1].snippet == "A gentle introduction"
    (request,) = site.requests
    assert request.path == "/searx/search?q=sqlite+wal&format=json"
    assert request.headers["authorization"] == "Bearer tok-1"


async def test_brave_speaks_its_api(site: FixtureSite) -> None:
    json_page(site, "/res/v1/web/search", BRAVE)
    provider = BraveSearch(key="brave-key", url=site.url("/res/v1/web/search"))
    (result,) = await provider.search("sqlite wal", limit=3)
    assert result.url == "https://sqlite.org/wal.html"
    assert result.snippet.startswith("The default method")
    (request,) = site.requests
    assert request.path == "/res/v1/web/search?q=sqlite+wal&count=3"
    assert request.headers["x-subscription-token"] == "brave-key"


async def test_tavily_speaks_its_api(site: FixtureSite) -> None:
    json_page(site, "/search", TAVILY)
    provider = TavilySearch(key="tvly-key", url=site.url("/search"))
    (result,) = await provider.search("sqlite wal", limit=50)
    assert result.title == "Write-Ahead Logging"
    (request,) = site.requests
    assert request.method == "POST"
    assert request.headers["authorization"] == "Bearer tvly-key"
    assert json.loads(request.body) == {"query": "sqlite wal", "max_results": 10}


async def test_a_refused_key_a_rate_limit_and_a_timeout_are_clear_errors(
    site: FixtureSite,
) -> None:
    json_page(site, "/401/search", {"error": "unauthorized"}, status=401)
    json_page(site, "/429/search", {"error": "slow down"}, status=429,
              headers={"Retry-After": "30"})  # fmt: skip

    async def hang(request: SeenRequest, writer: asyncio.StreamWriter) -> None:
        await site.closing.wait()
        writer.write(response_bytes(200, {}, b"{}"))

    site.route("/slow/search", hang)
    with pytest.raises(SearchError, match="refused the key") as err:
        await SearxngSearch(base_url=site.url("/401")).search("q")
    assert err.value.status == 401
    with pytest.raises(SearchError, match="rate limited") as err:
        await SearxngSearch(base_url=site.url("/429")).search("q")
    assert err.value.retry_after_s == 30
    assert "retry after 30 s" in str(err.value)
    with pytest.raises(SearchError, match="timed out"):
        await SearxngSearch(base_url=site.url("/slow"), timeout_s=0.3).search("q")


async def test_the_wrong_shape_is_an_error_not_empty_results(site: FixtureSite) -> None:
    json_page(site, "/search", {"nothing": "here"})
    with pytest.raises(SearchError, match="unexpected shape"):
        await TavilySearch(key="k", url=site.url("/search")).search("q")


def test_the_provider_is_chosen_by_config_with_its_key_by_variable_name() -> None:
    assert search_provider(WebConfig(), {}) is None
    brave = search_provider(WebConfig(search="brave", brave=BraveSearchConfig(
        api_key_env="MY_BRAVE")), {"MY_BRAVE": "k"})  # fmt: skip
    assert isinstance(brave, BraveSearch)
    with pytest.raises(WebUsageError, match=r"needs its key in \$TAVILY_API_KEY"):
        search_provider(WebConfig(search="tavily"), {})
    with pytest.raises(WebUsageError, match=r"\[web.searxng\] url"):
        search_provider(WebConfig(search="searxng"), {})
    searx = search_provider(WebConfig(search="searxng", searxng=SearxngConfig(
        url="http://127.0.0.1:8888")), {})  # fmt: skip
    assert isinstance(searx, SearxngSearch)
    assert set(WebConfig().secret_env_names()) == {None, "BRAVE_API_KEY", "TAVILY_API_KEY"}
