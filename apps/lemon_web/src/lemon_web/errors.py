"""lemon_web's errors."""

from __future__ import annotations

__all__ = ["WebError"]


class WebError(Exception):
    """Base class of lemon_web's errors (a misconfigured or missing page asset)."""
