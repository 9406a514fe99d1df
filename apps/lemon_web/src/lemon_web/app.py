"""The page's ASGI application: the chat page, its static assets and its token login.

Routes (mounted at ``/``, the fallback of the daemon's server, so ``/healthz`` and ``/ws`` stay
the control plane's and other apps' longer prefixes win):

- ``GET /`` and ``GET /chat/<URL-encoded session key>``: the page (one HTML document; the page's
  script reads the session key from the path).
- ``GET /static/<name>``: the page's CSS and ES modules, and the vendored bundle built from the
  npm lock file (``scripts/build``); read once at start, gzip-compressed once, served with an
  ETag (``304`` on a match).
- ``POST /login`` ``{"token": "..."}``: on a bind that needs a token (every bind, unless
  ``local_auth`` is off on loopback), signs the page in with the control plane
  (:meth:`ControlPlane.sign_in`) and sets the HttpOnly, SameSite=Strict cookie
  :data:`~lemon_control_plane.AUTH_COOKIE` that the WebSocket upgrade carries: a random
  sign-in id, never the token, ``Secure`` when the request came over HTTPS. ``POST /logout``
  ends the sign-in and clears the cookie. Both refuse a request whose ``Origin`` is not this
  server. Failed sign-ins count with the control plane's other failed authentications, per
  client address (:attr:`ControlPlane.limiter`: 20 a minute, then 429 with ``Retry-After``
  for that address only, the one-time link included).
- ``GET /login?once=<nonce>[&next=/path]``: the one-time link ``lemon web`` opens (the nonce is
  minted by the daemon, works once, for two minutes): signs the browser in like a login and
  redirects (303) to ``next`` (a path of this server, default ``/``). A used, expired or
  unknown nonce is a 400 page saying to run ``lemon web`` again. Never cached, no referrer.
- anything else: ``404 {"error": "Not found"}``.

Every response carries a strict Content-Security-Policy (scripts and styles from this origin
only, no inline script, images from this origin or ``data:``): the page renders untrusted model
output through a sanitizer, and the policy is the second fence should one ever let something by.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
from dataclasses import dataclass
from importlib import resources
from typing import Final, Protocol

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from lemon_control_plane import AUTH_COOKIE, SignIn
from lemon_web.errors import WebError

__all__ = [
    "LIVE_SEGMENT_BYTES",
    "MAX_EVENT_BYTES",
    "PAGE_CACHE_ITEMS",
    "PANE_QUEUE_ENTRIES",
    "TERMINAL_TOMBSTONES",
    "TokenCheck",
    "WebApp",
]

#: Seed 003's bounds of the browser pane (the page's script enforces the same numbers; a test
#: reads them from the page and compares).
PANE_QUEUE_ENTRIES: Final = 256
MAX_EVENT_BYTES: Final = 65_536
LIVE_SEGMENT_BYTES: Final = 65_536
PAGE_CACHE_ITEMS: Final = 400
TERMINAL_TOMBSTONES: Final = 128

_TYPES: Final = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".html": "text/html; charset=utf-8",
}
_CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
_HEADERS: Final = {
    "content-security-policy": _CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}
_MAX_LOGIN_BYTES: Final = 4096


class TokenCheck(Protocol):
    """What the page needs of the control plane (the running ``ControlPlane`` is one): its
    sign-ins, kept server-side, the cookie only naming one."""

    @property
    def requires_token(self) -> bool: ...

    def sign_in(self, token: object, *, address: str | None = None) -> SignIn: ...

    def sign_in_once(self, nonce: object, *, address: str | None = None) -> SignIn: ...

    def sign_out(self, session: object) -> None: ...


@dataclass(frozen=True, slots=True)
class _Asset:
    body: bytes
    gzipped: bytes
    etag: str
    media_type: str


def _asset(name: str, body: bytes) -> _Asset:
    suffix = name[name.rfind(".") :]
    return _Asset(
        body=body,
        gzipped=gzip.compress(body, compresslevel=9, mtime=0),
        etag='"' + hashlib.sha256(body).hexdigest()[:32] + '"',
        media_type=_TYPES.get(suffix, "application/octet-stream"),
    )


def load_assets() -> dict[str, _Asset]:
    """Every file of the package's ``static`` folder, by name."""
    folder = resources.files("lemon_web") / "static"
    found: dict[str, _Asset] = {}
    for entry in folder.iterdir():
        if entry.is_file() and not entry.name.startswith("."):
            found[entry.name] = _asset(entry.name, entry.read_bytes())
    for needed in ("index.html", "app.js", "vendor.js", "style.css"):
        if needed not in found:
            raise WebError(
                f"the page asset static/{needed} is missing from lemon_web; reinstall the "
                "package (the vendored bundle is rebuilt by apps/lemon_web/scripts/build)"
            )
    return found


class WebApp:
    """The page's ASGI application (see the module docstring)."""

    def __init__(self, plane: TokenCheck) -> None:
        self._plane = plane
        self._assets = load_assets()
        self._app = Starlette(
            routes=[
                Route("/", self._page, methods=["GET", "HEAD"]),
                Route("/chat/{key:path}", self._page, methods=["GET", "HEAD"]),
                Route("/static/{name}", self._static, methods=["GET", "HEAD"]),
                Route("/login", self._login, methods=["POST"]),
                Route("/login", self._login_once, methods=["GET"]),
                Route("/logout", self._logout, methods=["POST"]),
            ],
            exception_handlers={404: self._not_found, 405: self._not_allowed},
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # a WebSocket on a path that is not /ws
            await send({"type": "websocket.close", "code": 1008})
            return
        await self._app(scope, receive, send)

    def page_weight(self) -> dict[str, int]:
        """Bytes of what a first visit downloads, gzip-compressed, by asset (and ``total``)."""
        weights = {name: len(a.gzipped) for name, a in self._assets.items() if name != "icon.svg"}
        weights["total"] = sum(weights.values())
        return weights

    # -- routes -------------------------------------------------------------------------------

    def _serve(self, request: Request, asset: _Asset) -> Response:
        headers = dict(_HEADERS)
        headers["etag"] = asset.etag
        headers["vary"] = "accept-encoding"
        if request.headers.get("if-none-match") == asset.etag:
            return Response(status_code=304, headers=headers)
        body = asset.body
        if "gzip" in request.headers.get("accept-encoding", ""):
            body = asset.gzipped
            headers["content-encoding"] = "gzip"
        return Response(body, media_type=asset.media_type, headers=headers)

    async def _page(self, request: Request) -> Response:
        return self._serve(request, self._assets["index.html"])

    async def _static(self, request: Request) -> Response:
        asset = self._assets.get(request.path_params["name"])
        if asset is None or request.path_params["name"] == "index.html":
            return await self._not_found(request, None)
        return self._serve(request, asset)

    def _same_origin(self, request: Request) -> bool:
        origin = request.headers.get("origin")
        host = request.headers.get("host")
        if origin is None or host is None:
            return False
        scheme, _, rest = origin.partition("://")
        return scheme in ("http", "https") and rest == host

    async def _login(self, request: Request) -> Response:
        if not self._same_origin(request):
            return _error(403, "login is accepted from this server's own page only")
        if not self._plane.requires_token:
            return JSONResponse({"ok": True, "required": False}, headers=_HEADERS)
        raw = b""
        async for chunk in request.stream():  # bounded: never read a large body whole
            raw += chunk
            if len(raw) > _MAX_LOGIN_BYTES:
                return _error(413, "the login request is too large")
        try:
            body = json.loads(raw)
        except ValueError:
            return _error(400, 'send JSON: {"token": "lcp_..."}')
        token = body.get("token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token.strip():
            return _error(400, 'send JSON: {"token": "lcp_..."} with the token')
        signed = self._plane.sign_in(token.strip(), address=_address(request))
        if signed.refused == "rate_limited":
            return _limited(signed)
        if signed.session is None:
            return _error(401, "that token is not valid (revoked, rotated or mistyped)")
        response = JSONResponse({"ok": True, "required": True}, headers=_HEADERS)
        _set_session(response, request, signed.session)
        return response

    async def _login_once(self, request: Request) -> Response:
        nonce = request.query_params.get("once")
        signed = self._plane.sign_in_once(nonce, address=_address(request)) if nonce else None
        if signed is not None and signed.refused == "rate_limited":
            return _limited(signed)
        if signed is None or signed.session is None:
            return PlainTextResponse(
                "This sign-in link was already used, has expired, or is not one. Run "
                "`lemon web` again for a new one.\n",
                status_code=400,
                headers={**_HEADERS, "cache-control": "no-store"},
            )
        target = request.query_params.get("next") or "/"
        if not target.startswith("/") or target.startswith("//") or "\\" in target:
            target = "/"  # a path of this server only: never a redirect elsewhere
        response = RedirectResponse(
            target, status_code=303, headers={**_HEADERS, "cache-control": "no-store"}
        )
        _set_session(response, request, signed.session)
        return response

    async def _logout(self, request: Request) -> Response:
        if not self._same_origin(request):
            return _error(403, "logout is accepted from this server's own page only")
        self._plane.sign_out(request.cookies.get(AUTH_COOKIE))
        response = JSONResponse({"ok": True}, headers=_HEADERS)
        response.delete_cookie(AUTH_COOKIE, path="/", httponly=True, samesite="strict")
        return response

    async def _not_found(self, request: Request, exc: Exception | None) -> Response:
        return _error(404, "Not found")

    async def _not_allowed(self, request: Request, exc: Exception | None) -> Response:
        return _error(405, "Method not allowed")


def _limited(signed: SignIn) -> Response:
    response = _error(
        429, "too many failed sign-ins from this address; wait a minute and try again"
    )
    response.headers["retry-after"] = str(max(1, math.ceil(signed.retry_after_s)))
    return response


def _address(request: Request) -> str | None:
    return request.client.host if request.client is not None else None


def _set_session(response: Response, request: Request, session: str) -> None:
    """The sign-in cookie: the session id only, HttpOnly, SameSite=Strict, Secure on HTTPS."""
    response.set_cookie(
        AUTH_COOKIE,
        session,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status, headers=_HEADERS)
