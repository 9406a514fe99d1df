"""A configured provider's models are pickable in the TUI (``/model`` and Ctrl+O take what
``--model`` takes), and picking one says that the session now uses it (later one-shot chats in
this directory's session use it too)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lemon_control_plane import ControlPlane, ControlPlaneOptions
from lemon_core.config import load_config
from lemon_runtime import Runtime

from .conftest import app_for, until
from .test_tui_commands import notes, run


@pytest.fixture
async def configured(tmp_path: Path) -> AsyncIterator[ControlPlane]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[providers.slow]\nkind = "openai_completions"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'models = ["fake-model"]\n'
    )
    work = tmp_path / "work"
    work.mkdir()
    loaded = load_config(home=home, cwd=work, environ={})
    options = [ControlPlaneOptions(port=0, cwd=str(work))]
    async with Runtime(profile="daemon", config=loaded, options=options) as runtime:
        plane = runtime.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        yield plane


async def test_model_takes_a_configured_providers_model_and_says_the_session_uses_it(
    configured: ControlPlane,
) -> None:
    app = app_for(configured)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await run(pilot, app, "/model")
        await until(pilot, lambda: "slow:fake-model" in notes(app), "listed")
        await run(pilot, app, "/model slow:fake-model")
        await until(pilot, lambda: app.model == "slow:fake-model", "set")
        assert "unknown model" not in notes(app)
        await until(
            pilot,
            lambda: "this session now uses slow:fake-model" in notes(app),
            "the note says the session's later chats use it",
        )


async def test_ctrl_o_picks_a_configured_providers_model(configured: ControlPlane) -> None:
    from lemon_tui._pickers import ModelPicker

    from .test_tui_pickers import opened

    app = app_for(configured)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        picker = await opened(pilot, app, "ctrl+o", ModelPicker)
        await pilot.press(*"fake-model")
        assert [m.ref for m in picker.shown] == ["slow:fake-model"]
        await pilot.press("enter")
        await until(pilot, lambda: app.model == "slow:fake-model", "taken")
        await until(pilot, lambda: "this session now uses slow:fake-model" in notes(app), "said so")
