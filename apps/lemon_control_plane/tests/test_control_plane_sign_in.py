"""Browser sign-ins: the cookie names a server-side sign-in (bounded, expiring, dropped when
its token is revoked), and a one-time link (what ``lemon web`` opens) signs a browser in once,
within its lifetime, with the scopes of whoever minted it (the admin-scoped
``auth.loginNonce``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from websockets.asyncio.client import connect

from lemon_control_plane import AUTH_COOKIE, ControlPlane, ControlPlaneConfig
from lemon_control_plane._logins import BrowserLogins, Grant
from lemon_control_plane.testing import WireClient, plane_client, wire_client
from lemon_control_plane.tokens import TokenStore, tokens_path
from lemon_core.sessions import SESSION_PORT
from lemon_runtime import Runtime


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _plane(runtime: Runtime) -> ControlPlane:
    plane = runtime.handle("lemon_control_plane")
    assert isinstance(plane, ControlPlane)
    return plane


async def _cookie_connect(plane: ControlPlane, session: str) -> dict[str, object]:
    cookie = {"Cookie": f"{AUTH_COOKIE}={session}"}
    async with connect(plane.ws_url, additional_headers=cookie) as ws:
        return await WireClient(ws).connect()


async def test_a_sign_in_ends_when_its_token_is_revoked(
    boot: Callable[..., Runtime], tmp_path: Path
) -> None:
    store = TokenStore(tokens_path(tmp_path / "home"))
    entry, secret = store.create("browser", ("read", "write"))
    async with boot() as runtime:
        plane = _plane(runtime)
        signed = plane.sign_in(secret)
        assert signed.session is not None
        hello = await _cookie_connect(plane, signed.session)
        assert hello["auth"] == {
            "role": "operator",
            "scopes": ["read", "write"],
            "clientId": "lemon-tui@local-1",
        }
        store.revoke(entry.id)
        plane.refresh_tokens()
        assert plane.access_statistics()["logins"]["sessions"] == 0
        refused = await _cookie_connect(plane, signed.session)
        assert refused["error"]["code"] == "UNAUTHORIZED"


async def test_a_login_link_signs_in_once_within_its_lifetime(
    boot: Callable[..., Runtime],
) -> None:
    clock = Clock()
    async with boot() as runtime:
        port = runtime.context.capabilities.require(SESSION_PORT)
        plane = ControlPlane(port, ControlPlaneConfig(port=0, login_link_ttl_s=120), clock=clock)
        async with plane:
            nonce = plane.login_link()
            signed = plane.sign_in_once(nonce)
            assert signed.session is not None
            assert (await _cookie_connect(plane, signed.session))["type"] == "hello-ok"
            assert plane.sign_in_once(nonce).refused == "invalid"  # used up
            late = plane.login_link()
            clock.now += 121
            assert plane.sign_in_once(late).refused == "invalid"  # expired
            assert plane.sign_in_once("made-up").refused == "invalid"


async def test_only_an_admin_connection_mints_a_link_and_it_carries_its_scopes(
    boot: Callable[..., Runtime], tmp_path: Path
) -> None:
    store = TokenStore(tokens_path(tmp_path / "home"))
    _, reader = store.create("reader", ("read",))
    async with boot() as runtime:
        plane = _plane(runtime)
        async with wire_client(plane.ws_url, token=reader)() as c:
            denied = await c.request("auth.loginNonce")
        assert denied["error"]["code"] == "FORBIDDEN"
        async with plane_client(plane)(handshake=False) as c:
            await c.connect(scopes=["admin", "read"])
            minted = await c.call("auth.loginNonce")
        assert minted["expiresInMs"] == 120_000
        signed = plane.sign_in_once(minted["nonce"])
        assert signed.session is not None
        hello = await _cookie_connect(plane, signed.session)
        assert hello["auth"]["scopes"] == ["admin", "read"]  # never more than the minter's


def test_sign_ins_are_bounded_and_expire() -> None:
    clock = Clock()
    logins = BrowserLogins(max_sessions=3, ttl_s=60, link_ttl_s=10, max_links=2, clock=clock)
    grant = Grant(token_id="t", token_hash="h", scopes=frozenset({"read"}))
    ids = [logins.open(grant) for _ in range(5)]
    assert [logins.session(i) for i in ids] == [None, None, grant, grant, grant]
    assert logins.statistics().evicted == 2
    clock.now += 61
    assert logins.session(ids[-1]) is None
    links = [logins.link(grant) for _ in range(3)]
    assert logins.redeem(links[0]) is None  # the oldest was dropped beyond 2
    assert logins.redeem(links[2]) == grant
    assert logins.redeem(links[2]) is None
    other = Grant(token_id="u", token_hash="k", scopes=frozenset())
    keep = logins.open(other)
    logins.open(grant)
    assert logins.retain(lambda g: g.token_id == "u") == 2  # a session and a waiting link
    assert logins.session(keep) == other
