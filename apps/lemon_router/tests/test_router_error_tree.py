"""One error tree: every lemon_router error derives from RouterError, and the drawing in each
``errors.py`` docstring lists every class with its real parent and mixins."""

from __future__ import annotations

from lemon_platform_test.errors_kit import ErrorTreeContract
from lemon_router.errors import RouterError


class TestRouterErrorTree(ErrorTreeContract):
    package = "lemon_router"
    root = RouterError
