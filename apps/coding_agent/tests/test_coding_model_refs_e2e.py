"""Model references as a client sends them (``RunRequest.model``), through the booted runtime:
the session port, the router, the gateway and the coding executor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from coding_agent import resolve_model
from lemon_ai import UnknownModelError, default_catalogue
from lemon_core.capabilities import MODEL_CATALOG
from lemon_core.config import load_config
from lemon_core.execution import ALL_TOOLS, RunRequest, ToolPolicy
from lemon_core.sessions import SESSION_PORT, RunEnded, SessionPort
from lemon_runtime import Runtime

SESSION = "agent:default:main"


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    home = tmp_path / "home"
    home.mkdir()
    loaded = load_config(home=home, cwd=tmp_path, environ={})
    async with Runtime(profile="full", config=loaded) as booted:
        yield booted


async def _run(port: SessionPort, request: RunRequest) -> RunEnded:
    stream = port.watch(request.session_key)
    try:
        receipt = await port.submit(request)
        async for event in stream:
            if isinstance(event, RunEnded) and event.run_id == receipt.run_id:
                return event
    finally:
        stream.close()
    raise AssertionError("the stream ended before the run did")


async def test_an_offline_model_of_any_id_answers_through_the_session_port(
    runtime: Runtime, tmp_path: Path
) -> None:
    port = runtime.context.capabilities.require(SESSION_PORT)
    ended = await _run(
        port,
        RunRequest(
            origin="test",
            session_key=SESSION,
            prompt="/echo still offline",
            model="offline:other",
            cwd=str(tmp_path),
            tool_policy=ToolPolicy(),
            preapproved=frozenset({ALL_TOOLS}),
        ),
    )
    assert ended.ok, ended.error
    assert ended.answer == "still offline"
    assert ended.usage is not None
    assert ended.usage.model == "offline:other"


async def test_every_advertised_offline_model_resolves(runtime: Runtime) -> None:
    catalog = runtime.context.capabilities.require(MODEL_CATALOG)
    offline = [info.ref for info in catalog.models() if info.provider == "offline"]
    assert offline, "models.list advertises the offline model"
    config = load_config(home=runtime.home, cwd=runtime.home, environ={}).config
    for ref in offline:
        model, _provider = resolve_model(config, ref, environ={})
        assert (model.ref, model.api) == (ref, "offline")


def test_offline_references_resolve_to_the_offline_wire_and_the_error_stays_honest() -> None:
    catalogue = default_catalogue()
    assert catalogue.resolve("offline:other").api == "offline"
    with pytest.raises(UnknownModelError) as caught:
        catalogue.resolve("nosuch:model")
    # every provider the error lists as known must really resolve
    listed = str(caught.value).split("known providers: ")[1].split(".")[0].split(", ")
    for provider in listed:
        assert catalogue.resolve(f"{provider}:anything").provider == provider


async def test_a_hosted_model_without_its_key_fails_naming_the_variable(
    runtime: Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    port = runtime.context.capabilities.require(SESSION_PORT)
    ended = await _run(
        port,
        RunRequest(
            origin="test",
            session_key=SESSION,
            prompt="hi",
            model="openai:gpt-4o-mini",
            cwd=str(tmp_path),
            tool_policy=ToolPolicy(),
        ),
    )
    assert not ended.ok
    assert ended.error is not None
    assert "OPENAI_API_KEY is not set" in ended.error
    assert "cannot reach" not in ended.error  # nothing connected
    assert ended.error_code is not None
    assert ended.error_code.value == "provider_auth"
