"""One error tree: every lemon_gateway error derives from GatewayError, and the drawing in each
``errors.py`` docstring lists every class with its real parent and mixins."""

from __future__ import annotations

from lemon_gateway.errors import GatewayError
from lemon_platform_test.errors_kit import ErrorTreeContract


class TestGatewayErrorTree(ErrorTreeContract):
    package = "lemon_gateway"
    root = GatewayError
