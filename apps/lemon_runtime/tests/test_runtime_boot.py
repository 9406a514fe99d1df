"""lemon_runtime: profiles resolved from app specs, dependency order, reverse stop, and a
failing hook stopping what was started."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lemon_core.config import ConfigError, LoadedConfig, load_config
from lemon_core.execution import Capability, CapabilityMissingError
from lemon_core.runtime_errors import AppHookError, RuntimeBootError, RuntimeUsageError
from lemon_infra import MemoryStore
from lemon_platform_test.lifespans import hooks
from lemon_runtime import AppSpec, Runtime, resolve_profile, store_path


class Marker:
    def __init__(self, name: str) -> None:
        self.name = name


MARKER: Capability[Marker] = Capability("Marker", Marker)


def recorder(log: list[str]) -> dict[str, AppSpec]:
    def app(
        name: str, requires: tuple[str, ...], profiles: set[str], fail: bool = False
    ) -> AppSpec:
        async def start(rt: Runtime) -> str:
            assert rt.bus.running()
            if fail:
                raise RuntimeError(f"{name} cannot start: port in use")
            log.append(f"start {name}")
            return f"handle-{name}"

        async def stop(rt: Runtime, handle: object) -> None:
            assert handle == f"handle-{name}"
            log.append(f"stop {name}")

        return AppSpec(
            name=name, lifespan=hooks(start, stop), requires=requires, profiles=frozenset(profiles)
        )

    return {
        "store_app": app("store_app", (), set()),
        "gateway": app("gateway", ("agent",), {"execution-only", "full"}),
        "agent": app("agent", ("store_app",), {"execution-only", "full"}),
        "router": app("router", ("gateway",), {"full"}),
    }


@pytest.fixture
def loaded(tmp_path: Path) -> LoadedConfig:
    return load_config(home=tmp_path / "home", cwd=tmp_path, environ={})


async def test_full_profile_starts_in_dependency_order_and_stops_in_reverse(
    loaded: LoadedConfig,
) -> None:
    log: list[str] = []
    runtime = Runtime(profile="full", config=loaded, apps=recorder(log), store="memory")
    assert runtime.apps == ("store_app", "agent", "gateway", "router")
    async with runtime:
        assert runtime.state == "running"
        assert runtime.handle("router") == "handle-router"
        assert isinstance(runtime.store, MemoryStore)
    assert log == [
        "start store_app",
        "start agent",
        "start gateway",
        "start router",
        "stop router",
        "stop gateway",
        "stop agent",
        "stop store_app",
    ]
    assert runtime.state == "stopped"


async def test_execution_only_leaves_the_router_out(loaded: LoadedConfig) -> None:
    log: list[str] = []
    async with Runtime(
        profile="execution-only", config=loaded, apps=recorder(log), store="memory"
    ) as runtime:
        assert runtime.apps == ("store_app", "agent", "gateway")
        with pytest.raises(RuntimeUsageError, match="not started"):
            runtime.handle("router")


async def test_a_failing_start_hook_stops_what_was_started(loaded: LoadedConfig) -> None:
    log: list[str] = []
    apps = recorder(log)
    base = apps["gateway"]

    async def broken(rt: Runtime) -> object:
        raise RuntimeError("port 4040 in use")

    apps["gateway"] = AppSpec(
        name="gateway", lifespan=hooks(broken), requires=base.requires, profiles=base.profiles
    )
    runtime = Runtime(profile="full", config=loaded, apps=apps, store="memory")
    with pytest.raises(AppHookError, match=r"app 'gateway' failed to start: .*port 4040") as info:
        await runtime.start()
    assert info.value.app == "gateway"
    assert info.value.hook == "start"
    assert log == ["start store_app", "start agent", "stop agent", "stop store_app"]
    assert runtime.state == "failed"
    await runtime.stop()  # harmless


async def test_a_failing_stop_hook_still_stops_the_others(loaded: LoadedConfig) -> None:
    log: list[str] = []
    apps = recorder(log)
    agent = apps["agent"]

    async def start(rt: Runtime) -> str:
        return "handle-agent"

    async def bad_stop(rt: Runtime, handle: object) -> None:
        raise RuntimeError("stuck")

    apps["agent"] = AppSpec(
        name="agent",
        lifespan=hooks(start, bad_stop),
        requires=agent.requires,
        profiles=agent.profiles,
    )
    runtime = Runtime(profile="full", config=loaded, apps=apps, store="memory")
    await runtime.start()
    with pytest.raises(AppHookError, match="app 'agent': RuntimeError: stuck"):
        await runtime.stop()
    assert log[-3:] == ["stop router", "stop gateway", "stop store_app"]


async def test_capabilities_live_on_the_runtime_context(loaded: LoadedConfig) -> None:
    async def start(rt: Runtime) -> Marker:
        marker = Marker("one")
        rt.context.capabilities.register(MARKER, marker)
        return marker

    async def stop(rt: Runtime, handle: object) -> None:
        assert isinstance(handle, Marker)
        rt.context.capabilities.unregister(MARKER, handle)

    apps = {"m": AppSpec(name="m", lifespan=hooks(start, stop), profiles=frozenset({"p"}))}
    first = Runtime(profile="p", config=loaded, apps=apps, store="memory", name="a")
    second = Runtime(profile="p", config=loaded, apps=apps, store="memory", name="b")
    async with first, second:
        one = first.context.capabilities.require(MARKER)
        two = second.context.capabilities.require(MARKER)
        assert one is not two  # no module globals: two runtimes in one process
    with pytest.raises(CapabilityMissingError):
        first.context.capabilities.require(MARKER)


def test_unknown_profile_missing_requirement_and_cycle_are_clear_errors() -> None:
    apps = recorder([])
    with pytest.raises(
        RuntimeBootError, match=r"unknown runtime profile 'nope'.*execution-only, full"
    ):
        resolve_profile("nope", apps)
    del apps["store_app"]
    with pytest.raises(
        RuntimeBootError, match="'agent' requires 'store_app', which is not installed"
    ):
        resolve_profile("full", apps)

    async def start(rt: Runtime) -> None:
        return None

    cyclic = {
        "a": AppSpec(name="a", lifespan=hooks(start), requires=("b",), profiles=frozenset({"p"})),
        "b": AppSpec(name="b", lifespan=hooks(start), requires=("a",)),
    }
    with pytest.raises(RuntimeBootError, match="cycle: a -> b -> a"):
        resolve_profile("p", cyclic)


@given(st.permutations(["store_app", "agent", "gateway", "router"]))
def test_order_does_not_depend_on_declaration_order(names: list[str]) -> None:
    apps = recorder([])
    shuffled = {name: apps[name] for name in names}
    order = [a.name for a in resolve_profile("full", shuffled)]
    assert order == ["store_app", "agent", "gateway", "router"]


async def test_default_store_is_sqlite_under_lemon_home(loaded: LoadedConfig) -> None:
    async def start(rt: Runtime) -> None:
        await rt.store.put("t", "k", 1)

    apps = {"m": AppSpec(name="m", lifespan=hooks(start), profiles=frozenset({"p"}))}
    async with Runtime(profile="p", config=loaded, apps=apps):
        pass
    assert store_path(loaded.home).exists()


async def _noop(rt: Runtime) -> None:
    return None


def test_before_orders_an_app_ahead_of_a_booted_app_without_booting_it() -> None:
    apps = recorder([])
    # "zz_fallback" sorts after "gateway" by name; ``before`` puts it ahead of the gateway.
    apps["zz_fallback"] = AppSpec(
        name="zz_fallback",
        lifespan=hooks(_noop),
        requires=("agent",),
        before=("gateway", "not_installed"),
        profiles=frozenset({"execution-only", "full"}),
    )
    full = [a.name for a in resolve_profile("full", apps)]
    assert full == ["store_app", "agent", "zz_fallback", "gateway", "router"]
    # ``before`` boots nothing: a profile without the gateway leaves it out.
    apps["zz_fallback"] = AppSpec(
        name="zz_fallback", lifespan=hooks(_noop), before=("gateway",), profiles=frozenset({"solo"})
    )
    assert [a.name for a in resolve_profile("solo", apps)] == ["zz_fallback"]


def test_a_before_edge_against_a_requirement_is_a_cycle() -> None:
    apps = {
        "a": AppSpec(name="a", lifespan=hooks(_noop), requires=("b",), profiles=frozenset({"p"})),
        "b": AppSpec(name="b", lifespan=hooks(_noop), before=("a",)),
    }
    assert [x.name for x in resolve_profile("p", apps)] == ["b", "a"]
    apps["c"] = AppSpec(
        name="c", lifespan=hooks(_noop), requires=("a",), before=("b",), profiles=frozenset({"p"})
    )
    with pytest.raises(RuntimeBootError, match="cycle"):
        resolve_profile("p", apps)


async def test_a_lifespan_yields_a_typed_handle_and_is_left_in_reverse_order(
    loaded: LoadedConfig,
) -> None:
    """``AppSpec[H]``: the lifespan's yield is the handle (``runtime.handle(spec)`` is an H);
    lifespans are entered in boot order and left in reverse, after the block."""
    import contextlib
    from collections.abc import AsyncIterator

    log: list[str] = []

    def span(name: str) -> AppSpec[Marker]:
        @contextlib.asynccontextmanager
        async def lifespan(rt: Runtime) -> AsyncIterator[Marker]:
            log.append(f"enter {name}")
            yield Marker(name)
            log.append(f"exit {name}")

        return AppSpec(
            name=name,
            lifespan=lifespan,
            requires=("a",) if name == "b" else (),
            profiles=frozenset({"p"}),
        )

    a, b = span("a"), span("b")
    async with Runtime(profile="p", config=loaded, apps={"a": a, "b": b}, store="memory") as rt:
        handle: Marker = rt.handle(b)
        assert isinstance(handle, Marker)
        log.append("running")
    assert log == ["enter a", "enter b", "running", "exit b", "exit a"]


async def test_a_section_and_an_option_are_typed(tmp_path: Path) -> None:
    """An app's section comes from the config file (its defaults when unset) and an option from
    the runtime's arguments, each by its type."""
    import dataclasses

    from lemon_core.config import Section

    class Knob(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
        level: int = 1

    @dataclasses.dataclass(frozen=True)
    class Opt:
        value: str

    async def start(rt: Runtime) -> tuple[int, Opt | None]:
        return rt.section(Knob).level, rt.option(Opt)

    spec = AppSpec(
        name="k", lifespan=hooks(start), profiles=frozenset({"p"}), sections={"knob": Knob}
    )
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[knob]\nlevel = 3\n")
    async with Runtime(
        profile="p",
        apps={"k": spec},
        store="memory",
        options=[Opt("x")],
        environ={"LEMON_HOME": str(home)},
        cwd=tmp_path,
    ) as rt:
        assert rt.handle(spec) == (3, Opt("x"))
    (home / "config.toml").write_text("[knob]\nlevel = 0.5\n")
    with pytest.raises(ConfigError, match=r"knob\.level: Expected `int`, got `float`"):
        Runtime(profile="p", apps={"k": spec}, environ={"LEMON_HOME": str(home)}, cwd=tmp_path)


# -- capability requirements: needs / provides ------------------------------------------------


def _capability_apps(log: list[str], *, registers: bool = True) -> dict[str, AppSpec]:
    def provider(name: str) -> AppSpec:
        async def start(rt: Runtime) -> None:
            log.append(f"start {name}")
            if registers:
                rt.context.capabilities.register(MARKER, Marker(name))

        async def stop(rt: Runtime, handle: object) -> None:
            log.append(f"stop {name}")

        return AppSpec(name=name, lifespan=hooks(start, stop), provides=(MARKER,))

    async def use(rt: Runtime) -> None:
        marker = rt.context.capabilities.require(MARKER)
        log.append(f"start user (marker of {marker.name})")

    return {
        "zz_provider": provider("zz_provider"),
        "user": AppSpec(
            name="user", lifespan=hooks(use), needs=(MARKER,), profiles=frozenset({"p"})
        ),
    }


def test_a_needed_capability_boots_its_provider_first_without_naming_it() -> None:
    order = resolve_profile("p", _capability_apps([]))
    assert [a.name for a in order] == ["zz_provider", "user"]


async def test_the_provider_runs_before_the_app_that_needs_its_capability(
    loaded: LoadedConfig,
) -> None:
    log: list[str] = []
    async with Runtime(profile="p", config=loaded, apps=_capability_apps(log), store="memory"):
        pass
    assert log == ["start zz_provider", "start user (marker of zz_provider)", "stop zz_provider"]


def test_a_capability_no_installed_app_provides_is_a_boot_error() -> None:
    apps = _capability_apps([])
    del apps["zz_provider"]
    with pytest.raises(RuntimeBootError, match="needs the capability Marker, which no installed"):
        resolve_profile("p", apps)


def test_two_providers_are_an_error_unless_the_profile_picks_one() -> None:
    apps = _capability_apps([])
    apps["aa_provider"] = AppSpec(name="aa_provider", lifespan=hooks(_noop), provides=(MARKER,))
    with pytest.raises(RuntimeBootError, match="several apps provide: aa_provider, zz_provider"):
        resolve_profile("p", apps)
    apps["aa_provider"] = AppSpec(
        name="aa_provider", lifespan=hooks(_noop), provides=(MARKER,), profiles=frozenset({"p"})
    )
    assert [a.name for a in resolve_profile("p", apps)] == ["aa_provider", "user"]


async def test_a_provider_that_registers_nothing_fails_its_start(loaded: LoadedConfig) -> None:
    log: list[str] = []
    apps = _capability_apps(log, registers=False)
    with pytest.raises(AppHookError, match=r"zz_provider.*provides Marker but registered no"):
        async with Runtime(profile="p", config=loaded, apps=apps, store="memory"):
            pass
    assert log == ["start zz_provider", "stop zz_provider"]
