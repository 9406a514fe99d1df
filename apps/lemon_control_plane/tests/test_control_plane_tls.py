"""TLS when configured: ``tls_cert`` / ``tls_key`` serve HTTPS and WSS on the same port (a
plain-HTTP request there gets nothing), a missing or half-configured pair is a clear error at
start, and the page's sign-in cookie is ``Secure`` over it. A self-signed certificate made for
the test (the ``openssl`` command; skipped without it), trusted by the client's context."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect

from lemon_control_plane import AUTH_COOKIE, ControlPlane, ControlPlaneConfig
from lemon_control_plane.errors import ControlPlaneConfigError
from lemon_control_plane.testing import WireClient, self_signed_certificate, trusting
from lemon_core.runtime_errors import AppHookError
from lemon_runtime import Runtime


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    made = self_signed_certificate(tmp_path)
    if made is None:
        pytest.skip("no openssl command to make a test certificate with")
    return made


async def test_tls_serves_https_and_wss_and_the_cookie_is_secure(
    boot: Callable[..., Runtime], certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    async with boot(tls_cert=str(cert), tls_key=str(key)) as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        assert plane.url.startswith("https://127.0.0.1:")
        assert plane.ws_url.startswith("wss://127.0.0.1:")
        context = trusting(cert)
        async with httpx.AsyncClient(verify=context) as http:
            assert (await http.get(plane.url + "/healthz")).json() == {"ok": True}
            signed = await http.post(
                plane.url + "/login",
                json={"token": plane.local_token},
                headers={"origin": plane.url},
            )
            assert signed.status_code == 200, signed.text
            header = signed.headers["set-cookie"]
            assert header.startswith(f"{AUTH_COOKIE}=")
            assert "Secure" in header
            assert str(plane.local_token) not in header
        async with connect(plane.ws_url, ssl=context) as ws:
            hello = await WireClient(ws, plane.local_token).connect()
        assert hello["type"] == "hello-ok"
        with pytest.raises(ssl.SSLCertVerificationError):  # an untrusting client refuses it
            async with connect(plane.ws_url, ssl=ssl.create_default_context()):
                pass
        async with httpx.AsyncClient() as plain:
            with pytest.raises(httpx.HTTPError):  # no plain HTTP on the TLS port
                await plain.get(plane.url.replace("https://", "http://") + "/healthz")


def test_tls_files_are_checked_with_a_clear_error(
    tmp_path: Path, certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    ControlPlaneConfig(tls_cert=str(cert), tls_key=str(key)).check()
    with pytest.raises(ControlPlaneConfigError, match="both tls_cert and tls_key"):
        ControlPlaneConfig(tls_cert=str(cert)).check()
    with pytest.raises(ControlPlaneConfigError, match=r"tls_key .* is not a file"):
        ControlPlaneConfig(tls_cert=str(cert), tls_key=str(tmp_path / "missing.pem")).check()


async def test_the_daemon_refuses_to_start_with_a_missing_or_bad_certificate(
    boot: Callable[..., Runtime], tmp_path: Path, certificate: tuple[Path, Path]
) -> None:
    runtime = boot(tls_cert=str(tmp_path / "nope.pem"), tls_key=str(tmp_path / "nope.key"))
    with pytest.raises(AppHookError, match=r"tls_cert .* is not a file"):
        await runtime.start()
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    runtime = boot(tls_cert=str(junk), tls_key=str(certificate[1]))
    with pytest.raises(AppHookError, match="cannot serve TLS"):
        await runtime.start()
