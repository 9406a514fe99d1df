"""The scripted provider server and the provider contract kit.

:class:`ScriptedProviderServer` is a real HTTP server on 127.0.0.1 that speaks the OpenAI chat
completions and the Anthropic messages wire formats with scripted answers (text, thinking, tool
calls including parallel ones, errors such as 429 with ``retry-after``, 500, 401, context
overflow, slow streams, pauses at a :class:`Gate`, mid-stream disconnects) and records the
requests it got. :class:`ProviderContract` is the test suite every provider passes. The pytest
fixtures (``scripted_provider``) live in :mod:`lemon_platform_test.providers.fixtures` and are
registered by the ``lemon_platform_test`` pytest plugin.
"""

from __future__ import annotations

from lemon_platform_test.providers._contract import ProviderContract, ProviderHarness
from lemon_platform_test.providers._script import (
    Gate,
    RecordedRequest,
    RecordedStream,
    ScriptedError,
    ScriptedToolCall,
    ScriptedTurn,
    ScriptItem,
    recording_names,
)
from lemon_platform_test.providers._server import ScriptedProviderServer

__all__ = [
    "Gate",
    "ProviderContract",
    "ProviderHarness",
    "RecordedRequest",
    "RecordedStream",
    "ScriptItem",
    "ScriptedError",
    "ScriptedProviderServer",
    "ScriptedToolCall",
    "ScriptedTurn",
    "recording_names",
]
