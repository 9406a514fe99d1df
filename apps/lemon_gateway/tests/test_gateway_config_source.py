"""One source for ``[gateway]``: the config schema, GatewayConfig, boot and the README table."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from lemon_core.capabilities import AGENT_RUNTIME
from lemon_core.config import Config, load_config
from lemon_gateway import Gateway, GatewayConfig, GatewayConfigError
from lemon_gateway._boot import lemon_gateway_app
from lemon_platform_test.executor import ScriptedExecutor
from lemon_platform_test.lifespans import hooks
from lemon_runtime import AppSpec, Runtime

README = Path(__file__).resolve().parents[1] / "README.md"


def _schema_defaults() -> dict[str, object]:
    return {f.name: f.default for f in msgspec.structs.fields(GatewayConfig)}


def _readme_keys() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Bounds and defaults (`[gateway]`)", 1)[1].split("\n## ", 1)[0]
    keys: list[str] = []
    for line in section.splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            keys.extend(re.findall(r"`([a-z_]+)`", first_cell))
    return keys


def test_the_gateway_owns_its_section_and_takes_it_as_it_is() -> None:
    """One record for ``[gateway]``: the app's own section is what the gateway runs with."""
    assert lemon_gateway_app.config_sections() == {"gateway": GatewayConfig}
    assert "gateway" not in msgspec.structs.fields(Config).__repr__()


def test_gateway_readme_table_lists_exactly_the_schema_keys() -> None:
    keys = _readme_keys()
    assert len(keys) == len(set(keys)), keys
    assert sorted(keys) == sorted(_schema_defaults())


def test_gateway_config_checks_its_bounds_as_the_loader_does() -> None:
    settings = msgspec.convert(
        {"default_cwd": "/srv/work", "shared_slots": True, "store_timeout_s": 2},
        GatewayConfig,
    )
    assert (settings.default_cwd, settings.shared_slots, settings.store_timeout_s) == (
        "/srv/work",
        True,
        2.0,
    )
    assert settings.max_concurrent_runs == 2
    with pytest.raises(GatewayConfigError, match="unknown gateway settings"):
        GatewayConfig.from_mapping({"cancel_grace_s": 1.0})
    with pytest.raises(
        GatewayConfigError, match=r"gateway\.max_concurrent_runs: Expected `int` <= 1024"
    ):
        GatewayConfig(max_concurrent_runs=2000)


class _Agent:
    def __init__(self) -> None:
        self._executor = ScriptedExecutor()

    def executor(self) -> ScriptedExecutor:
        return self._executor

    def not_ready_reason(self) -> str | None:
        return None


async def test_gateway_boot_passes_default_cwd_and_the_other_keys(tmp_path: Path) -> None:
    home = tmp_path / "home"
    work = tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(
        f'[gateway]\ndefault_cwd = "{work}"\nshared_slots = true\nmax_pending_runs = 7\n',
        encoding="utf-8",
    )
    loaded = load_config(home=home, cwd=tmp_path, environ={})

    async def start_agent(rt: Runtime) -> None:
        rt.context.capabilities.register(AGENT_RUNTIME, _Agent())

    async def stop_agent(rt: Runtime, handle: object) -> None:
        return None

    agent = AppSpec(
        name="coding_agent",
        lifespan=hooks(start_agent, stop_agent),
        profiles=frozenset({"execution-only"}),
        provides=(AGENT_RUNTIME,),
    )
    apps = {"coding_agent": agent, "lemon_gateway": lemon_gateway_app}
    async with Runtime(profile="execution-only", config=loaded, apps=apps, store="memory") as rt:
        gateway = rt.handle("lemon_gateway")
        assert isinstance(gateway, Gateway)
        assert gateway.config.default_cwd == str(work)
        assert gateway.config.shared_slots is True
        assert gateway.config.max_pending_runs == 7
        assert gateway._resolve_cwd(None) == str(work)
