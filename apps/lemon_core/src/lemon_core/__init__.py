"""Lemon's shared language and seams: events, bus, store, execution contracts, runtime."""

from __future__ import annotations

__all__: list[str] = []
