"""The web page cache: bounded in pages and characters, sessions apart, freshness by clock."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from coding_agent.tools.web import PageCache
from lemon_browser import FetchedPage


def _page(url: str, size: int) -> FetchedPage:
    return FetchedPage(url=url, final_url=url, status=200, kind="text", content_type="text/plain",
                       text="x" * size, title="", bytes=size, elapsed_s=0.0)  # fmt: skip


@given(st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 20), st.integers(0, 500)),
                max_size=60))  # fmt: skip
def test_the_cache_never_exceeds_its_bounds(puts: list[tuple[str, int, int]]) -> None:
    cache = PageCache(max_entries=8, max_chars=2000)
    for session, n, size in puts:
        cache.put(session, f"u{n}", _page(f"u{n}", size))
        stats = cache.statistics()
        assert stats.entries <= 8
        assert stats.chars <= 2000
        assert stats.chars == sum(
            len(e.page.text)
            for e in cache._entries.values()  # the invariant itself
        )


def test_sessions_never_see_each_others_pages_and_entries_go_stale() -> None:
    now = [0.0]
    cache = PageCache(clock=lambda: now[0])
    entry = cache.put("s1", "https://e.org/", _page("https://e.org/", 3))
    assert cache.get("s2", "https://e.org/") is None
    assert cache.get("s1", "https://e.org/") is entry
    assert cache.fresh(entry, 900)
    now[0] = 901.0
    assert not cache.fresh(entry, 900)
