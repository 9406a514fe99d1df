"""An editor's MCP server on the official ``mcp`` SDK (stdio): ``echo`` and ``mark`` (the value
of ``ACP_TEST_MARK`` the editor set in the server's ``env``)."""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("editor-test")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return f"editor-mcp:{text}"


@server.tool()
def mark() -> str:
    """The ACP_TEST_MARK the editor gave."""
    return os.environ.get("ACP_TEST_MARK", "unset")


if __name__ == "__main__":
    server.run("stdio")
