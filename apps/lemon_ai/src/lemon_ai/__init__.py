"""LLM providers, streaming, retries, usage and cost."""

from __future__ import annotations

__all__: list[str] = []
