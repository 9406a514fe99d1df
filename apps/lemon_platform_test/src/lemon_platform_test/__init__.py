"""Contract kits (pytest plugins) for Lemon events, backends and providers."""

from __future__ import annotations

__all__: list[str] = []
