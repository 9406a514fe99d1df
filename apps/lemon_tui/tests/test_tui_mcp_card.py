"""An MCP tool's card names the server the tool came from (the run's ``detail["mcp"]``); a
built-in tool's card does not."""

from __future__ import annotations

from lemon_tui._widgets import CardEntry


def test_an_mcp_card_names_its_server() -> None:
    detail = {"tool": "mcp_fs_read", "mcp": {"server": "fs[1]", "tool": "read"}}
    card = CardEntry("a1", "mcp_fs_read notes.txt", detail)
    assert card.mcp_server == "fs[1]"
    assert "MCP fs\\[1]" in card.markup()  # escaped: a server name is not markup
    card.complete(True, "alpha", {"tool": "mcp_fs_read"})
    assert "MCP fs\\[1]" in card.markup()


def test_a_builtin_card_names_no_server() -> None:
    card = CardEntry("a2", "read notes.txt", {"tool": "read", "arguments": {}})
    assert card.mcp_server == ""
    assert "MCP" not in card.markup()
