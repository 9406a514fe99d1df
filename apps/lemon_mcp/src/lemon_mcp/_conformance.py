"""The client side of the official conformance suite (``@modelcontextprotocol/conformance``):
what ``lemon mcp conformance-client URL`` runs, as the suite's SDK integration guide says. The
suite starts the command with the server's URL and names the scenario in
``MCP_CONFORMANCE_SCENARIO`` (its details, JSON, in ``MCP_CONFORMANCE_CONTEXT``).

It uses the client the agent uses (:class:`~lemon_mcp.McpClient` over
:class:`~lemon_mcp._http.HttpTransport`): ``initialize``, ``tools/list``, a ``tools/call`` of
each tool with the arguments its schema's defaults give, then the close (DELETE). An
elicitation from the server is accepted with the requested schema's defaults (in conformance
mode only: the agent's client declares no elicitation). The ``auth/*`` scenarios log in first
with the agent's OAuth client (:class:`~lemon_mcp.OAuthClient`), headlessly: its authorization
URL is fetched and the redirects followed to its loopback listener; a token lives in a
temporary home for the run only.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lemon_mcp._client import McpClient

if TYPE_CHECKING:
    from lemon_mcp._http import HttpAuth

__all__ = ["conformance_client", "schema_defaults"]


def schema_defaults(schema: object) -> dict[str, Any]:
    """The ``default`` of each property of an object schema (nested objects too)."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    found: dict[str, Any] = {}
    for name, sub in (props or {}).items() if isinstance(props, Mapping) else ():
        if not isinstance(sub, Mapping):
            continue
        if "default" in sub:
            found[str(name)] = sub["default"]
        elif sub.get("type") == "object":
            nested = schema_defaults(sub)
            if nested:
                found[str(name)] = nested
    return found


def _accept_defaults(params: Mapping[str, Any]) -> Mapping[str, Any]:
    return {"action": "accept", "content": schema_defaults(params.get("requestedSchema"))}


async def conformance_client(
    url: str,
    *,
    scenario: str = "",
    context: Mapping[str, Any] | None = None,
    say: Callable[[str], None] = lambda _line: None,
) -> None:
    """Play ``scenario`` against the server at ``url``; raises :class:`~lemon_mcp.McpError`
    with the reason when the server (or this entry) cannot."""
    from lemon_mcp._http import HttpTransport  # httpx only when used

    with tempfile.TemporaryDirectory(prefix="lemon-mcp-conformance-") as home:
        auth = None
        if scenario.startswith("auth/"):
            auth = await _login(url, context or {}, Path(home), say)
        client = McpClient(
            HttpTransport(name="conformance", url=url, auth=auth), name="conformance"
        )
        client.on_elicit = _accept_defaults
        await _play(client, say)


async def _login(
    url: str, context: Mapping[str, Any], home: Path, say: Callable[[str], None]
) -> HttpAuth:
    """The agent's OAuth client, logged in headlessly: the authorization URL is fetched and its
    redirects followed to the loopback listener (the suite's authorization server approves at
    once). A ``client_id`` (and secret) in the context is a pre-registered client."""
    import httpx

    from lemon_mcp._oauth import OAuthClient
    from lemon_mcp._section import OAuthSettings

    secret = context.get("client_secret")
    settings = OAuthSettings(
        client_id=str(context.get("client_id") or ""),
        client_secret_env="CONFORMANCE_CLIENT_SECRET" if isinstance(secret, str) else "",
    )
    environ = {"CONFORMANCE_CLIENT_SECRET": secret} if isinstance(secret, str) else {}
    oauth = OAuthClient(
        name="conformance", server_url=url, settings=settings, home=home, environ=environ
    )

    async def open_url(authorize: str) -> None:
        async with httpx.AsyncClient(follow_redirects=True, timeout=30.0) as http:
            await http.get(authorize)

    oauth.reauthorize = open_url  # a scope step-up logs in again, headlessly too
    await oauth.login(open_url, timeout_s=30.0)
    say("logged in")
    return oauth


async def _play(client: McpClient, say: Callable[[str], None]) -> None:
    try:
        await client.start()
        say(f"initialized: protocol {client.protocol_version}")
        tools = await client.list_tools()
        say(f"tools/list: {len(tools)} tool(s)")
        for tool in tools:
            name = str(tool.get("name"))
            result = await client.call_tool(
                name, schema_defaults(tool.get("inputSchema")), deadline_s=60.0
            )
            say(f"tools/call {name}: {'error' if result.get('isError') else 'ok'}")
    finally:
        await client.aclose()
