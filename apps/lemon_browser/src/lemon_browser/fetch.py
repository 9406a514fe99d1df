"""Fetching one URL for the model: guarded, bounded, converted.

:meth:`Fetcher.fetch` GETs a URL with httpx and returns a :class:`FetchedPage`:

* every hop (the URL, then each redirect, at most ``max_redirects``) is checked by the
  :class:`~lemon_browser.guard.AddressGuard` and connected to the *checked* address (the host
  name in ``Host`` and TLS SNI, so certificates are verified against the name);
* the whole fetch ends within ``timeout_s`` (a server that trickles bytes is cut off);
* the body is read as a stream and refused once it passes ``max_bytes`` *after*
  decompression (a gzip bomb stops at the bound); a ``Content-Length`` over it is refused
  before reading;
* HTML becomes Markdown, PDF text, JSON indented text, ``text/plain`` / ``text/markdown``
  stay text; any other type is refused naming it;
* the charset is the declared one (header, else ``<meta charset>``); a body that is not valid
  in it is read as UTF-8, else as Windows-1252 (what browsers do), never dropped.

A conditional fetch (``etag=``) sends ``If-None-Match``; a ``304`` comes back as a page with
``not_modified=True`` and no text (the caller keeps its copy).
"""

from __future__ import annotations

import asyncio
import codecs
import functools
import re
import ssl
import time
from dataclasses import dataclass
from typing import Final, Literal

import httpx

from lemon_browser.convert import Converted, html_to_markdown, json_to_text, pdf_to_text
from lemon_browser.errors import FetchFailed, FetchRefused
from lemon_browser.guard import AddressGuard, Target

__all__ = ["FetchLimits", "FetchedPage", "Fetcher", "PageKind"]

PageKind = Literal["html", "pdf", "json", "text"]

_KINDS: Final[dict[str, PageKind]] = {
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/pdf": "pdf",
    "application/json": "json",
    "text/json": "json",
    "text/plain": "text",
    "text/markdown": "text",
    "text/x-markdown": "text",
}
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_META_CHARSET: Final = re.compile(
    rb"<meta[^>]{0,200}?charset\s*=\s*[\"']?([A-Za-z0-9_.:-]{1,40})", re.I
)
_USER_AGENT: Final = "lemon-web-fetch/0.1 (+an AI assistant reading a page for its user)"


@dataclass(frozen=True, kw_only=True, slots=True)
class FetchLimits:
    """The bounds of one fetch."""

    max_bytes: int = 5 * 1024 * 1024
    timeout_s: float = 20.0
    max_redirects: int = 5


@dataclass(frozen=True, kw_only=True, slots=True)
class FetchedPage:
    """A fetched page as the model gets it, and what its card shows."""

    url: str
    """The URL asked for."""
    final_url: str
    """Where the last redirect led (``url`` when there was none)."""
    status: int
    kind: PageKind | None
    content_type: str
    text: str
    title: str
    bytes: int
    elapsed_s: float
    redirects: tuple[str, ...] = ()
    etag: str | None = None
    hidden_removed: int = 0
    not_modified: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class _Raw:
    """A response as read, before conversion (``kind`` None: 304 Not Modified)."""

    final_url: str
    status: int
    kind: PageKind | None
    content_type: str
    body: bytes
    charset: str | None
    etag: str | None
    redirects: tuple[str, ...]


def _kind(content_type: str) -> PageKind | None:
    mime = content_type.split(";", 1)[0].strip().lower()
    if mime in _KINDS:
        return _KINDS[mime]
    if mime.endswith("+json"):
        return "json"
    return None


def _charset(content_type: str, head: bytes, kind: PageKind) -> str | None:
    for part in content_type.split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip("\"'")
    if kind == "html":
        match = _META_CHARSET.search(head[:4096])
        if match:
            return match.group(1).decode("ascii")
    return None


def decode(data: bytes, charset: str | None) -> str:
    """``data`` as text: in ``charset`` when it is known and valid for the data, else UTF-8,
    else Windows-1252 (with replacement characters for what none of them decode)."""
    for candidate in (charset, "utf-8", "cp1252"):
        if not candidate:
            continue
        try:
            codecs.lookup(candidate)
            return data.decode(candidate)
        except (LookupError, UnicodeDecodeError):
            continue
    return data.decode("utf-8", errors="replace")


def _convert(kind: PageKind, data: bytes, charset: str | None, url: str) -> Converted:
    if kind == "pdf":
        return pdf_to_text(data)
    text = decode(data, charset)
    if kind == "html":
        return html_to_markdown(text, url)
    if kind == "json":
        return json_to_text(text)
    return Converted(text=text)


@functools.cache
def _tls() -> ssl.SSLContext:
    """The verifying TLS context every fetcher shares: loading the CA bundle takes tens of
    milliseconds (blocking), so it is done once per process, not per fetch. Certificates are
    verified against the name, as httpx's default context does."""
    return httpx.create_ssl_context()


class Fetcher:
    """Fetches URLs under a guard and limits (see the module docstring). Use as an async
    context manager, or call :meth:`aclose`; a ``transport`` is for tests and benchmarks."""

    def __init__(
        self,
        *,
        guard: AddressGuard,
        limits: FetchLimits | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.guard = guard
        self.limits = limits or FetchLimits()
        self._client = httpx.AsyncClient(
            follow_redirects=False,
            trust_env=False,  # a proxy would connect to the name, not the checked address
            timeout=httpx.Timeout(self.limits.timeout_s),
            headers={"User-Agent": _USER_AGENT, "Accept-Encoding": "gzip, deflate"},
            transport=transport,
            verify=_tls(),
        )

    async def __aenter__(self) -> Fetcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def fetch(self, url: str, *, etag: str | None = None) -> FetchedPage:
        """Fetch ``url``; raises ``FetchRefused`` / ``FetchFailed`` / ``WebUsageError`` with a
        message for the model."""
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.limits.timeout_s):
                raw = await self._fetch(url, etag)
        except TimeoutError:
            raise FetchFailed(
                f"fetching {url} did not finish within {self.limits.timeout_s:g} s; it was stopped"
            ) from None
        if raw.kind is None:  # 304 Not Modified: the caller keeps its copy
            return FetchedPage(url=url, final_url=raw.final_url, status=raw.status, kind=None,
                               content_type="", text="", title="", bytes=0,
                               elapsed_s=time.perf_counter() - started, redirects=raw.redirects,
                               etag=raw.etag, not_modified=True)  # fmt: skip
        converted = await asyncio.to_thread(
            _convert, raw.kind, raw.body, raw.charset, raw.final_url
        )
        return FetchedPage(url=url, final_url=raw.final_url, status=raw.status, kind=raw.kind,
                           content_type=raw.content_type, text=converted.text,
                           title=converted.title, bytes=len(raw.body),
                           elapsed_s=time.perf_counter() - started, redirects=raw.redirects,
                           etag=raw.etag, hidden_removed=converted.hidden_removed)  # fmt: skip

    async def _fetch(self, url: str, etag: str | None) -> _Raw:
        target = await self.guard.check(url)
        redirects: list[str] = []
        while True:
            headers = {"If-None-Match": etag} if etag and not redirects else {}
            request = self._request(target, headers)
            try:
                response = await self._client.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise FetchFailed(
                    f"could not fetch {target.url}: {str(exc) or type(exc).__name__}"
                ) from None
            try:
                if response.status_code in _REDIRECTS and "location" in response.headers:
                    location = target.url.join(response.headers["location"])
                    if len(redirects) >= self.limits.max_redirects:
                        raise FetchRefused(
                            f"{url} redirected more than {self.limits.max_redirects} times "
                            f"(last to {location}); not followed further",
                            reason="redirects",
                        )
                    redirects.append(str(location))
                    target = await self.guard.check(location)
                    continue
                return await self._read(target, response, tuple(redirects))
            finally:
                await response.aclose()

    def _request(self, target: Target, headers: dict[str, str]) -> httpx.Request:
        url = target.url
        default = {"http": 80, "https": 443}[url.scheme]
        host_header = url.host if target.port == default else f"{url.netloc.decode('ascii')}"
        request = self._client.build_request(
            "GET",
            url.copy_with(host=target.address),
            headers={"Host": host_header, **headers},
            extensions={"sni_hostname": target.host} if url.scheme == "https" else {},
        )
        return request

    async def _read(
        self, target: Target, response: httpx.Response, redirects: tuple[str, ...]
    ) -> _Raw:
        final = str(target.url)
        status = response.status_code
        etag = response.headers.get("etag")
        if status == 304:
            return _Raw(
                final_url=final,
                status=status,
                kind=None,
                content_type="",
                body=b"",
                charset=None,
                etag=etag,
                redirects=redirects,
            )
        if status >= 400:
            raise FetchFailed(
                f"{final} answered HTTP {status} {response.reason_phrase}".rstrip(), status=status
            )
        content_type = response.headers.get("content-type", "")
        kind = _kind(content_type)
        if kind is None:
            shown = content_type.split(";", 1)[0].strip() or "no content type"
            raise FetchRefused(
                f"{final} is {shown}; web_fetch reads HTML, PDF, JSON and plain text only",
                reason="content_type",
            )
        limit = self.limits.max_bytes
        declared = response.headers.get("content-length", "")
        if (
            declared.isdigit()
            and int(declared) > limit
            and "content-encoding" not in response.headers
        ):
            raise FetchRefused(
                f"{final} is {int(declared)} bytes, over the {limit}-byte bound ([web] max_bytes)",
                reason="too_large",
            )
        body = bytearray()
        try:
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > limit:
                    raise FetchRefused(
                        f"{final} is over the {limit}-byte bound ([web] max_bytes) once "
                        "decompressed; it was not read further",
                        reason="too_large",
                    )
        except httpx.HTTPError as exc:
            raise FetchFailed(f"reading {final} failed: {str(exc) or type(exc).__name__}") from None
        charset = _charset(content_type, bytes(body[:4096]), kind)
        return _Raw(
            final_url=final,
            status=status,
            kind=kind,
            content_type=content_type,
            body=bytes(body),
            charset=charset,
            etag=etag,
            redirects=redirects,
        )
