"""Fixtures for the webhook ingress tests: a secret, a request signer, and a daemon (the real
``daemon`` profile booted in-process, its control plane on 127.0.0.1:<ephemeral>) with
``[webhooks] enabled``."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from lemon_control_plane import ControlPlaneOptions
from lemon_core.config import load_config
from lemon_runtime import Runtime
from lemon_webhooks import WebhookSecret, sign_webhook

SECRET = WebhookSecret(b"k" * 32)
SECRET_ENV = "LEMON_TEST_HOOK_SECRET"


def signed_headers(
    body: bytes,
    *,
    key: str | None = "key-1",
    secret: WebhookSecret = SECRET,
    timestamp: int | None = None,
    msg_id: str | None = None,
) -> dict[str, str]:
    """The headers of a correctly signed webhook request (``key`` None: no Idempotency-Key)."""
    ts = int(time.time()) if timestamp is None else timestamp
    mid = msg_id or f"msg_{uuid.uuid4().hex}"
    headers = {
        "content-type": "application/json",
        "webhook-id": mid,
        "webhook-timestamp": str(ts),
        "webhook-signature": sign_webhook(secret, mid, ts, body),
    }
    if key is not None:
        headers["idempotency-key"] = key
    return headers


def body_of(prompt: str = "hello from a webhook", **extra: Any) -> bytes:
    return msgspec.json.encode({"prompt": prompt, **extra})


def write_home(home: Path, *, ingress: bool = True, secret: bool = True, extra: str = "") -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        "[webhooks]\n"
        f"enabled = {'true' if ingress else 'false'}\n"
        f"{extra}"
        "[[webhooks.endpoints]]\n"
        'id = "ci"\n'
        f'secret_env = "{SECRET_ENV}"\n',
        encoding="utf-8",
    )
    if secret:
        (home / "secrets.env").write_text(f"{SECRET_ENV}={SECRET.text()}\n", encoding="utf-8")


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def boot(tmp_path: Path, work: Path) -> Callable[..., Runtime]:
    def make(**home_options: Any) -> Runtime:
        home = tmp_path / "home"
        write_home(home, **home_options)
        loaded = load_config(home=home, cwd=work, environ={})
        settings = {"port": 0, "cwd": str(work)}
        return Runtime(
            profile="daemon", config=loaded, options=[ControlPlaneOptions(settings=settings)]
        )

    return make


@pytest.fixture
async def daemon(boot: Callable[..., Runtime]) -> AsyncIterator[Runtime]:
    async with boot() as runtime:
        yield runtime


@pytest.fixture(scope="session")
def sign() -> Callable[..., dict[str, str]]:
    """:func:`signed_headers` (the headers of a correctly signed request)."""
    return signed_headers


@pytest.fixture(scope="session")
def body() -> Callable[..., bytes]:
    """:func:`body_of` (a webhook request body)."""
    return body_of


@pytest.fixture(scope="session")
def make_home() -> Callable[..., None]:
    """:func:`write_home` (a home whose config enables ingress with the webhook ``ci``)."""
    return write_home
