"""The ``lemon`` command and the terminal client."""

from __future__ import annotations

from lemon_cli.main import app, main

__all__ = ["app", "main"]
