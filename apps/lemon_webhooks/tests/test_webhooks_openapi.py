"""The webhook route's OpenAPI document, checked by schemathesis against a live ``lemon serve``:
generated requests (signed correctly about half the time, so the refusals and the
202/replay/422 answers are all exercised) must get documented statuses, content types, headers
and bodies, and never a server error. Few examples: every rule has its own test."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from lemon_platform_test.lemon_process import lemon_env, serve
from lemon_webhooks import webhook_openapi

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
OPERATION = schemathesis.openapi.from_dict(webhook_openapi(["ci"]))["/webhooks/{webhook_id}"][
    "POST"
]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, make_home: Callable[..., None]) -> Iterator[str]:
    root = tmp_path_factory.mktemp("openapi")
    home = root / "home"
    make_home(home)
    work = root / "work"
    work.mkdir()
    with serve(lemon_env(root, home=home), work, stderr=subprocess.DEVNULL) as (_proc, url):
        yield url


def test_the_served_document_is_the_documented_one(live: str) -> None:
    served = httpx.get(f"{live}/webhooks/openapi.json").json()
    assert served == webhook_openapi()


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=OPERATION.as_strategy(), signed=st.booleans(), key=st.sampled_from(["a", "b", None]))
def test_the_live_endpoint_conforms_to_its_openapi_document(
    live: str, sign: Callable[..., dict[str, str]], case: Any, signed: bool, key: str | None
) -> None:
    kwargs = case.as_transport_kwargs(base_url=live)
    headers: dict[str, str] = {k: str(v) for k, v in (kwargs.get("headers") or {}).items()}
    try:
        content = json.dumps(case.body).encode() if "json" in kwargs else b""
    except (TypeError, ValueError):
        content = b"not json"
    if signed:
        stamped = sign(content, key=key or f"gen-{uuid.uuid4().hex}")
        headers = {k: v for k, v in headers.items() if k.lower() not in stamped}
        headers.update(stamped)
    headers = {k: v for k, v in headers.items() if k.lower() != "content-length"}
    response = httpx.request(
        case.method, kwargs["url"], content=content, headers=headers, timeout=30
    )
    case.validate_response(response, checks=CHECKS)
