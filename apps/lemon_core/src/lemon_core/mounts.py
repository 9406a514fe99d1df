"""HTTP mounts: how an app serves HTTP (or WebSocket) routes on the daemon's one server.

The daemon's HTTP server belongs to lemon_control_plane; other apps (the web page, webhook
ingress, a channel's webhook mode) must not import it, and the control plane must not depend on
them. The seam is this registry: the runtime creates one :class:`HttpMounts` per runtime and
registers it under :data:`HTTP_MOUNTS` before any app starts; an app's start hook mounts an ASGI
application under a path prefix (and unmounts it on stop); the control plane's server looks the
prefix up on every request it does not answer itself (``/healthz``, ``/ws``). No web framework is
imported here: an ASGI application is a plain callable.

Mounted applications see the full request path (``scope["path"]`` unchanged) and do their own
authentication: the control plane only answers requests nobody mounted with a 404.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Final

from lemon_core.execution import Capability
from lemon_core.runtime_errors import RuntimeUsageError

__all__ = ["HTTP_MOUNTS", "RESERVED_PATHS", "ASGIApp", "HttpMount", "HttpMounts"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Paths the control plane answers itself; nobody may mount them (or below them).
RESERVED_PATHS: Final[tuple[str, ...]] = ("/healthz", "/ws")


@dataclass(frozen=True, slots=True)
class HttpMount:
    """One mounted application."""

    prefix: str
    """``/`` (the fallback for every path nobody else serves) or ``/name[/more]`` (no trailing
    slash); it matches the prefix itself and every path below it."""
    app: ASGIApp
    owner: str
    """The app that mounted it (shown by ``status`` and in errors)."""
    description: str = ""

    def matches(self, path: str) -> bool:
        if self.prefix == "/":
            return True
        return path == self.prefix or path.startswith(self.prefix + "/")


class HttpMounts:
    """The runtime's registry of mounted ASGI applications (thread-safe; lookups are cheap)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._mounts: tuple[HttpMount, ...] = ()  # longest prefix first

    def mount(self, prefix: str, app: ASGIApp, *, owner: str, description: str = "") -> HttpMount:
        """Serve ``app`` under ``prefix``. Raises :class:`RuntimeUsageError` for a malformed
        prefix, a reserved path, or a prefix another app already mounted."""
        if not prefix.startswith("/"):
            raise RuntimeUsageError(f"an HTTP mount prefix starts with '/', got {prefix!r}")
        if prefix != "/" and (prefix.endswith("/") or "//" in prefix):
            raise RuntimeUsageError(
                f"an HTTP mount prefix has no trailing or doubled '/', got {prefix!r}"
            )
        for reserved in RESERVED_PATHS:
            if prefix == reserved or prefix.startswith(reserved + "/"):
                raise RuntimeUsageError(f"{prefix!r} is the control plane's own path")
        if not callable(app):
            raise RuntimeUsageError(f"the application mounted at {prefix!r} is not callable")
        entry = HttpMount(prefix=prefix, app=app, owner=owner, description=description)
        with self._lock:
            for existing in self._mounts:
                if existing.prefix == prefix:
                    raise RuntimeUsageError(
                        f"{prefix!r} is already mounted by {existing.owner}; "
                        f"{owner} cannot mount it too"
                    )
            mounts = [*self._mounts, entry]
            mounts.sort(key=lambda m: (m.prefix == "/", -len(m.prefix)))
            self._mounts = tuple(mounts)
        return entry

    def unmount(self, prefix: str) -> bool:
        """Remove the mount at ``prefix``; ``False`` when nothing was mounted there."""
        with self._lock:
            kept = tuple(m for m in self._mounts if m.prefix != prefix)
            removed = len(kept) != len(self._mounts)
            self._mounts = kept
        return removed

    def resolve(self, path: str) -> HttpMount | None:
        """The mount serving ``path`` (the longest matching prefix), or ``None``."""
        for entry in self._mounts:  # a tuple swapped whole under the lock: safe to iterate
            if entry.matches(path):
                return entry
        return None

    def mounts(self) -> tuple[HttpMount, ...]:
        return self._mounts


#: The runtime's one registry (the runtime registers it before any app starts).
HTTP_MOUNTS: Final[Capability[HttpMounts]] = Capability("HttpMounts", HttpMounts)
