"""One error tree: every lemon_cli error derives from LemonCliError, and the drawing in each
``errors.py`` docstring lists every class with its real parent and mixins."""

from __future__ import annotations

from lemon_cli.errors import LemonCliError
from lemon_platform_test.errors_kit import ErrorTreeContract


class TestCliErrorTree(ErrorTreeContract):
    package = "lemon_cli"
    root = LemonCliError
