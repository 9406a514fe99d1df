"""``[router]``: the router's own section; its lease ttl is its own key, not the gateway's."""

from __future__ import annotations

from pathlib import Path

import pytest

from lemon_core.config import ConfigError, load_config
from lemon_platform_test.executor import ScriptedExecutor
from lemon_platform_test.lifespans import hooks
from lemon_router import RouterSection, RouterSessionPort
from lemon_router._boot import lemon_router_app
from lemon_runtime import AppSpec, Runtime


def _loaded(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(text, encoding="utf-8")
    return load_config(home=home, cwd=tmp_path, environ={})


def test_the_router_declares_its_section_with_todays_default(tmp_path: Path) -> None:
    assert lemon_router_app.config_sections() == {"router": RouterSection}
    assert _loaded(tmp_path, "").section(RouterSection).lease_ttl_s == 15.0
    loaded = _loaded(tmp_path, "[router]\nlease_ttl_s = 2.5\n[gateway]\nlease_ttl_s = 9\n")
    assert loaded.section(RouterSection).lease_ttl_s == 2.5
    with pytest.raises(ConfigError, match=r"router\.lease_ttl_s: Expected `float` > 0\.0"):
        _loaded(tmp_path, "[router]\nlease_ttl_s = 0\n")
    with pytest.raises(ConfigError, match=r"router\.lease_ms: unknown key"):
        _loaded(tmp_path, "[router]\nlease_ms = 1\n")


async def test_the_router_boots_with_its_own_lease_ttl(tmp_path: Path) -> None:
    from lemon_core.capabilities import AGENT_RUNTIME
    from lemon_gateway._boot import lemon_gateway_app

    class _Agent:
        def __init__(self) -> None:
            self._executor = ScriptedExecutor()

        def executor(self) -> ScriptedExecutor:
            return self._executor

        def not_ready_reason(self) -> str | None:
            return None

    async def start(rt: Runtime) -> None:
        rt.context.capabilities.register(AGENT_RUNTIME, _Agent())

    agent = AppSpec(
        name="coding_agent",
        lifespan=hooks(start),
        profiles=frozenset({"full"}),
        provides=(AGENT_RUNTIME,),
    )
    apps = {
        "coding_agent": agent,
        "lemon_gateway": lemon_gateway_app,
        "lemon_router": lemon_router_app,
    }
    loaded = _loaded(tmp_path, "[router]\nlease_ttl_s = 2.5\n")
    async with Runtime(profile="full", config=loaded, apps=apps, store="memory") as rt:
        port: RouterSessionPort = rt.handle(lemon_router_app)
        assert port._router.config.lease_ttl_ms == 2500
