"""A server on the official ``mcp`` SDK (``MCPServer``): ``python sdk_mcp_server.py stdio``,
``python sdk_mcp_server.py http PORT`` (Streamable HTTP on 127.0.0.1, sessions on) or
``python sdk_mcp_server.py sse PORT`` (the legacy HTTP+SSE transport at ``/sse``).

With ``extras`` last on the command line: ``grow`` answers at once and then, after its
answer, adds the tool ``late`` and sends ``notifications/tools/list_changed`` unrelated to
any request (over Streamable HTTP that reaches the client on the GET stream only); a
resource and a prompt are offered too.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("sdk-test")
_owned: set[asyncio.Task[None]] = set()


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def late() -> str:
    """A tool added at run time."""
    return "late"


async def grow(ctx: Context[Any, Any]) -> str:
    """Add the tool `late`, then announce the change (after this answer)."""
    session = ctx.session

    async def announce() -> None:
        await asyncio.sleep(0.2)  # after the POST's answer: only the GET stream remains open
        server.add_tool(late)
        await session.send_tool_list_changed()

    task = asyncio.get_running_loop().create_task(announce())
    _owned.add(task)
    task.add_done_callback(_owned.discard)
    return "growing"


def readme() -> str:
    return "the note"


def greet(who: str) -> str:
    return f"Say hello to {who}."


if __name__ == "__main__":
    if sys.argv[-1] == "extras":
        server.tool()(grow)
        server.resource("note://readme", name="readme", description="A short note.")(readme)
        server.prompt(name="greet", description="Greet someone.")(greet)
    if sys.argv[1] == "stdio":
        server.run("stdio")
    elif sys.argv[1] == "sse":
        server.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
