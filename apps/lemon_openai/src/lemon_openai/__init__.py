"""lemon_openai: an OpenAI-compatible ``/v1`` API on the daemon, a client of the session port.

``POST /v1/chat/completions``, ``POST /v1/responses`` and ``GET /v1/models``, mounted through
``HTTP_MOUNTS`` when ``[openai_api] enabled``, behind the control plane's tokens. It never
reaches the router, the gateway or the executor: every run goes through ``SESSION_PORT``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lemon_core.facade import lazy_exports

if TYPE_CHECKING:
    from lemon_openai._api import API_PREFIX, OpenAIApi, TokenGate
    from lemon_openai._boot import OpenAIApp, lemon_openai_app
    from lemon_openai._section import OpenAIApiConfig
    from lemon_openai.errors import ApiError, OpenAIApiError

#: Where each facade name lives (the lazy loader reads it: loading the config imports the
#: section module only, never the API or the control plane's server).
_EXPORTS: Final[dict[str, tuple[str, str]]] = {
    "API_PREFIX": ("lemon_openai._api", "API_PREFIX"),
    "OpenAIApi": ("lemon_openai._api", "OpenAIApi"),
    "TokenGate": ("lemon_openai._api", "TokenGate"),
    "OpenAIApp": ("lemon_openai._boot", "OpenAIApp"),
    "lemon_openai_app": ("lemon_openai._boot", "lemon_openai_app"),
    "OpenAIApiConfig": ("lemon_openai._section", "OpenAIApiConfig"),
    "ApiError": ("lemon_openai.errors", "ApiError"),
    "OpenAIApiError": ("lemon_openai.errors", "OpenAIApiError"),
}

__all__ = [
    "API_PREFIX",
    "ApiError",
    "OpenAIApi",
    "OpenAIApiConfig",
    "OpenAIApiError",
    "OpenAIApp",
    "TokenGate",
    "lemon_openai_app",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
