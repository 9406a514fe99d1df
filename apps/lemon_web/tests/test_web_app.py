"""The page's HTTP side over the booted daemon: routes, headers, compression and revalidation,
the login endpoint's origin check, and the mount's lifecycle."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from lemon_control_plane import AUTH_COOKIE, ControlPlane, ControlPlaneConfig
from lemon_core.sessions import SESSION_PORT
from lemon_web import WebApp

pytestmark = pytest.mark.asyncio(loop_scope="module")

APP = Path(__file__).resolve().parents[1]
STATIC = APP / "src" / "lemon_web" / "static"


async def test_the_page_is_served_at_root_and_by_session_url(daemon: ControlPlane) -> None:
    async with httpx.AsyncClient(base_url=daemon.url) as http:
        root = await http.get("/")
        by_key = await http.get("/chat/agent%3Adefault%3Aweb%3Abrowser%3Aunknown%3Atab-1")
        assert root.status_code == by_key.status_code == 200
        assert root.text == by_key.text
        assert root.headers["content-type"].startswith("text/html")
        assert '<script type="module" src="/static/app.js">' in root.text
        csp = root.headers["content-security-policy"]
        assert "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert "frame-ancestors 'none'" in csp
        assert root.headers["x-content-type-options"] == "nosniff"
        assert (await http.get("/healthz")).json() == {"ok": True}  # still the plane's


async def test_static_assets_are_compressed_and_revalidated(daemon: ControlPlane) -> None:
    async with httpx.AsyncClient(base_url=daemon.url) as http:
        script = await http.get("/static/app.js", headers={"accept-encoding": "gzip"})
        assert script.status_code == 200
        assert script.headers["content-type"].startswith("text/javascript")
        assert script.headers["content-encoding"] == "gzip"
        assert script.text == (STATIC / "app.js").read_text()  # httpx decodes the gzip
        again = await http.get("/static/app.js", headers={"if-none-match": script.headers["etag"]})
        assert again.status_code == 304
        for missing in ("/static/nope.js", "/static/index.html", "/nope", "/chatx"):
            response = await http.get(missing)
            assert response.status_code == 404, missing
            assert response.json() == {"error": "Not found"}
        assert (await http.post("/")).status_code == 405


async def test_login_wants_the_pages_own_origin_and_a_token_on_loopback_too(
    daemon: ControlPlane,
) -> None:
    async with httpx.AsyncClient(base_url=daemon.url) as http:
        no_origin = await http.post("/login", json={"token": "x"})
        assert no_origin.status_code == 403
        assert "own page" in no_origin.json()["error"]
        wrong = await http.post("/login", json={"token": "x"}, headers={"origin": daemon.url})
        assert wrong.status_code == 401
        assert "set-cookie" not in wrong.headers
        own = await http.post(
            "/login", json={"token": daemon.local_token}, headers={"origin": daemon.url}
        )
        assert own.json() == {"ok": True, "required": True}
        assert AUTH_COOKIE in own.cookies


async def test_login_is_not_needed_where_local_auth_is_off(runtime_at: Any, tmp_path: Path) -> None:
    async with runtime_at(tmp_path / "open-home", local_auth=False) as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        async with httpx.AsyncClient(base_url=plane.url) as http:
            own = await http.post("/login", json={"token": "x"}, headers={"origin": plane.url})
        assert own.json() == {"ok": True, "required": False}
        assert "set-cookie" not in own.headers


async def test_the_daemon_profile_mounts_the_page_and_unmounts_it_at_stop(
    runtime_at: Any, tmp_path: Path
) -> None:
    runtime = runtime_at(tmp_path / "home")
    async with runtime:
        web = runtime.handle("lemon_web")
        assert isinstance(web, WebApp)
        mount = runtime.mounts.resolve("/chat/x")
        assert mount is not None
        assert mount.owner == "lemon_web"
    assert runtime.mounts.resolve("/") is None


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_failed_sign_ins_are_limited_per_client_address(
    runtime_at: Any, tmp_path: Path
) -> None:
    clock = _Clock()
    async with runtime_at(tmp_path / "limits-home") as runtime:
        port = runtime.context.capabilities.require(SESSION_PORT)
        config = ControlPlaneConfig(port=0, auth_failures=20, auth_window_s=60.0)
        plane = ControlPlane(port, config, clock=clock)
        web = WebApp(plane)
        headers = {"origin": "http://page.test", "host": "page.test"}

        def client(address: str) -> httpx.AsyncClient:
            transport = httpx.ASGITransport(app=web, client=(address, 40000))
            return httpx.AsyncClient(transport=transport, base_url="http://page.test")

        async with client("203.0.113.7") as attacker, client("198.51.100.2") as owner:
            for _ in range(20):
                wrong = await attacker.post("/login", json={"token": "wrong"}, headers=headers)
                assert wrong.status_code == 401
            right = {"token": plane.local_token}
            limited = await attacker.post("/login", json=right, headers=headers)
            assert limited.status_code == 429
            assert limited.headers["retry-after"] == "60"
            assert "wait a minute" in limited.json()["error"]
            link = await attacker.get(f"/login?once={plane.login_link()}")
            assert link.status_code == 429  # the one-time link is refused there too
            mine = await owner.post("/login", json=right, headers=headers)
            assert mine.status_code == 200  # another address is not locked out
            clock.now += 61
            again = await attacker.post("/login", json=right, headers=headers)
            assert again.status_code == 200


async def test_the_sign_in_cookie_is_a_random_id_and_secure_over_https(
    daemon: ControlPlane,
) -> None:
    token = daemon.local_token
    assert token is not None
    transport = httpx.ASGITransport(app=WebApp(daemon))
    for scheme in ("http", "https"):
        base = f"{scheme}://page.test"
        headers = {"origin": base, "host": "page.test"}
        async with httpx.AsyncClient(transport=transport, base_url=base) as http:
            signed = await http.post("/login", json={"token": token}, headers=headers)
            assert signed.status_code == 200
            header = signed.headers["set-cookie"]
            assert token not in header  # the cookie never carries the token
            assert ("Secure" in header) == (scheme == "https"), header
            assert "HttpOnly" in header
            session = signed.cookies[AUTH_COOKIE]
            assert daemon.logins.session(session) is not None
            out = await http.post("/logout", headers=headers)
            assert out.status_code == 200
            assert daemon.logins.session(session) is None  # signed out on the server too


async def test_the_one_time_link_signs_in_once_and_goes_to_the_page(daemon: ControlPlane) -> None:
    async with httpx.AsyncClient(base_url=daemon.url) as http:
        nonce = daemon.login_link()
        key = "/chat/agent%3Adefault%3Amain"
        first = await http.get(f"/login?once={nonce}&next={quote(key, safe='')}")
        assert first.status_code == 303
        assert first.headers["location"] == key
        assert first.headers["cache-control"] == "no-store"
        assert first.headers["referrer-policy"] == "no-referrer"
        header = first.headers["set-cookie"]
        assert "HttpOnly" in header
        assert "samesite=strict" in header.lower()
        assert daemon.logins.session(first.cookies[AUTH_COOKIE]) is not None
        again = await http.get(f"/login?once={nonce}")
        assert again.status_code == 400
        assert "lemon web" in again.text
        assert "set-cookie" not in again.headers
        elsewhere = await http.get(f"/login?once={daemon.login_link()}&next=//evil.example/x")
        assert elsewhere.headers["location"] == "/"  # only a path of this server
        assert (await http.get("/login")).status_code == 400
