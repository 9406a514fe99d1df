"""Execution slots, engine lock, thread workers and the run lifecycle."""

from __future__ import annotations

__all__: list[str] = []
