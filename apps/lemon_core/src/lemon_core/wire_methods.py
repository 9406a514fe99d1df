"""Wire methods: how an app answers control-plane methods without the plane depending on it.

The control plane (lemon_control_plane) owns the WebSocket wire and its own method table; apps
that own a feature the wire exposes (cron jobs, goals, memory, ...) must not be imported by it,
and must not import it. The seam is this registry, like :mod:`lemon_core.mounts`: the runtime
creates one :class:`WireMethods` per runtime and registers it under :data:`WIRE_METHODS` before
any app starts; an app's lifespan registers its methods (and unregisters them when it stops);
the plane looks a method up here when its own table has no entry of that name, so a registered
method can never shadow one of the plane's, and it advertises the registered names in
``hello-ok.features.methods`` next to its own.

A handler takes a :class:`WireCall` (the request's ``params`` object as decoded JSON, and who
calls) and returns a JSON-able value (``dict``, ``list``, ``str``, numbers, ``None``, or a
msgspec struct): the ``res`` frame's ``payload``. It refuses bad input by raising
:class:`~lemon_core.errors.UsageError` with a message that says what is wrong and how to fix
it (the plane answers ``INVALID_PARAMS`` with it); anything else it raises is the plane's
``INTERNAL_ERROR`` (logged, its message never on the wire).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from lemon_core.execution import Capability
from lemon_core.runtime_errors import RuntimeUsageError

__all__ = ["WIRE_METHODS", "WIRE_SCOPES", "WireCall", "WireHandler", "WireMethod", "WireMethods"]

#: The scopes a method may require (the control plane's token scopes).
WIRE_SCOPES: Final = frozenset({"admin", "read", "write", "approvals", "pairing"})
_NAME: Final = re.compile(r"^[a-z][a-zA-Z0-9_-]*(\.[a-z][a-zA-Z0-9_-]*)*$")


@dataclass(frozen=True, slots=True)
class WireCall:
    """One call of a registered method."""

    method: str
    params: Mapping[str, Any]
    """The request's ``params`` object (``{}`` when the frame had none)."""
    scopes: frozenset[str] = frozenset()
    """The calling connection's scopes (the method's own scope is already checked)."""
    client_id: str | None = None
    token_id: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


WireHandler = Callable[[WireCall], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class WireMethod:
    """One registered method."""

    name: str
    handler: WireHandler
    scope: str | None
    """The scope a connection needs (``None``: any authenticated connection)."""
    owner: str
    """The app that registered it (shown in errors and by ``status``)."""
    description: str = ""


class WireMethods:
    """The runtime's registry of app-owned wire methods (thread-safe; lookups are cheap)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._methods: dict[str, WireMethod] = {}

    def register(
        self,
        name: str,
        handler: WireHandler,
        *,
        scope: str | None,
        owner: str,
        description: str = "",
    ) -> WireMethod:
        """Answer ``name`` with ``handler``. Raises :class:`RuntimeUsageError` for a malformed
        name (``group.verb`` or one word such as ``wake``: lower case first), an unknown
        scope, or a name another app already registered."""
        if not _NAME.match(name):
            raise RuntimeUsageError(
                f"a wire method is named like 'group.verb' or 'verb' (letters, digits, '_', '-'), "
                f"got {name!r}"
            )
        if scope is not None and scope not in WIRE_SCOPES:
            raise RuntimeUsageError(
                f"wire method {name!r}: scope {scope!r} is not one of {sorted(WIRE_SCOPES)}"
            )
        if not callable(handler):
            raise RuntimeUsageError(f"the handler of wire method {name!r} is not callable")
        entry = WireMethod(
            name=name, handler=handler, scope=scope, owner=owner, description=description
        )
        with self._lock:
            existing = self._methods.get(name)
            if existing is not None:
                raise RuntimeUsageError(
                    f"wire method {name!r} is already registered by {existing.owner}; "
                    f"{owner} cannot register it too"
                )
            self._methods = {**self._methods, name: entry}
        return entry

    def unregister(self, name: str) -> bool:
        """Remove ``name``; ``False`` when nothing was registered under it."""
        with self._lock:
            if name not in self._methods:
                return False
            self._methods = {k: v for k, v in self._methods.items() if k != name}
        return True

    def get(self, name: str) -> WireMethod | None:
        return self._methods.get(name)  # a dict swapped whole under the lock: safe to read

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._methods))


#: The runtime's one registry (the runtime registers it before any app starts).
WIRE_METHODS: Final[Capability[WireMethods]] = Capability("WireMethods", WireMethods)
