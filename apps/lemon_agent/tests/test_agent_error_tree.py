"""One error tree: every lemon_agent error derives from LemonAgentError, and the drawing in each
``errors.py`` docstring lists every class with its real parent and mixins."""

from __future__ import annotations

from lemon_agent.errors import LemonAgentError
from lemon_platform_test.errors_kit import ErrorTreeContract


class TestAgentErrorTree(ErrorTreeContract):
    package = "lemon_agent"
    root = LemonAgentError
