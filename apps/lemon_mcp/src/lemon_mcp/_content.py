"""A ``tools/call`` result as text for the model: text, images, resource links, embedded
resources and ``structuredContent``; ``isError`` kept. Binary data never reaches the text: an
image or a blob is named with its type and size."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from lemon_core.mcp import McpToolOutput
from lemon_mcp.errors import McpError

if TYPE_CHECKING:
    from lemon_mcp._client import McpClient

__all__ = ["call_output", "render_result"]


async def call_output(
    client: McpClient,
    *,
    server: str,
    tool: str,
    arguments: Mapping[str, Any],
    deadline_s: float,
    lost: Callable[[str], Awaitable[None]],
) -> McpToolOutput:
    """Call ``tool`` on ``client`` and render what the model reads. A failure is an error
    output naming the tool and server; when the call ended the connection, ``lost(reason)``
    is awaited first (the owner marks the server failed)."""
    try:
        result = await client.call_tool(tool, arguments, deadline_s=deadline_s)
    except McpError as exc:
        if client.closed_reason is not None:
            await lost(client.closed_reason)
        return McpToolOutput(
            content=f"MCP tool {tool!r} of server {server!r} failed: {exc}", is_error=True
        )
    text, is_error = render_result(result)
    return McpToolOutput(content=text, is_error=is_error)


def render_result(result: Mapping[str, Any]) -> tuple[str, bool]:
    parts: list[str] = []
    for item in result.get("content") or ():
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "text":
            parts.append(str(item.get("text", "")))
        elif kind in ("image", "audio"):
            size = len(str(item.get("data", ""))) * 3 // 4
            parts.append(f"[{kind}: {item.get('mimeType', 'unknown type')}, ~{size} bytes]")
        elif kind == "resource_link":
            name = item.get("name") or item.get("title") or ""
            parts.append(f"[resource link: {item.get('uri', '')}{' ' + str(name) if name else ''}]")
        elif kind == "resource":
            resource = item.get("resource")
            if isinstance(resource, Mapping):
                if "text" in resource:
                    parts.append(f"[resource {resource.get('uri', '')}]\n{resource['text']}")
                else:
                    size = len(str(resource.get("blob", ""))) * 3 // 4
                    parts.append(f"[resource {resource.get('uri', '')}: ~{size} bytes of data]")
    structured = result.get("structuredContent")
    if structured is not None and not parts:
        parts.append(msgspec.json.encode(structured).decode())
    is_error = bool(result.get("isError"))
    text = "\n".join(parts)
    if not text:
        text = "(the tool returned no content)"
    return text, is_error
