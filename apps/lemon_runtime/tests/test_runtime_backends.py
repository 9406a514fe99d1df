"""The runtime opens the store and the bus its configuration names: SQLite and the in-process
bus by default, PostgreSQL and Redis when ``[store]`` / ``[bus]`` say so (the defaults never
import psycopg or redis-py), and a server it cannot reach stops the boot with one clear error."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from lemon_core.config import LoadedConfig, load_config
from lemon_core.runtime_errors import RuntimeBootError
from lemon_platform_test.lifespans import hooks
from lemon_runtime import AppSpec, Runtime

PG = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("LEMON_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def configured(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> LoadedConfig:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(text, encoding="utf-8")
    return load_config(home=home, cwd=tmp_path, environ=environ or {})


def probe_app(seen: dict[str, object]) -> dict[str, AppSpec]:
    async def start(rt: Runtime) -> None:
        seen["store"] = rt.store.statistics()["backend"]
        seen["bus"] = rt.bus.statistics().backend
        await rt.store.put("probe", "k", {"v": 1})
        seen["read"] = await rt.store.get("probe", "k")

    async def stop(rt: Runtime, handle: object) -> None:
        pass

    return {
        "probe": AppSpec(name="probe", lifespan=hooks(start, stop), profiles=frozenset({"full"}))
    }


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_the_defaults_are_sqlite_and_the_local_bus(tmp_path: Path) -> None:
    seen: dict[str, object] = {}
    async with Runtime(config=configured(tmp_path, ""), apps=probe_app(seen)):
        pass
    assert seen == {"store": "sqlite", "bus": "local", "read": {"v": 1}}


async def test_postgres_and_redis_from_config(tmp_path: Path) -> None:
    from lemon_infra import drop_schema

    schema = f"rt_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    loaded = configured(
        tmp_path,
        f'[store]\nbackend = "postgres"\ndsn_env = "TEST_PG"\nschema = "{schema}"\n'
        f'[bus]\nbackend = "redis"\nurl = "{REDIS}"\n',
    )
    seen: dict[str, object] = {}
    try:
        runtime = Runtime(config=loaded, apps=probe_app(seen), environ={"TEST_PG": PG})
        async with runtime:
            assert runtime.bus.running()
        assert not runtime.bus.running()
        assert seen == {"store": "postgres", "bus": "redis", "read": {"v": 1}}
    finally:
        await drop_schema(PG, schema)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[store]\nbackend = "postgres"\ndsn = "postgresql://u:hunter2@127.0.0.1:{port}/x"\n',
            r"PostgreSQL store postgresql://u:\*\*\*@127\.0\.0\.1:\d+/x: cannot connect",
        ),
        (
            '[bus]\nbackend = "redis"\nurl = "redis://:hunter2@127.0.0.1:{port}/0"\n',
            r"Redis bus redis://:\*\*\*@127\.0\.0\.1:\d+/0: cannot connect",
        ),
        (
            '[store]\nbackend = "postgres"\ndsn_env = "UNSET_VARIABLE_{port}"\n',
            r"the variable UNSET_VARIABLE_\d+ is not set",
        ),
    ],
)
async def test_an_unreachable_server_stops_the_boot_with_one_clear_error(
    tmp_path: Path, text: str, expected: str
) -> None:
    loaded = configured(tmp_path, text.replace("{port}", str(closed_port())))
    runtime = Runtime(config=loaded, apps=probe_app({}), environ={})
    with pytest.raises(RuntimeBootError, match=expected) as caught:
        await runtime.start()
    assert "hunter2" not in str(caught.value)
    assert runtime.state == "failed"


def test_the_default_runtime_imports_neither_psycopg_nor_redis() -> None:
    code = (
        "import sys, lemon_core, lemon_runtime, lemon_core.store, lemon_core.bus;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'redis')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


async def test_a_postgres_server_that_stops_answering_is_one_status_event_each_way(
    tmp_path: Path,
) -> None:
    import asyncio

    from lemon_core import Delivery
    from lemon_core.bus import SYSTEM
    from lemon_core.events import StoreBackendChanged
    from lemon_core.store import StoreUnavailableError
    from lemon_infra import drop_schema
    from lemon_platform_test.proxy import TcpProxy

    schema = f"rt_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with TcpProxy("127.0.0.1", 5432) as proxy:
        dsn = f"postgresql://postgres@127.0.0.1:{proxy.port}/test"
        loaded = configured(
            tmp_path,
            f'[store]\nbackend = "postgres"\ndsn_env = "TEST_PG"\nschema = "{schema}"\n'
            "timeout_s = 0.5\n",
        )
        try:
            runtime = Runtime(config=loaded, apps=probe_app({}), environ={"TEST_PG": dsn})
            async with runtime:
                system = Delivery(bind_current_task=False)
                runtime.bus.subscribe(SYSTEM, delivery=system)
                proxy.cut()
                for _ in range(20):
                    with pytest.raises(StoreUnavailableError):
                        await runtime.store.get("probe", "k")
                    if not runtime.store.statistics()["available"]:
                        break
                with pytest.raises(StoreUnavailableError, match="failing fast"):
                    await runtime.store.get("probe", "k")
                down = system.get_nowait()
                assert down.type == "store_backend_changed"
                assert isinstance(down.payload, StoreBackendChanged)
                assert (down.payload.backend, down.payload.running) == ("postgres", False)
                assert "127.0.0.1" not in down.payload.reason  # no address on the bus
                proxy.restore()
                for _ in range(100):  # the probe is due each second (the store's default)
                    try:
                        assert await runtime.store.get("probe", "k") == {"v": 1}
                        break
                    except StoreUnavailableError:
                        await asyncio.sleep(0.05)
                else:
                    pytest.fail("the store never answered again")
                up = system.get_nowait()
                assert up.payload == StoreBackendChanged(backend="postgres", running=True)
                with pytest.raises(asyncio.QueueEmpty):
                    system.get_nowait()  # one report each way
        finally:
            await drop_schema(PG, schema)
