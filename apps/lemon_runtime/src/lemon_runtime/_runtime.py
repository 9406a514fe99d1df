"""The runtime: boots a profile's apps in dependency order on one explicit context.

Everything an app needs is on the :class:`Runtime` its lifespan receives: the bus, the store,
the validated config (its own section: :meth:`Runtime.section`), typed per-process options
(:meth:`Runtime.option`) and the capability registry (``runtime.context.capabilities``).
Nothing lives in module globals, so several runtimes can live in one process (tests do).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self, TypeVar, overload

from lemon_core.bus import Bus
from lemon_core.config import Config, ConfigError, LoadedConfig, Section, load_config
from lemon_core.errors import BusBackendUnavailableError
from lemon_core.execution import RuntimeContext
from lemon_core.leases import Leases
from lemon_core.mounts import HTTP_MOUNTS, HttpMounts
from lemon_core.runtime_errors import AppHookError, RuntimeBootError, RuntimeUsageError
from lemon_core.store import Store, StoreCorruptError, StoreUnavailableError
from lemon_core.wire_methods import WIRE_METHODS, WireMethods
from lemon_runtime._app import AppSpec, discover_apps, resolve_profile
from lemon_runtime._backends import (
    open_configured_bus,
    open_configured_store,
    shared_leases,
    store_path,
    watch_store,
)

__all__ = ["AppState", "Runtime", "RuntimeStatistics", "store_path"]

_log = logging.getLogger(__name__)


State = Literal["new", "starting", "running", "stopping", "stopped", "failed"]
H = TypeVar("H")
S = TypeVar("S", bound=Section)
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True, slots=True)
class AppState:
    """One started app: its spec and the handle its lifespan yielded."""

    spec: AppSpec[Any]
    handle: object


@dataclass(frozen=True, kw_only=True, slots=True)
class RuntimeStatistics:
    """What :meth:`Runtime.statistics` reports."""

    profile: str
    state: State
    apps: tuple[str, ...]
    capabilities: Mapping[str, str]


class Runtime:
    """A booted set of apps. Use ``async with Runtime(profile=...) as rt:``.

    ``config`` defaults to :func:`lemon_core.config.load_config` (layered and validated; a
    ``ConfigError`` lists every problem). ``apps`` defaults to the ``lemon.apps`` entry
    points. ``bus`` and ``store`` default to what ``[bus]`` and ``[store]`` name: an
    in-process :class:`Bus` or one on Redis; the SQLite store
    ``$LEMON_HOME/store/lemon.sqlite3``, PostgreSQL or memory (``store="memory"`` /
    ``"sqlite"`` / ``"postgres"`` overrides the configured backend); what the runtime created it
    also closes. A server that cannot be reached at start is a :class:`RuntimeBootError` naming
    it (password redacted). ``options`` are typed per-process settings of apps that are not
    config-file keys (an app reads its own with :meth:`option`, e.g. the control plane's
    ``ControlPlaneOptions(port=0)``); an override of a config key is a config override
    (``loaded.with_section(...)``). Start and stop must run in the same task (apps may hold
    task groups).
    """

    def __init__(
        self,
        *,
        profile: str | None = None,
        config: LoadedConfig | None = None,
        apps: Mapping[str, AppSpec[Any]] | None = None,
        bus: Bus | None = None,
        store: Store | Literal["sqlite", "postgres", "memory"] | None = None,
        name: str = "default",
        options: Iterable[object] = (),
        environ: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self._apps = dict(apps) if apps is not None else discover_apps()
        if config is None:
            sections = {n: c for a in self._apps.values() for n, c in a.config_sections().items()}
            config = load_config(environ=environ, cwd=cwd, sections=sections)
        self._loaded = config
        self._environ = environ
        self.profile = profile or self._loaded.config.runtime.profile
        self._options = {type(option): option for option in options}
        self._order = resolve_profile(self.profile, self._apps)
        self._bus_arg = bus
        self._store_arg = store
        self._bus: Bus | None = bus
        self._store: Store | None = store if not isinstance(store, str | None) else None
        self.context = RuntimeContext(name=name)
        self.mounts = HttpMounts()
        """The HTTP mounts of this runtime (the :data:`HTTP_MOUNTS` capability while it runs)."""
        self.wire_methods = WireMethods()
        """The apps' control-plane methods (the :data:`WIRE_METHODS` capability while it runs)."""
        self._leases: Leases | None = None
        self._started: list[AppState] = []
        self._stack = AsyncExitStack()
        self._exit_errors: list[str] = []
        self._state: State = "new"
        self._task: asyncio.Task[Any] | None = None

    # -- accessors --------------------------------------------------------------------------

    @property
    def config(self) -> Config:
        return self._loaded.config

    @property
    def loaded_config(self) -> LoadedConfig:
        return self._loaded

    @property
    def home(self) -> Path:
        return self._loaded.home

    @property
    def bus(self) -> Bus:
        if self._bus is None:
            raise RuntimeUsageError("the runtime is not started: no bus yet")
        return self._bus

    @property
    def store(self) -> Store:
        if self._store is None:
            raise RuntimeUsageError("the runtime is not started: no store yet")
        return self._store

    @property
    def leases(self) -> Leases | None:
        """Leases shared with other daemons (the store is PostgreSQL), else None."""
        return self._leases

    @property
    def state(self) -> State:
        return self._state

    @property
    def apps(self) -> tuple[str, ...]:
        """The apps of the profile, in start order."""
        return tuple(app.name for app in self._order)

    @overload
    def handle(self, app: AppSpec[H]) -> H: ...
    @overload
    def handle(self, app: str) -> object: ...
    def handle(self, app: AppSpec[Any] | str) -> object:
        """The handle ``app``'s lifespan yielded (typed when ``app`` is its spec); raise
        :class:`RuntimeUsageError` if it is not started."""
        name = app if isinstance(app, str) else app.name
        for started in self._started:
            if started.spec.name == name:
                return started.handle
        raise RuntimeUsageError(f"app {name!r} is not started in this runtime ({self.profile})")

    def section(self, cls: type[S]) -> S:
        """The app config section of type ``cls`` (its defaults when no file set it)."""
        return self._loaded.config.section(cls)

    def option(self, cls: type[T]) -> T | None:
        """The per-process option of type ``cls`` given to the runtime, else ``None``."""
        found = self._options.get(cls)
        return found if isinstance(found, cls) else None

    def statistics(self) -> RuntimeStatistics:
        return RuntimeStatistics(
            profile=self.profile,
            state=self._state,
            apps=tuple(s.spec.name for s in self._started),
            capabilities=self.context.capabilities.statistics(),
        )

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Open bus and store, then start every app in order; on a failing hook, stop what
        was started (reverse order) and raise :class:`AppHookError`."""
        if self._state != "new":
            raise RuntimeUsageError(f"a runtime starts once; this one is {self._state}")
        self._state = "starting"
        self._task = asyncio.current_task()
        try:
            if self._bus is None:
                self._bus = await open_configured_bus(self.config, environ=self._environ)
            if self._store is None:
                chosen = self._store_arg if isinstance(self._store_arg, str) else None
                self._store = await open_configured_store(
                    self.config, self.home, backend=chosen, environ=self._environ
                )
        except (
            ConfigError,
            StoreUnavailableError,
            StoreCorruptError,
            BusBackendUnavailableError,
        ) as exc:
            await self._close_owned()
            self._state = "failed"
            raise RuntimeBootError(str(exc)) from exc
        self._leases = shared_leases(self._store)
        watch_store(self._store, self._bus)
        self.context.capabilities.register(HTTP_MOUNTS, self.mounts)
        self.context.capabilities.register(WIRE_METHODS, self.wire_methods)
        for spec in self._order:
            app_stack = AsyncExitStack()
            try:
                handle = await app_stack.enter_async_context(spec.lifespan(self))
                missing = [
                    c.__name__ for c in spec.provides if self.context.capabilities.get(c) is None
                ]
                if missing:
                    await app_stack.aclose()
                    raise RuntimeBootError(
                        f"it declares it provides {', '.join(missing)} but registered no "
                        "implementation while starting"
                    )
            except Exception as exc:
                stop_errors = await self._stop_started()
                await self._close_owned()
                self._state = "failed"
                raise AppHookError(
                    f"app {spec.name!r} failed to start: {type(exc).__name__}: {exc}"
                    + (f" (also, while stopping: {'; '.join(stop_errors)})" if stop_errors else ""),
                    app=spec.name,
                    hook="start",
                    stop_errors=tuple(stop_errors),
                ) from exc
            self._stack.push_async_callback(self._exit_app, spec, app_stack)
            self._started.append(AppState(spec=spec, handle=handle))
        self._state = "running"

    async def stop(self) -> None:
        """Exit the started apps' lifespans in reverse order (every one, even when one fails),
        then close what the runtime opened. Raise :class:`AppHookError` if one failed."""
        if self._state in ("stopped", "new", "failed"):
            self._state = "stopped" if self._state == "new" else self._state
            return
        self._state = "stopping"
        errors = await self._stop_started()
        await self._close_owned()
        self._state = "stopped"
        if errors:
            raise AppHookError("stopping the runtime: " + "; ".join(errors), app="", hook="stop")

    async def _exit_app(self, spec: AppSpec[Any], app_stack: AsyncExitStack) -> None:
        try:
            await app_stack.aclose()
        except Exception as exc:
            _log.exception("app %s failed to stop", spec.name)
            self._exit_errors.append(f"app {spec.name!r}: {type(exc).__name__}: {exc}")
        finally:
            self._started = [s for s in self._started if s.spec is not spec]

    async def _stop_started(self) -> list[str]:
        """Exit every started app's lifespan, last started first; the errors, one per app."""
        self._exit_errors = []
        await self._stack.aclose()
        errors, self._exit_errors = self._exit_errors, []
        return errors

    async def _close_owned(self) -> None:
        self.context.capabilities.unregister(HTTP_MOUNTS, self.mounts)
        self.context.capabilities.unregister(WIRE_METHODS, self.wire_methods)
        if (
            self._store_arg is None or isinstance(self._store_arg, str)
        ) and self._store is not None:
            await self._store.close()
        if self._bus_arg is None and self._bus is not None:
            self._bus.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
