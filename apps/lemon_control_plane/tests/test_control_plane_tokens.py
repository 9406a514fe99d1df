"""Tokens stored hashed under $LEMON_HOME: created, rotated and revoked; a token's scopes are
checked per method; a revoked token's open connections are closed and its reconnect refused."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed

from lemon_control_plane import ControlPlane, ControlPlaneConfig
from lemon_control_plane.testing import wire_client
from lemon_control_plane.tokens import TokenStore, tokens_path
from lemon_runtime import Runtime


def test_the_store_keeps_only_hashes(tmp_path: Path) -> None:
    store = TokenStore(tokens_path(tmp_path))
    entry, secret = store.create("laptop", ("read", "write"))
    text = store.path.read_text()
    assert secret not in text
    assert entry.hash in text
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert [t.id for t in store.entries()] == [entry.id]
    rotated, new_secret = store.rotate(entry.id)
    assert new_secret != secret
    assert rotated.hash != entry.hash
    assert store.revoke(entry.id).revoked_at_ms is not None
    with pytest.raises(ValueError, match="revoked"):
        store.rotate(entry.id)
    with pytest.raises(ValueError, match="scopes"):
        store.create("x", ("root",))
    with pytest.raises(KeyError):
        store.revoke("nope")


def test_a_stored_token_allows_a_public_bind() -> None:
    ControlPlaneConfig(host="0.0.0.0").check(stored_tokens=1)


async def test_stored_tokens_scopes_revocation_and_rotation(
    boot: Callable[..., Runtime], tmp_path: Path
) -> None:
    store = TokenStore(tokens_path(tmp_path / "home"))
    reader, read_secret = store.create("reader", ("read",))
    _, full_secret = store.create("full")
    async with boot() as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        open_client = wire_client(plane.ws_url)
        async with open_client(handshake=False) as anonymous:
            refused = await anonymous.connect()
            assert refused["error"]["code"] == "UNAUTHORIZED"
        async with open_client(handshake=False) as c:
            hello = await c.connect(auth={"token": read_secret})
            assert hello["auth"]["scopes"] == ["read"]
            denied = await c.request("chat.send", {"sessionKey": "s", "prompt": "x"})
            assert denied["error"]["code"] == "FORBIDDEN"
            assert (await c.request("sessions.list"))["ok"] is True
            async with open_client(handshake=False) as other:
                await other.connect(auth={"token": full_secret})
                store.revoke(reader.id)
                assert plane.refresh_tokens() == 1
                with pytest.raises(ConnectionClosed) as closed:
                    await c.drain()
                assert closed.value.rcvd is not None
                assert closed.value.rcvd.code == 4001
                assert (await other.request("health"))["ok"] is True, "others stay connected"
        async with open_client(handshake=False) as again:
            assert (await again.connect(auth={"token": read_secret}))["ok"] is False
        full = next(t for t in store.entries() if t.name == "full")
        _, rotated_secret = store.rotate(full.id)
        plane.refresh_tokens()
        async with open_client(handshake=False) as old:
            assert (await old.connect(auth={"token": full_secret}))["ok"] is False
        async with open_client(handshake=False) as new:
            hello = await new.connect(auth={"token": rotated_secret})
            assert "pairing" in hello["auth"]["scopes"]


def test_the_tokens_command_manages_the_store(tmp_path: Path) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "LEMON_HOME": str(tmp_path / "home")}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "lemon_control_plane", "tokens", *args],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )

    created = run("create", "phone", "--scopes", "read,approvals")
    assert created.returncode == 0, created.stderr
    secret = created.stdout.split("token (shown once): ")[1].strip()
    token_id = created.stdout.split()[2]
    store = TokenStore(tokens_path(tmp_path / "home"))
    (entry,) = store.entries()
    assert entry.scopes == ("approvals", "read")
    assert secret not in store.path.read_text()
    listed = run("list")
    assert token_id in listed.stdout
    assert secret not in listed.stdout
    assert run("revoke", token_id).returncode == 0
    assert "revoked" in run("list").stdout
    bad = run("rotate", "nope")
    assert bad.returncode == 2
    assert "no token" in bad.stderr
    assert "Traceback" not in bad.stderr


async def test_the_daemon_notices_a_revocation_written_by_another_process(
    boot: Callable[..., Runtime], tmp_path: Path
) -> None:
    store = TokenStore(tokens_path(tmp_path / "home"))
    entry, secret = store.create("laptop")
    async with boot(token_check_interval_s=0.05) as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        async with wire_client(plane.ws_url)(handshake=False) as c:
            assert (await c.connect(auth={"token": secret}))["type"] == "hello-ok"
            store.revoke(entry.id)  # as `python -m lemon_control_plane tokens revoke` does
            with pytest.raises(ConnectionClosed) as closed:
                await c.drain()
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 4001
