"""lemon_web: the chat page the daemon serves (``GET /``, ``/chat/<session key>``).

A browser client of the control plane: the page is static HTML, CSS and ES modules that speak
the control-plane protocol on the daemon's own ``/ws``; this package serves them (mounted through
the runtime's :data:`~lemon_core.mounts.HTTP_MOUNTS`) and owns the page's token login.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lemon_core.facade import lazy_exports

if TYPE_CHECKING:
    from lemon_web.app import (
        LIVE_SEGMENT_BYTES,
        MAX_EVENT_BYTES,
        PAGE_CACHE_ITEMS,
        PANE_QUEUE_ENTRIES,
        TERMINAL_TOMBSTONES,
        WebApp,
    )
    from lemon_web.errors import WebError

#: Where each facade name lives (booting a runtime without the daemon profile, which imports
#: every app's ``lemon.apps`` hook, loads no Starlette application of this package).
_EXPORTS: Final[dict[str, tuple[str, str]]] = {
    "LIVE_SEGMENT_BYTES": ("lemon_web.app", "LIVE_SEGMENT_BYTES"),
    "MAX_EVENT_BYTES": ("lemon_web.app", "MAX_EVENT_BYTES"),
    "PAGE_CACHE_ITEMS": ("lemon_web.app", "PAGE_CACHE_ITEMS"),
    "PANE_QUEUE_ENTRIES": ("lemon_web.app", "PANE_QUEUE_ENTRIES"),
    "TERMINAL_TOMBSTONES": ("lemon_web.app", "TERMINAL_TOMBSTONES"),
    "WebApp": ("lemon_web.app", "WebApp"),
    "WebError": ("lemon_web.errors", "WebError"),
}

__all__ = [
    "LIVE_SEGMENT_BYTES",
    "MAX_EVENT_BYTES",
    "PAGE_CACHE_ITEMS",
    "PANE_QUEUE_ENTRIES",
    "TERMINAL_TOMBSTONES",
    "WebApp",
    "WebError",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
