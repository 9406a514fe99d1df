"""``models.list`` over the real control plane lists every configured provider's models (its
``models = [...]``), marks catalogue providers with no key as unusable naming the variable,
and ``sessions.patch`` takes a configured provider's model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lemon_control_plane import ControlPlane, ControlPlaneOptions
from lemon_control_plane.testing import plane_client
from lemon_core.config import load_config
from lemon_runtime import Runtime

_CONFIG = """
[defaults]
model = "local:main"

[providers.local]
kind = "offline"
models = ["main"]

[providers.slow]
kind = "openai_completions"
base_url = "http://127.0.0.1:9/v1"
models = ["fake-model", "other-model"]

[providers.keyed]
kind = "openai_completions"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "KEYED_API_KEY_UNSET"
models = ["m1"]
"""


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[ControlPlane]:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(_CONFIG)
    loaded = load_config(home=home, cwd=tmp_path, environ={})
    options = [ControlPlaneOptions(port=0, cwd=str(tmp_path))]
    async with Runtime(profile="daemon", config=loaded, options=options) as runtime:
        found = runtime.handle("lemon_control_plane")
        assert isinstance(found, ControlPlane)
        yield found


async def test_models_list_names_every_configured_model_and_what_is_missing(
    plane: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with plane_client(plane)() as c:
        res = await c.request("models.list")
        assert res["ok"] is True, res
        rows = {row["id"]: row for row in res["payload"]["models"]}
        assert res["payload"]["summary"]["default"] == "local:main"
        assert rows["local:main"]["default"] is True
        for ref in ("slow:fake-model", "slow:other-model", "keyed:m1"):
            assert ref in rows, sorted(rows)
        assert rows["slow:fake-model"]["available"] is True
        assert rows["keyed:m1"]["available"] is True  # a local server may need no key

        openai = rows["openai:gpt-4o-mini"]
        assert openai["available"] is False
        assert "OPENAI_API_KEY" in openai["unavailableReason"]
        patched = await c.request(
            "sessions.patch", {"sessionKey": "agent:default:main", "model": "slow:fake-model"}
        )
        assert patched["ok"] is True, patched
