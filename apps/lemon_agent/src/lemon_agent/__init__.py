"""The agent loop, tool registry and event stream."""

from __future__ import annotations

__all__: list[str] = []
