"""One error tree: every coding_agent error derives from CodingAgentError, and the drawing in each
``errors.py`` docstring lists every class with its real parent and mixins."""

from __future__ import annotations

from coding_agent.errors import CodingAgentError
from lemon_platform_test.errors_kit import ErrorTreeContract


class TestCodingAgentErrorTree(ErrorTreeContract):
    package = "coding_agent"
    root = CodingAgentError
