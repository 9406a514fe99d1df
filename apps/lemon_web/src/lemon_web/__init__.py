"""lemon_web: the chat page the daemon serves (``GET /``, ``/chat/<session key>``).

A browser client of the control plane: the page is static HTML, CSS and ES modules that speak
the control-plane protocol on the daemon's own ``/ws``; this package serves them (mounted through
the runtime's :data:`~lemon_core.mounts.HTTP_MOUNTS`) and owns the page's token login.
"""

from __future__ import annotations

from lemon_web.app import (
    LIVE_SEGMENT_BYTES,
    MAX_EVENT_BYTES,
    PAGE_CACHE_ITEMS,
    PANE_QUEUE_ENTRIES,
    TERMINAL_TOMBSTONES,
    WebApp,
)
from lemon_web.errors import WebError

__all__ = [
    "LIVE_SEGMENT_BYTES",
    "MAX_EVENT_BYTES",
    "PAGE_CACHE_ITEMS",
    "PANE_QUEUE_ENTRIES",
    "TERMINAL_TOMBSTONES",
    "WebApp",
    "WebError",
]
