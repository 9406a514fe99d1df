"""Apps as the runtime sees them: a name, requirements, profiles, a lifespan and the config
section the app owns.

An app publishes itself in the ``lemon.apps`` entry point group; the entry point names an
:class:`AppSpec` (or a zero-argument callable returning one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field, replace
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from lemon_core.config import Section
from lemon_core.execution import Capability
from lemon_core.runtime_errors import RuntimeBootError

if TYPE_CHECKING:
    from lemon_runtime._runtime import Runtime

__all__ = [
    "APPS_ENTRY_POINT_GROUP",
    "AppSpec",
    "Lifespan",
    "discover_apps",
    "known_profiles",
    "resolve_profile",
]

#: The entry point group where apps publish their :class:`AppSpec`.
APPS_ENTRY_POINT_GROUP: Final = "lemon.apps"

H = TypeVar("H")

Lifespan = Callable[["Runtime"], AbstractAsyncContextManager[H]]
"""An app's lifespan: entered at boot (what it yields is the app's handle), exited at stop."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AppSpec(Generic[H]):
    """One bootable app whose handle is an ``H``.

    ``lifespan(runtime)`` is an async context manager (Starlette's lifespan; write it with
    :func:`contextlib.asynccontextmanager`): the runtime enters it at boot, in boot order, and
    what it yields is the app's handle (:meth:`Runtime.handle`; ``None`` is fine); the runtime
    exits it at stop, in reverse order. ``requires`` names the apps that must be started first;
    ``before`` names apps this one must start before *when they are booted too* (an ordering
    only: it boots nothing and needs nothing installed); ``profiles`` names the profiles that
    include this app (a required app is started even when it is not in the profile itself).

    ``provides`` names the capabilities the app registers while it runs (the runtime checks
    that it did once its lifespan is entered); ``needs`` names capabilities that must be
    registered before this app starts: the app that ``provides`` each is booted first, even
    when it is not in the profile, so an app can depend on a capability without naming (or
    importing) the app that implements it (the gateway needs ``AGENT_RUNTIME``, whichever app
    provides it).

    ``sections`` maps each config section the app owns to its record type: the ``SECTIONS``
    mapping of the app's section module (``{"gateway": GatewayConfig}``), the one the app's
    ``lemon.config`` entry point names too, so the loader (which reads the entry points,
    :func:`lemon_core.config.installed_sections`) and the runtime see one declaration; the
    runtime reads a section with :meth:`Runtime.section`.
    """

    name: str
    lifespan: Callable[[Runtime], AbstractAsyncContextManager[H]]
    requires: tuple[str, ...] = ()
    before: tuple[str, ...] = ()
    profiles: frozenset[str] = frozenset()
    description: str = ""
    sections: Mapping[str, type[Section]] = field(default_factory=dict)
    provides: tuple[Capability[Any], ...] = ()
    needs: tuple[Capability[Any], ...] = ()

    def config_sections(self) -> dict[str, type[Section]]:
        """Every config section this app owns, by name."""
        return dict(self.sections)


def discover_apps(group: str = APPS_ENTRY_POINT_GROUP) -> dict[str, AppSpec[Any]]:
    """Load every app of the entry point group; raise :class:`RuntimeBootError` naming a
    broken entry point or a duplicated app name."""
    apps: dict[str, AppSpec[Any]] = {}
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        try:
            obj = ep.load()
            spec = obj if isinstance(obj, AppSpec) else obj()
        except Exception as exc:
            raise RuntimeBootError(
                f"the {group} entry point {ep.name!r} ({ep.value}) cannot be loaded: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(spec, AppSpec):
            raise RuntimeBootError(
                f"the {group} entry point {ep.name!r} ({ep.value}) gave {spec!r}, not an AppSpec"
            )
        if spec.name in apps:
            raise RuntimeBootError(f"two {group} entry points declare the app {spec.name!r}")
        apps[spec.name] = spec
    return apps


def known_profiles(apps: Iterable[AppSpec[Any]]) -> list[str]:
    """Every profile some app belongs to, sorted."""
    return sorted({p for app in apps for p in app.profiles})


def resolve_profile(profile: str, apps: Mapping[str, AppSpec[Any]]) -> list[AppSpec[Any]]:
    """The apps of ``profile`` plus everything they require, in dependency order.

    Ties are broken by name so the order is deterministic. Raises
    :class:`RuntimeBootError` for an unknown profile, a missing requirement or a cycle.
    """
    chosen = sorted(name for name, app in apps.items() if profile in app.profiles)
    if not chosen:
        known = ", ".join(known_profiles(apps.values())) or "none (no app is installed)"
        raise RuntimeBootError(f"unknown runtime profile {profile!r}; known profiles: {known}")
    apps = _with_providers(apps, set(chosen))
    booted = [app.name for app in _order(chosen, apps, {})]
    after: dict[str, set[str]] = {}
    for name in booted:
        for target in apps[name].before:
            if target in booted:
                after.setdefault(target, set()).add(name)
    return _order(chosen, apps, after)


def _with_providers(apps: Mapping[str, AppSpec[Any]], chosen: set[str]) -> dict[str, AppSpec[Any]]:
    """``apps`` with each app's ``needs`` turned into requirements of the app providing them.

    A capability no installed app provides is a :class:`RuntimeBootError`; of several
    providers, the one in the profile is taken, and two there (or none there and several
    installed) is an error naming them."""
    providers: dict[str, list[str]] = {}
    for name, app in apps.items():
        for cap in app.provides:
            providers.setdefault(cap.__name__, []).append(name)
    resolved: dict[str, AppSpec[Any]] = {}
    for name, app in apps.items():
        extra: list[str] = []
        for cap in app.needs:
            found = sorted(providers.get(cap.__name__, ()))
            if len(found) > 1:
                found = [p for p in found if p in chosen] or found
            if not found:
                raise RuntimeBootError(
                    f"app {name!r} needs the capability {cap.__name__}, which no installed app "
                    f"provides (an app declares it with AppSpec(provides=...))"
                )
            if len(found) > 1:
                raise RuntimeBootError(
                    f"app {name!r} needs the capability {cap.__name__}, which several apps "
                    f"provide: {', '.join(found)}; put the one to use in the profile"
                )
            if found[0] != name:
                extra.append(found[0])
        resolved[name] = (
            replace(app, requires=tuple(dict.fromkeys((*app.requires, *extra)))) if extra else app
        )
    return resolved


def _order(
    chosen: list[str], apps: Mapping[str, AppSpec[Any]], after: Mapping[str, set[str]]
) -> list[AppSpec[Any]]:
    """Depth-first topological order of ``chosen`` and their requirements (plus the
    ``after`` edges: app -> apps that declared ``before`` it)."""
    order: list[AppSpec[Any]] = []
    done: set[str] = set()
    visiting: list[str] = []

    def visit(name: str, needed_by: str | None) -> None:
        if name in done:
            return
        if name in visiting:
            cycle = " -> ".join([*visiting[visiting.index(name) :], name])
            raise RuntimeBootError(
                f"apps require (or must start before) each other in a cycle: {cycle}"
            )
        app = apps.get(name)
        if app is None:
            raise RuntimeBootError(
                f"app {needed_by!r} requires {name!r}, which is not installed "
                f"(no {APPS_ENTRY_POINT_GROUP} entry point declares it)"
            )
        visiting.append(name)
        for dep in sorted({*app.requires, *after.get(name, ())}):
            visit(dep, name)
        visiting.pop()
        done.add(name)
        order.append(app)

    for name in chosen:
        visit(name, None)
    return order
