"""A loopback daemon is the owner's only: it requires the home's local token (created at first
start, 0600 in a 0700 folder, reused after), which the owner's clients read and another account
cannot; ``local_auth = false`` is the explicit, documented opt-out."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lemon_control_plane import ControlPlane
from lemon_control_plane.local_token import (
    client_token,
    ensure_local_token,
    local_token_path,
    read_local_token,
)
from lemon_control_plane.testing import wire_client
from lemon_platform_test.lemon_process import lemon_env, serve
from lemon_runtime import Runtime

ALL_SCOPES = ["admin", "approvals", "pairing", "read", "write"]


def _plane(runtime: Runtime) -> ControlPlane:
    plane = runtime.handle("lemon_control_plane")
    assert isinstance(plane, ControlPlane)
    return plane


async def test_a_loopback_daemon_refuses_a_connect_without_the_local_token(
    boot: Callable[..., Runtime], tmp_path: Path
) -> None:
    async with boot() as runtime:
        plane = _plane(runtime)
        assert plane.requires_token
        async with wire_client(plane.ws_url)(handshake=False, token=None) as anonymous:
            refused = await anonymous.connect()
        assert refused["ok"] is False
        assert refused["error"]["code"] == "UNAUTHORIZED"
        token = read_local_token(tmp_path / "home")
        assert token is not None
        assert token == plane.local_token
        async with wire_client(plane.ws_url)(handshake=False, token=None) as owner:
            hello = await owner.connect(auth={"token": token})
        assert hello["type"] == "hello-ok"
        assert hello["auth"]["scopes"] == ALL_SCOPES
        # Where Lemon's own terminal client would put a token (top-level params.token).
        async with wire_client(plane.ws_url)(handshake=False, token=None) as tui:
            assert (await tui.connect(token=token))["type"] == "hello-ok"


async def test_the_local_token_is_made_once_private_and_reused(
    boot: Callable[..., Runtime], tmp_path: Path
) -> None:
    home = tmp_path / "home"
    async with boot() as runtime:
        first = _plane(runtime).local_token
    path = local_token_path(home)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    async with boot() as runtime:
        assert _plane(runtime).local_token == first
    assert path.read_text().strip() == first


def test_a_local_token_others_could_read_is_replaced(tmp_path: Path) -> None:
    path = local_token_path(tmp_path)
    first = ensure_local_token(path)
    assert ensure_local_token(path) == first
    os.chmod(path, 0o644)
    assert read_local_token(tmp_path) is None  # never used once others could read it
    second = ensure_local_token(path)
    assert second != first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere")
    assert read_local_token(tmp_path) is None


def test_clients_take_the_environment_token_first_then_the_local_one(tmp_path: Path) -> None:
    assert client_token(tmp_path, {}) is None
    local = ensure_local_token(local_token_path(tmp_path))
    assert client_token(tmp_path, {}) == local
    assert client_token(tmp_path, {"LEMON_CONTROL_PLANE_TOKEN": "lcp_env"}) == "lcp_env"


async def test_local_auth_false_is_the_explicit_opt_out(boot: Callable[..., Runtime]) -> None:
    async with boot(local_auth=False) as runtime:
        plane = _plane(runtime)
        assert not plane.requires_token
        assert plane.local_token is None
        async with wire_client(plane.ws_url)(handshake=False, token=None) as c:
            assert (await c.connect())["type"] == "hello-ok"


# -- a real `lemon serve`, and another account -----------------------------------------------

#: A WebSocket client in the standard library only (another account may not be able to run
#: this environment's interpreter): connect, send one `connect`, print what came back.
_OTHER_ACCOUNT = textwrap.dedent(
    """
    import base64, json, os, socket, struct, sys
    home, port = sys.argv[1], int(sys.argv[2])
    out = {"uid": os.getuid()}
    try:
        with open(os.path.join(home, "control_plane", "local_token")) as f:
            out["token"] = f.read()
    except OSError as exc:
        out["read_error"] = type(exc).__name__
    def connect(params):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall((f"GET /ws HTTP/1.1\\r\\nHost: 127.0.0.1:{port}\\r\\nUpgrade: websocket\\r\\n"
                   f"Connection: Upgrade\\r\\nSec-WebSocket-Key: {key}\\r\\n"
                   "Sec-WebSocket-Version: 13\\r\\n\\r\\n").encode())
        head = b""
        while b"\\r\\n\\r\\n" not in head:
            head += s.recv(1)
        data = json.dumps({"type": "req", "id": "c1", "method": "connect",
                           "params": params}).encode()
        mask = os.urandom(4)
        if len(data) < 126:
            frame = bytes([0x81, 0x80 | len(data)]) + mask
        else:
            frame = bytes([0x81, 0x80 | 126]) + struct.pack("!H", len(data)) + mask
        s.sendall(frame + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
        def read(n):
            got = b""
            while len(got) < n:
                chunk = s.recv(n - len(got))
                if not chunk:
                    raise EOFError
                got += chunk
            return got
        first, size = read(2)
        size &= 0x7F
        if size == 126:
            size = struct.unpack("!H", read(2))[0]
        elif size == 127:
            size = struct.unpack("!Q", read(8))[0]
        return json.loads(read(size))
    out["anonymous"] = connect({"role": "operator"})
    out["guess"] = connect({"role": "operator", "auth": {"token": "lcp_local_guess"}})
    print(json.dumps(out))
    """
)


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """A folder every account may traverse (as a home under /home usually is), so that only
    the token's own folder and file modes keep another account out."""
    root = Path(tempfile.mkdtemp(prefix="lemon-local-token-"))
    os.chmod(root, 0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_real_lemon_serve_refuses_a_client_without_the_token(
    shared_root: Path, work: Path
) -> None:
    env = lemon_env(shared_root)
    with serve(env, work) as (_, url):
        port = int(url.rsplit(":", 1)[1])
        token_file = local_token_path(shared_root / "home")
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        seen = json.loads(
            subprocess.run(
                [sys.executable, "-c", _OTHER_ACCOUNT, str(shared_root / "home"), str(port)],
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            ).stdout
        )
    assert seen["anonymous"]["error"]["code"] == "UNAUTHORIZED"
    assert seen["guess"]["error"]["code"] == "UNAUTHORIZED"
    assert seen["token"].strip() == token_file.read_text().strip()  # the owner reads it


def _as_nobody() -> tuple[int, int, str] | None:
    """(uid, gid, a python the account can run) when this test can switch to ``nobody``."""
    if os.geteuid() != 0:
        return None
    python = shutil.which("python3", path="/usr/bin:/bin:/usr/local/bin")
    if python is None:
        return None
    try:
        import pwd

        entry = pwd.getpwnam("nobody")
    except (ImportError, KeyError):
        return None
    probe = subprocess.run(
        [python, "-c", "print(1)"],
        user=entry.pw_uid,
        group=entry.pw_gid,
        extra_groups=[],
        capture_output=True,
        check=False,
        timeout=30,
    )
    return (entry.pw_uid, entry.pw_gid, python) if probe.returncode == 0 else None


def test_another_account_cannot_read_the_token_or_drive_the_daemon(
    shared_root: Path, work: Path
) -> None:
    nobody = _as_nobody()
    if nobody is None:
        pytest.skip("needs root and a python3 the account nobody can run")
    uid, gid, python = nobody
    home = shared_root / "home"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)  # a home others may list, as many are
    env = lemon_env(shared_root)
    with serve(env, work) as (_, url):
        port = int(url.rsplit(":", 1)[1])
        ran = subprocess.run(
            [python, "-c", _OTHER_ACCOUNT, str(home), str(port)],
            user=uid,
            group=gid,
            extra_groups=[],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
            cwd="/",
        )
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    assert seen["uid"] == uid
    assert "token" not in seen
    assert seen["read_error"] == "PermissionError"
    assert seen["anonymous"]["ok"] is False
    assert seen["anonymous"]["error"]["code"] == "UNAUTHORIZED"
    assert seen["guess"]["error"]["code"] == "UNAUTHORIZED"
