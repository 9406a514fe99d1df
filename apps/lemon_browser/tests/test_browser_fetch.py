"""The fetcher against a real HTTP server on 127.0.0.1: conversion of real-world-shaped pages,
redirects (each hop re-checked), bounds in size and time, charsets, DNS rebinding."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

import httpx
import pytest

from lemon_browser import AddressGuard, Fetcher, FetchFailed, FetchLimits, FetchRefused
from lemon_browser.testing import FixtureSite, SeenRequest, make_pdf, response_bytes

FIXTURES = Path(__file__).parent / "fixtures"


def fetcher_for(site: FixtureSite, **limits: float) -> Fetcher:
    return Fetcher(
        guard=AddressGuard(allow_hosts=[site.host_port]),
        limits=FetchLimits(**limits),  # type: ignore[arg-type]  # test-only kwargs
    )


@pytest.fixture
async def site() -> object:
    async with FixtureSite() as s:
        yield s


async def test_three_real_world_pages_become_markdown_with_their_links(site: FixtureSite) -> None:
    for name in ("article", "docs", "forum"):
        site.page(f"/{name}", (FIXTURES / f"{name}.html").read_text(encoding="utf-8"))
    async with fetcher_for(site) as fetcher:
        article = await fetcher.fetch(site.url("/article"))
        docs = await fetcher.fetch(site.url("/docs"))
        forum = await fetcher.fetch(site.url("/forum"))
    assert article.kind == "html"
    assert article.text.startswith("# Why SQLite WAL mode matters")
    assert "**readers do not block writers**" in article.text
    assert f"[official documentation]({site.url('/docs/wal.html')})" in article.text
    assert "Buy our course" not in article.text
    assert "Copyright" not in article.text
    assert "window.tracker" not in article.text
    assert "```\nasync with httpx.AsyncClient() as client:" in docs.text
    assert "| `timeout` | Timeout |" in docs.text
    for said in ("40-member workspace", "--verbose", "UV\\_HTTP\\_TIMEOUT", "30 seconds"):
        assert said in forum.text
    assert forum.title.startswith("Thread: uv lock is slow")


async def test_a_pdf_becomes_text(site: FixtureSite) -> None:
    site.page("/r.pdf", make_pdf(["Quarterly report", "Revenue grew"], title="Q3"),
              content_type="application/pdf")  # fmt: skip
    async with fetcher_for(site) as fetcher:
        page = await fetcher.fetch(site.url("/r.pdf"))
    assert page.kind == "pdf"
    assert page.text == "# Q3\n\nQuarterly report\nRevenue grew"


async def test_json_is_indented_and_other_types_are_refused_naming_the_type(
    site: FixtureSite,
) -> None:
    site.page("/a.json", json.dumps({"a": [1, 2], "b": "é"}), content_type="application/json")
    site.page("/x.bin", b"\x00\x01", content_type="application/octet-stream")
    async with fetcher_for(site) as fetcher:
        page = await fetcher.fetch(site.url("/a.json"))
        assert page.text == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": "é"\n}'
        with pytest.raises(FetchRefused, match="is application/octet-stream") as err:
            await fetcher.fetch(site.url("/x.bin"))
    assert err.value.reason == "content_type"


def chain(site: FixtureSite, length: int) -> str:
    for n in range(length, 0, -1):
        site.redirect(f"/r{n}", f"/r{n - 1}")
    site.page("/r0", "<html><body><p>the end of the chain</p></body></html>")
    return site.url(f"/r{length}")


async def test_five_redirects_are_followed_and_six_refused(site: FixtureSite) -> None:
    async with fetcher_for(site) as fetcher:
        page = await fetcher.fetch(chain(site, 5))
        assert "the end of the chain" in page.text
        assert page.final_url == site.url("/r0")
        assert len(page.redirects) == 5
        with pytest.raises(FetchRefused, match="more than 5 times") as err:
            await fetcher.fetch(chain(site, 6))
    assert err.value.reason == "redirects"


@pytest.mark.parametrize(
    "location",
    ["http://169.254.169.254/latest/meta-data/iam", "http://10.0.0.1/admin",
     "http://192.168.1.1/", "http://[::1]:{port}/", "http://localhost:{port}/",
     "file:///etc/passwd"],
)  # fmt: skip
async def test_a_redirect_to_an_internal_address_is_refused(
    site: FixtureSite, location: str
) -> None:
    # allow_hosts names 127.0.0.1:<port> only: the same server under another name or address,
    # and every internal address, stays refused on the redirect hop.
    site.redirect("/go", location.format(port=site.port))
    async with fetcher_for(site) as fetcher:
        with pytest.raises(FetchRefused):
            await fetcher.fetch(site.url("/go"))
    assert [r.path for r in site.requests] == ["/go"]


async def test_without_allow_hosts_the_loopback_server_is_refused(site: FixtureSite) -> None:
    site.page("/", "<p>hi</p>")
    async with Fetcher(guard=AddressGuard()) as fetcher:
        with pytest.raises(FetchRefused, match="loopback"):
            await fetcher.fetch(site.url("/"))
    assert site.requests == []


async def test_a_body_over_the_bound_is_refused(site: FixtureSite) -> None:
    site.page("/big", "<p>" + "x" * 5000 + "</p>")

    async def chunked(request: SeenRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                     b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")  # fmt: skip
        for _ in range(10):
            writer.write(b"400\r\n" + b"y" * 1024 + b"\r\n")
        writer.write(b"0\r\n\r\n")

    site.route("/chunked", chunked)
    async with fetcher_for(site, max_bytes=4096) as fetcher:
        with pytest.raises(FetchRefused, match="over the 4096-byte bound") as err:
            await fetcher.fetch(site.url("/big"))
        assert err.value.reason == "too_large"
        with pytest.raises(FetchRefused, match="once decompressed"):  # no Content-Length
            await fetcher.fetch(site.url("/chunked"))


async def test_a_gzip_bomb_stops_at_the_bound(site: FixtureSite) -> None:
    bomb = gzip.compress(b"<p>" + b"A" * (16 * 1024 * 1024) + b"</p>", compresslevel=9)
    assert len(bomb) < 100_000
    site.page("/bomb", bomb, headers={"Content-Encoding": "gzip"})
    async with fetcher_for(site, max_bytes=1024 * 1024) as fetcher:
        with pytest.raises(FetchRefused, match="once decompressed"):
            await fetcher.fetch(site.url("/bomb"))


async def test_a_slowloris_server_is_cut_off_at_the_deadline(site: FixtureSite) -> None:
    async def trickle(request: SeenRequest, writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n"
        )
        while not site.closing.is_set():  # one byte at a time, never finishing
            writer.write(b"a")
            await writer.drain()
            try:
                await asyncio.wait_for(site.closing.wait(), 0.05)
            except TimeoutError:
                continue

    site.route("/slow", trickle)
    async with fetcher_for(site, timeout_s=0.5) as fetcher:
        with pytest.raises(FetchFailed, match=r"did not finish within 0\.5 s"):
            await fetcher.fetch(site.url("/slow"))


async def test_a_wrong_charset_is_read_all_the_same(site: FixtureSite) -> None:
    latin = "<html><body><p>Caf\u00e9 cr\u00e8me, na\u00efve</p></body></html>".encode("cp1252")
    site.page("/declared-utf8", latin, content_type="text/html; charset=utf-8")
    site.page("/bogus", latin, content_type="text/html; charset=x-no-such-charset")
    site.page("/meta", b'<html><head><meta charset="windows-1252"></head>' + latin[6:],
              content_type="text/html")  # fmt: skip
    async with fetcher_for(site) as fetcher:
        for path in ("/declared-utf8", "/bogus", "/meta"):
            page = await fetcher.fetch(site.url(path))
            assert "Café crème, naïve" in page.text, path


async def test_http_errors_are_failures_with_the_status(site: FixtureSite) -> None:
    site.page("/gone", "gone", status=410, content_type="text/plain")
    async with fetcher_for(site) as fetcher:
        with pytest.raises(FetchFailed, match="HTTP 410") as err:
            await fetcher.fetch(site.url("/gone"))
    assert err.value.status == 410


async def test_an_etag_makes_a_conditional_request(site: FixtureSite) -> None:
    async def tagged(request: SeenRequest, writer: asyncio.StreamWriter) -> None:
        if request.headers.get("if-none-match") == '"v1"':
            writer.write(response_bytes(304, {"ETag": '"v1"'}, b""))
        else:
            writer.write(response_bytes(200, {"Content-Type": "text/plain", "ETag": '"v1"'},
                                        b"version one"))  # fmt: skip

    site.route("/t", tagged)
    async with fetcher_for(site) as fetcher:
        first = await fetcher.fetch(site.url("/t"))
        again = await fetcher.fetch(site.url("/t"), etag=first.etag)
    assert (first.text, first.etag) == ("version one", '"v1"')
    assert again.not_modified
    assert again.status == 304


class Rebinding:
    """Answers a public address the first time and loopback afterwards."""

    def __init__(self) -> None:
        self.calls = 0

    async def resolve(self, host: str, port: int) -> list[str]:
        self.calls += 1
        return ["93.184.215.14"] if self.calls == 1 else ["127.0.0.1"]


async def test_dns_rebinding_never_reaches_the_second_answer() -> None:
    # The connection goes to the address that was checked, never to a second resolution: the
    # transport (behind httpx's transport interface) records where each request was sent.
    seen: list[tuple[str, str, object]] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.host, request.headers["host"],
                     request.extensions.get("sni_hostname")))  # fmt: skip
        return httpx.Response(200, headers={"Content-Type": "text/plain"}, text="public page")

    resolver = Rebinding()
    fetcher = Fetcher(guard=AddressGuard(resolver=resolver), transport=httpx.MockTransport(record))
    async with fetcher:
        page = await fetcher.fetch("https://rebind.example/page")
        with pytest.raises(FetchRefused, match="loopback"):
            await fetcher.fetch("https://rebind.example/page")  # the second answer is checked
    assert page.text == "public page"
    assert seen == [("93.184.215.14", "rebind.example", "rebind.example")]
