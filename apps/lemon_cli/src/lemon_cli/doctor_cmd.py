"""``lemon doctor``: is this installation able to chat? Config, store, memory, bus, executor,
provider;
and whether this home's daemon runs (pid, url, uptime: information, never a failure)."""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from lemon_cli._output import make_console

if TYPE_CHECKING:  # the rest is imported when the checks run: `lemon --help` stays fast
    from lemon_core.config import Config, LoadedConfig

__all__ = ["Check", "doctor", "exit_code", "run_checks"]

Status = Literal["ok", "warn", "fail"]
_TIMEOUT_S = 3.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Check:
    name: str
    status: Status
    detail: str


async def _check_store(config: Config | None, home: Path, home_exists: bool) -> Check:
    backend = config.store.backend if config is not None else "sqlite"
    if backend == "memory":
        return Check(name="store", status="ok", detail="memory store: nothing outlives a process")
    if backend == "postgres" and config is not None:
        return await _check_postgres_store(config)
    return await _check_sqlite_store(home, home_exists)


async def _check_postgres_store(config: Config) -> Check:
    from lemon_core.config import ConfigError, redact_url, resolve_store_dsn
    from lemon_core.store import StoreError
    from lemon_infra import PostgresStore

    schema = config.store.schema
    try:
        dsn = resolve_store_dsn(config.store, os.environ)
    except ConfigError as exc:
        return Check(name="store", status="fail", detail=exc.issues[0].render())
    try:
        store = await PostgresStore.open(
            dsn, schema=schema, timeout_s=_TIMEOUT_S, min_connections=1, max_connections=1
        )
    except StoreError as exc:
        return Check(name="store", status="fail", detail=f"{exc}; check [store] dsn")
    try:
        token = f"doctor-{time.time_ns()}"
        await store.put("doctor", "probe", token)
        back = await store.get("doctor", "probe")
        await store.delete("doctor", "probe")
        versions = await store.migrations()
    except StoreError as exc:
        return Check(name="store", status="fail", detail=str(exc))
    finally:
        await store.close()
    where = f"{redact_url(dsn)} schema {schema}"
    if back != token:
        return Check(name="store", status="fail", detail=f"{where}: read back {back!r}")
    return Check(
        name="store",
        status="ok",
        detail=f"PostgreSQL open/write/read ok: {where} (migration {versions[-1]})",
    )


async def _check_bus(config: Config | None) -> Check:
    import asyncio

    if config is None or config.bus.backend == "local":
        return Check(name="bus", status="ok", detail="in-process bus (one daemon)")
    from lemon_core.config import ConfigError, redact_url, resolve_bus_url
    from lemon_core.errors import BusBackendUnavailableError
    from lemon_infra import RedisBackend

    try:
        url = resolve_bus_url(config.bus, os.environ)
    except ConfigError as exc:
        return Check(name="bus", status="fail", detail=exc.issues[0].render())
    backend = RedisBackend(url, prefix=config.store.schema, connect_timeout_s=_TIMEOUT_S)
    try:
        await asyncio.to_thread(backend.connect)
        delivered = await asyncio.to_thread(backend.flush, _TIMEOUT_S)
    except BusBackendUnavailableError as exc:
        return Check(name="bus", status="fail", detail=f"{exc}; check [bus] url")
    finally:
        await asyncio.to_thread(backend.close)
    if not delivered:
        return Check(
            name="bus",
            status="fail",
            detail=f"Redis bus {redact_url(url)}: a probe published did not come back",
        )
    return Check(
        name="bus",
        status="ok",
        detail=f"Redis publish/subscribe ok: {redact_url(url)} prefix {config.store.schema}",
    )


async def _check_sqlite_store(home: Path, home_exists: bool) -> Check:
    from lemon_cli._home import home_problem
    from lemon_core.store import StoreCorruptError
    from lemon_infra import open_default_store
    from lemon_runtime import store_path

    path = store_path(home)
    problem = home_problem(home, create=False)
    if problem is not None:
        return Check(
            name="store",
            status="fail",
            detail=f"{path}: the home {home} cannot be used: {problem}; "
            "set LEMON_HOME to a directory you can write to",
        )
    with tempfile.TemporaryDirectory(prefix="lemon-doctor-") as scratch:
        target = path if home_exists else store_path(Path(scratch))
        try:
            async with await open_default_store(target) as store:
                token = f"doctor-{time.time_ns()}"
                await store.put("doctor", "probe", token)
                back = await store.get("doctor", "probe")
                await store.delete("doctor", "probe")
        except StoreCorruptError as exc:  # says the file and what to do
            return Check(name="store", status="fail", detail=str(exc))
        except Exception as exc:
            detail = f"{target}: {type(exc).__name__}: {exc}"
            return Check(name="store", status="fail", detail=detail)
    if back != token:
        return Check(name="store", status="fail", detail=f"{target}: read back {back!r}")
    where = str(path) if home_exists else f"{path} (not created yet; probed a temporary file)"
    return Check(name="store", status="ok", detail=f"open/write/read ok: {where}")


async def _check_memory(config: Config | None, home: Path) -> Check:
    """The memory store: where, its backend, documents per scope, size, evictions, the
    embeddings lane; a store that cannot be opened is a warning (chat works without it) that
    says how to fix it."""
    import asyncio

    from lemon_core.home import Home
    from lemon_memory import MemoryConfig, MemoryStoreError, open_store, store_bounds
    from lemon_memory.documents import MemoryStatistics

    memory = config.section(MemoryConfig) if config is not None else MemoryConfig()
    if not memory.enabled:
        return Check(name="memory", status="ok", detail="off ([memory] enabled = false)")
    stats: MemoryStatistics
    if config is not None and config.store.backend == "postgres":
        from lemon_core.config import ConfigError, resolve_store_dsn
        from lemon_core.store import StoreError
        from lemon_infra import PostgresStore
        from lemon_memory import PostgresMemoryStore

        where = f"PostgreSQL schema {config.store.schema}"
        try:
            shared = await PostgresStore.open(
                resolve_store_dsn(config.store, os.environ), schema=config.store.schema,
                timeout_s=_TIMEOUT_S, min_connections=1, max_connections=1,
            )  # fmt: skip
        except (ConfigError, StoreError) as exc:
            return Check(name="memory", status="warn", detail=f"{where}: skipped ({exc})")
        try:
            pg = await PostgresMemoryStore.open(shared, **store_bounds(memory))
            stats = await pg.statistics()
        except (MemoryStoreError, StoreError) as exc:
            return Check(name="memory", status="warn", detail=f"{where}: {exc}")
        finally:
            await shared.close()
        size = f"{stats.bytes / 1048576:.1f} MiB of text"
    else:
        path = Home(root=home).store_dir / "memory.sqlite3"
        where = str(path)
        if not path.exists():
            return Check(
                name="memory", status="ok", detail=f"{where}: not created yet (SQLite FTS5)"
            )
        try:
            store = await asyncio.to_thread(open_store, memory, Home(root=home))
        except MemoryStoreError as exc:  # says the file and how to start afresh
            return Check(name="memory", status="warn", detail=str(exc))
        try:
            stats = await store.statistics()
        except MemoryStoreError as exc:
            return Check(name="memory", status="warn", detail=str(exc))
        finally:
            await store.close()
        on_disk = sum(
            p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists()
        )
        size = f"{on_disk / 1048576:.1f} MiB on disk"
    from lemon_memory import embeddings

    scopes = ", ".join(f"{k} {v}" for k, v in sorted(stats.per_scope.items())) or "none"
    evicted = sum(stats.evictions.values())
    lane = (
        "embeddings installed (hybrid recall once the daemon loads them)"
        if embeddings.installed()
        else "embeddings not installed (lexical recall; the extra lemon_memory[embeddings])"
    )
    return Check(
        name="memory",
        status="ok",
        detail=f"{where} ({stats.backend}): {stats.documents} documents of at most "
        f"{stats.max_docs}, {size}; per scope: {scopes}; {evicted} evicted, "
        f"{stats.swept} swept; {lane}",
    )


def _check_executor() -> Check:
    from lemon_gateway import validate_executor

    status = validate_executor()
    if status.ready:
        return Check(name="executor", status="ok", detail=f"ready: {status.name}")
    return Check(
        name="executor",
        status="warn",
        detail=f"lemon.executor not ready: {status.reason}. Runs cannot start until it is: "
        "reinstall with ./bin/lemon (it syncs the environment)",
    )


async def _check_provider(config: Config, home: Path) -> Check:

    import httpx

    from coding_agent import resolve_model
    from lemon_ai import LemonAiError, api_key_variable
    from lemon_cli._models import api_key_for, model_ref
    from lemon_core.config import read_secrets

    ref = model_ref(config)
    name, _, _ = ref.partition(":")
    if name == "offline":
        return Check(
            name="provider",
            status="ok",
            detail="offline provider (no model configured): answers locally and says so; "
            "run `lemon setup` to use a real model",
        )
    # The same resolution a run uses (coding_agent's): configured providers and every
    # catalogue provider (openai, anthropic, ollama, lmstudio, vllm, llamacpp...) alike.
    environ = {**read_secrets(home), **os.environ}
    try:
        model, provider = resolve_model(config, environ=environ)
    except LemonAiError as exc:
        return Check(name="provider", status="fail", detail=f"{ref}: {exc}")
    await provider.aclose()
    settings = config.providers.get(name)
    base_url = model.base_url or None
    variable = settings.api_key_env if settings is not None else api_key_variable(name)
    key = api_key_for(variable, home)
    unset = f"{variable} is not set (environment or secrets file)"
    if not base_url:
        return Check(
            name="provider",
            status="fail" if variable and key is None else "warn",
            detail=f"{ref}: no base URL to probe"
            + (f"; {unset}" if variable and key is None else ""),
        )
    headers: dict[str, str] = {}
    if key is not None:
        if model.api == "anthropic_messages":
            headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
        else:
            headers = {"authorization": f"Bearer {key}"}
    try:
        async with httpx.AsyncClient(timeout=_TIMEOUT_S) as client:
            response = await client.get(base_url.rstrip("/") + "/models", headers=headers)
    except httpx.HTTPError as exc:
        return Check(
            name="provider",
            status="fail",
            detail=f"{ref}: {base_url} unreachable ({type(exc).__name__}: {exc})",
        )
    reach = f"{base_url} answered HTTP {response.status_code}"
    # The chat sends the key when it has one and goes on without it otherwise (local servers
    # need none), so a missing key fails here only when the server refuses to answer without.
    if response.status_code in (401, 403):
        if key is not None:
            why = f"it refused the key in {variable}; check it"
        elif variable:
            why = f"it needs a key and {unset}"
        else:
            why = "it needs a key: run `lemon setup` again and answer that it does"
        return Check(name="provider", status="fail", detail=f"{ref}: {reach}; {why}")
    if variable and key is None:
        return Check(
            name="provider",
            status="warn",
            detail=f"{ref}: {reach} without a key, so chat works; {unset} "
            "(if the server needs none, `lemon setup --no-key` drops api_key_env)",
        )
    return Check(name="provider", status="ok", detail=f"{ref}: {reach}")


def _check_web(config: Config) -> Check:
    """What the web tools offer: web_fetch, the search provider, whether Chromium is there."""
    from lemon_browser import CHROMIUM, WebConfig, WebError, search_provider

    web = config.section(WebConfig)
    status: Status = "ok"
    parts = ["web_fetch " + ("on" if web.enabled else "off ([web] enabled = false)")]
    try:
        provider = search_provider(web, os.environ)
        parts.append(
            f"web_search via {provider.name}" if provider else "web_search off ([web] search)"
        )
    except WebError as exc:
        status = "warn"
        parts.append(f"web_search not offered: {exc}")
    if Path(CHROMIUM).exists():
        parts.append(f"Chromium at {CHROMIUM}")
    else:
        parts.append(f"no Chromium at {CHROMIUM} (for the browser: apt-get install -y chromium)")
    return Check(name="web", status=status, detail="; ".join(parts))


def _check_mcp(config: Config, home: Path) -> list[Check]:
    """Each configured MCP server (none started: they start lazily), one line each."""
    from lemon_core.config import read_secrets
    from lemon_mcp import McpConfig, diagnose

    if not config.section(McpConfig).servers:
        return []
    try:
        secrets = read_secrets(home)
    except OSError:  # an unusable home: the store check says why
        secrets = {}
    environ = {**secrets, **os.environ}
    return [
        Check(name="mcp", status=level, detail=f"{name}: {detail}")
        for name, level, detail in diagnose(config, home=home, cwd=Path.cwd(), environ=environ)
    ]


async def _check_automation(loaded: LoadedConfig) -> list[Check]:
    """The scheduled jobs (lemon_automation): none when there is no job, one line each."""
    import asyncio

    from lemon_automation.local import diagnose

    try:
        async with asyncio.timeout(_TIMEOUT_S * 2):
            lines = await diagnose(loaded)
    except Exception as exc:  # the store check says why the store cannot be used
        return [Check(name="automation", status="warn", detail=f"cannot read the jobs: {exc}")]
    return [Check(name="automation", status=level, detail=detail) for level, detail in lines]


async def run_checks(
    loaded: LoadedConfig | None, home: Path, config_error: str | None, home_exists: bool
) -> list[Check]:
    """Every check, in order."""
    checks: list[Check] = []
    if loaded is None:
        checks.append(Check(name="config", status="fail", detail=config_error or "invalid"))
    else:
        sources = ", ".join(loaded.sources) or "no config file (defaults)"
        checks.append(Check(name="config", status="ok", detail=f"valid: {sources}"))
    config = loaded.config if loaded is not None else None
    checks.append(await _check_store(config, home, home_exists))
    checks.append(_check_executor())
    if loaded is not None:
        checks.append(await _check_provider(loaded.config, home))
    else:
        checks.append(
            Check(name="provider", status="fail", detail="skipped: the config is invalid")
        )
    checks.append(await _check_bus(config))
    checks.append(await _check_memory(config, home))
    if loaded is not None:
        from lemon_cli.channels_cmd import channel_check_lines

        for level, detail in await channel_check_lines(loaded.config, home):
            checks.append(Check(name="channels", status=level, detail=detail))  # type: ignore[arg-type]  # levels are ok|warn|fail
        from lemon_cli._surfaces import surface_problems

        for surface, detail in surface_problems(loaded.config, home):
            if surface == "webhooks":  # (the channels' lines above say theirs)
                checks.append(
                    Check(
                        name="webhooks",
                        status="fail",
                        detail=f"{detail}; the daemon serves the other endpoints without it",
                    )
                )
    if loaded is not None:
        checks.append(_check_web(loaded.config))
        checks.extend(_check_mcp(loaded.config, home))
        if home_exists:
            checks.extend(await _check_automation(loaded))
    from lemon_cli._daemon import daemon_summary

    checks.append(Check(name="daemon", status="ok", detail=daemon_summary(home)))
    return checks


def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
) -> None:
    """Check the runtime's health: config, store, memory, bus, executor, provider. Exit 1 on a
    failure, 2 when a configured PostgreSQL store or Redis bus cannot be reached."""
    import asyncio
    import json

    from rich.markup import escape

    from lemon_core.config import ConfigError, lemon_home, load_config

    console = make_console(emoji=False, highlight=False)
    loaded: LoadedConfig | None = None
    error: str | None = None
    try:
        loaded = load_config()
    except ConfigError as exc:
        error = "; ".join(issue.render() for issue in exc.issues)
    home = loaded.home if loaded is not None else lemon_home()
    checks = asyncio.run(run_checks(loaded, home, error, home.is_dir()))
    failed = any(c.status == "fail" for c in checks)
    if as_json:
        print(json.dumps({"ok": not failed, "checks": [asdict(c) for c in checks]}, indent=2))
    else:
        colour = {"ok": "green", "warn": "yellow", "fail": "red"}
        for c in checks:
            console.print(f"[{colour[c.status]}]{c.status:>4}[/] {c.name:<9} {escape(c.detail)}")
    raise typer.Exit(exit_code(loaded, checks))


def exit_code(loaded: LoadedConfig | None, checks: list[Check]) -> int:
    """0 when nothing failed; 2 when a configured server (PostgreSQL store, Redis bus) failed
    its check, as ``lemon serve`` exits when it cannot reach one; 1 for any other failure."""
    if not any(c.status == "fail" for c in checks):
        return 0
    if loaded is not None:
        remote = {
            "store": loaded.config.store.backend == "postgres",
            "bus": loaded.config.bus.backend == "redis",
        }
        if any(c.status == "fail" and remote.get(c.name, False) for c in checks):
            return 2
    return 1
