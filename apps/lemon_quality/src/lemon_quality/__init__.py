"""The architecture and quality gate for uv workspaces (``lemon quality``)."""

from __future__ import annotations

from lemon_quality.cli import main

__all__ = ["main"]
