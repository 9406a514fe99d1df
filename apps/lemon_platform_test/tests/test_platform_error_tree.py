"""One error tree: every lemon_platform_test error derives from PlatformTestError, and the
drawing in each ``errors.py`` docstring lists every class with its real parent and mixins."""

from __future__ import annotations

from lemon_platform_test.errors import PlatformTestError
from lemon_platform_test.errors_kit import ErrorTreeContract


class TestPlatformTestErrorTree(ErrorTreeContract):
    package = "lemon_platform_test"
    root = PlatformTestError
