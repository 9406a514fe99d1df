"""ACP content both ways: a prompt's content blocks into one run's prompt and images, and a
session's events and transcript into ``session/update`` payloads."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any, Final

from lemon_acp.errors import RpcError
from lemon_core.execution import MAX_SESSION_MCP_SERVERS, ExecutionContractError, McpServerSpec
from lemon_core.sessions import ToolCard, TranscriptEntry

__all__ = [
    "check_mcp_servers",
    "prompt_of",
    "replay_updates",
    "tool_call_of",
    "tool_kind",
]

_IMAGE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
#: Our tool names -> ACP's tool kinds.
_KINDS: Final[Mapping[str, str]] = {
    "read": "read",
    "ls": "read",
    "write": "edit",
    "edit": "edit",
    "multiedit": "edit",
    "patch": "edit",
    "bash": "execute",
    "grep": "search",
    "find": "search",
    "glob": "search",
    "webfetch": "fetch",
    "websearch": "fetch",
    "web_fetch": "fetch",
    "web_search": "fetch",
    "browser": "fetch",
    "think": "think",
}


def tool_kind(tool: str, action_kind: str | None = None) -> str:
    if tool in _KINDS:
        return _KINDS[tool]
    return {
        "command": "execute",
        "file_change": "edit",
        "web_search": "fetch",
        "fetch": "fetch",
        "reasoning": "think",
    }.get(action_kind or "", "other")


def _locations(args: Mapping[str, Any]) -> list[dict[str, Any]]:
    path = args.get("path") or args.get("file_path")
    if not isinstance(path, str) or not path:
        return []
    location: dict[str, Any] = {"path": path}
    line = args.get("line") or args.get("offset")
    if isinstance(line, int) and line > 0:
        location["line"] = line
    return [location]


def tool_name_of(card: ToolCard) -> str:
    """The tool a card is of (its detail's ``tool``/``name``, else its title's first word)."""
    detail = card.detail
    return str(detail.get("tool") or detail.get("name") or card.title.split(" ", 1)[0])


def tool_call_of(card: ToolCard) -> dict[str, Any]:
    """The ``tool_call`` update announcing ``card`` (phase ``started``)."""
    detail = card.detail
    tool = tool_name_of(card)
    args = detail.get("arguments") or detail.get("args") or {}
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call",
        "toolCallId": card.action_id,
        "title": card.title,
        "kind": tool_kind(tool, str(card.kind)),
        "status": "in_progress",
    }
    if isinstance(args, Mapping):
        update["rawInput"] = dict(args)
        update["locations"] = _locations(args)
    return update


def prompt_of(blocks: object) -> tuple[str, tuple[Mapping[str, Any], ...]]:
    """The prompt text and images of ``session/prompt``'s ``prompt`` (text, image, resource,
    resource_link blocks); -32602 naming the block for anything else."""
    if not isinstance(blocks, list) or not blocks:
        raise RpcError.bad_params("prompt", "must be a non-empty list of content blocks")
    texts: list[str] = []
    images: list[Mapping[str, Any]] = []
    for index, block in enumerate(blocks):
        at = f"prompt[{index}]"
        if not isinstance(block, dict):
            raise RpcError.bad_params(at, "a content block is an object with a 'type'")
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise RpcError.bad_params(f"{at}.text", "must be a string")
            texts.append(text)
        elif kind == "image":
            mime, data = block.get("mimeType"), block.get("data")
            if mime not in _IMAGE_TYPES or not isinstance(data, str):
                raise RpcError.bad_params(
                    at, "an image needs mimeType (png, jpeg, gif, webp) and base64 data"
                )
            try:
                base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError):
                raise RpcError.bad_params(f"{at}.data", "is not base64") from None
            images.append({"type": "image", "data": data, "mime_type": mime})
        elif kind == "resource":
            resource = block.get("resource")
            if not isinstance(resource, dict) or not isinstance(resource.get("uri"), str):
                raise RpcError.bad_params(f"{at}.resource", "needs a uri")
            text = resource.get("text")
            if isinstance(text, str):
                texts.append(f'<resource uri="{resource["uri"]}">\n{text}\n</resource>')
            else:
                mime = resource.get("mimeType", "unknown type")
                texts.append(f"[binary resource {resource['uri']} ({mime})]")
        elif kind == "resource_link":
            uri = block.get("uri")
            if not isinstance(uri, str):
                raise RpcError.bad_params(f"{at}.uri", "must be a string")
            name = block.get("name") or uri
            texts.append(f"[{name}]({uri})")
        else:
            raise RpcError.bad_params(
                f"{at}.type", f"{kind!r} is not supported (text, image, resource, resource_link)"
            )
    return "\n\n".join(texts), tuple(images)


def check_mcp_servers(value: object) -> tuple[McpServerSpec, ...]:
    """``session/new``'s ``mcpServers``: stdio (``command``, ``args``, ``env`` as
    ``[{name, value}]``) and ``http`` (``url``, ``headers`` as ``[{name, value}]``) servers;
    ``sse`` is refused (not advertised). -32602 names the field of a bad one."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise RpcError.bad_params("mcpServers", "must be a list")
    if len(value) > MAX_SESSION_MCP_SERVERS:
        raise RpcError.bad_params(
            "mcpServers", f"at most {MAX_SESSION_MCP_SERVERS} MCP servers per session"
        )
    servers: list[McpServerSpec] = []
    for index, server in enumerate(value):
        at = f"mcpServers[{index}]"
        if not isinstance(server, dict) or not isinstance(server.get("name"), str):
            raise RpcError.bad_params(at, "an MCP server is an object with a name")
        kind = server.get("type", "stdio")
        try:
            if kind == "sse":
                raise RpcError.bad_params(
                    f"{at}.type", "sse MCP servers are not supported (http is)"
                )
            if kind == "http":
                if not isinstance(server.get("url"), str):
                    raise RpcError.bad_params(f"{at}.url", "an http MCP server needs a url")
                spec = McpServerSpec(
                    name=server["name"],
                    transport="http",
                    url=server["url"],
                    headers=_pairs(server.get("headers"), f"{at}.headers"),
                )
            elif kind == "stdio":
                if not isinstance(server.get("command"), str):
                    raise RpcError.bad_params(f"{at}.command", "a stdio MCP server needs a command")
                args = server.get("args", [])
                if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                    raise RpcError.bad_params(f"{at}.args", "must be a list of strings")
                spec = McpServerSpec(
                    name=server["name"],
                    command=server["command"],
                    args=tuple(args),
                    env=_pairs(server.get("env"), f"{at}.env"),
                )
            else:
                raise RpcError.bad_params(
                    f"{at}.type", f"{kind!r} is not an MCP transport (stdio, http)"
                )
        except ExecutionContractError as exc:
            raise RpcError.bad_params(at, str(exc)) from None
        if any(s.name == spec.name for s in servers):
            raise RpcError.bad_params(f"{at}.name", f"two MCP servers are named {spec.name!r}")
        servers.append(spec)
    return tuple(servers)


def _pairs(value: object, at: str) -> dict[str, str]:
    """ACP's ``[{name, value}]`` (env variables, HTTP headers) as a mapping."""
    if value is None:
        return {}
    if not isinstance(value, list):
        raise RpcError.bad_params(at, "must be a list of {name, value} objects")
    out: dict[str, str] = {}
    for index, pair in enumerate(value):
        if (
            not isinstance(pair, dict)
            or not isinstance(pair.get("name"), str)
            or not isinstance(pair.get("value"), str)
        ):
            raise RpcError.bad_params(f"{at}[{index}]", "must be {name, value} strings")
        out[pair["name"]] = pair["value"]
    return out


def replay_updates(entries: tuple[TranscriptEntry, ...]) -> list[dict[str, Any]]:
    """The ``session/update`` payloads that replay a transcript (``session/load``)."""
    updates: list[dict[str, Any]] = []
    for entry in entries:
        content = {"type": "text", "text": entry.text}
        if entry.role == "user":
            updates.append({"sessionUpdate": "user_message_chunk", "content": content})
        elif entry.role == "assistant":
            updates.append({"sessionUpdate": "agent_message_chunk", "content": content})
        elif entry.role == "tool":
            call_id = f"history-{entry.index}"
            tool = entry.tool or "tool"
            updates.append(
                {
                    "sessionUpdate": "tool_call",
                    "toolCallId": call_id,
                    "title": tool,
                    "kind": tool_kind(tool),
                    "status": "in_progress",
                }
            )
            updates.append(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call_id,
                    "status": "completed" if entry.outcome in (None, "ok") else "failed",
                    "content": [{"type": "content", "content": content}],
                }
            )
    return updates
