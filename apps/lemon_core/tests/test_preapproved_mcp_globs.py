"""``preapproved`` takes tool names, ``*``, and globs over MCP tools only."""

from __future__ import annotations

import pytest

from lemon_core.execution import ALL_TOOLS, check_preapproved
from lemon_core.execution.errors import InvalidToolPolicyError


def test_an_mcp_glob_is_kept_and_other_globs_are_refused() -> None:
    assert check_preapproved(["read", "mcp_fs_*", "mcp_web_?ead"]) == {
        "read", "mcp_fs_*", "mcp_web_?ead",
    }  # fmt: skip
    assert check_preapproved([ALL_TOOLS]) == {ALL_TOOLS}
    with pytest.raises(InvalidToolPolicyError, match="invalid tool name 'ba\\*'"):
        check_preapproved(["ba*"])
    with pytest.raises(InvalidToolPolicyError):
        check_preapproved(["mcp_fs_[abc]"])
