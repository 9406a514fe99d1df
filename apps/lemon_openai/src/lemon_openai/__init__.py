"""lemon_openai: an OpenAI-compatible ``/v1`` API on the daemon, a client of the session port.

``POST /v1/chat/completions``, ``POST /v1/responses`` and ``GET /v1/models``, mounted through
``HTTP_MOUNTS`` when ``[openai_api] enabled``, behind the control plane's tokens. It never
reaches the router, the gateway or the executor: every run goes through ``SESSION_PORT``.
"""

from __future__ import annotations

from lemon_openai._api import API_PREFIX, OpenAIApi, TokenGate
from lemon_openai._boot import OpenAIApp, lemon_openai_app
from lemon_openai._section import OpenAIApiConfig
from lemon_openai.errors import ApiError, OpenAIApiError

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
