"""A server on the official ``mcp`` SDK (``MCPServer``): ``python sdk_mcp_server.py stdio`` or
``python sdk_mcp_server.py http PORT`` (Streamable HTTP on 127.0.0.1, sessions on)."""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("sdk-test")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
