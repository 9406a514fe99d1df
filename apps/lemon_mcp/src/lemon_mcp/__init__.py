"""lemon_mcp: the agent uses the tools of MCP servers (stdio and Streamable HTTP).

The ``[mcp]`` section names the servers; the app registers :data:`lemon_core.mcp.MCP_HUB`, a
:class:`McpHubImpl` that starts each server on first use and shares it between runs; the coding
agent asks it for a run's tools and calls them under the approval policy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lemon_core.facade import lazy_exports

if TYPE_CHECKING:
    from lemon_mcp._approvals import ProjectApprovals, project_server_names
    from lemon_mcp._boot import lemon_mcp_app
    from lemon_mcp._client import McpClient, Transport
    from lemon_mcp._conformance import conformance_client
    from lemon_mcp._diagnose import diagnose
    from lemon_mcp._http import HttpAuth, HttpTransport, SseTransport
    from lemon_mcp._hub import McpHubImpl, ServerState, ServerStatus
    from lemon_mcp._naming import tool_names
    from lemon_mcp._oauth import OAuthClient, StoredToken, TokenStore
    from lemon_mcp._section import (
        McpConfig,
        McpServerConfig,
        OAuthSettings,
        ToolOverride,
        definition_hash,
    )
    from lemon_mcp._server import (
        ClientPeer,
        ServedResult,
        ServedTool,
        ToolHost,
        serve_stdio,
        serve_streams,
    )
    from lemon_mcp._server_http import HttpServeError, McpHttpApp, serve_http
    from lemon_mcp._stdio import StdioTransport
    from lemon_mcp.errors import (
        McpAuthError,
        McpConnectionError,
        McpError,
        McpHttpStatusError,
        McpProtocolError,
        McpRemoteError,
        McpTimeoutError,
    )

#: Where each facade name lives (the lazy loader reads it: loading the config imports the
#: section module only, never a transport).
_EXPORTS: Final[dict[str, tuple[str, str]]] = {
    "ProjectApprovals": ("lemon_mcp._approvals", "ProjectApprovals"),
    "project_server_names": ("lemon_mcp._approvals", "project_server_names"),
    "lemon_mcp_app": ("lemon_mcp._boot", "lemon_mcp_app"),
    "McpClient": ("lemon_mcp._client", "McpClient"),
    "Transport": ("lemon_mcp._client", "Transport"),
    "diagnose": ("lemon_mcp._diagnose", "diagnose"),
    "conformance_client": ("lemon_mcp._conformance", "conformance_client"),
    "McpHubImpl": ("lemon_mcp._hub", "McpHubImpl"),
    "ServerState": ("lemon_mcp._hub", "ServerState"),
    "ServerStatus": ("lemon_mcp._hub", "ServerStatus"),
    "tool_names": ("lemon_mcp._naming", "tool_names"),
    "OAuthClient": ("lemon_mcp._oauth", "OAuthClient"),
    "StoredToken": ("lemon_mcp._oauth", "StoredToken"),
    "TokenStore": ("lemon_mcp._oauth", "TokenStore"),
    "OAuthSettings": ("lemon_mcp._section", "OAuthSettings"),
    "HttpAuth": ("lemon_mcp._http", "HttpAuth"),
    "HttpTransport": ("lemon_mcp._http", "HttpTransport"),
    "SseTransport": ("lemon_mcp._http", "SseTransport"),
    "McpAuthError": ("lemon_mcp.errors", "McpAuthError"),
    "McpHttpStatusError": ("lemon_mcp.errors", "McpHttpStatusError"),
    "McpConfig": ("lemon_mcp._section", "McpConfig"),
    "McpServerConfig": ("lemon_mcp._section", "McpServerConfig"),
    "ToolOverride": ("lemon_mcp._section", "ToolOverride"),
    "definition_hash": ("lemon_mcp._section", "definition_hash"),
    "StdioTransport": ("lemon_mcp._stdio", "StdioTransport"),
    "HttpServeError": ("lemon_mcp._server_http", "HttpServeError"),
    "McpHttpApp": ("lemon_mcp._server_http", "McpHttpApp"),
    "serve_http": ("lemon_mcp._server_http", "serve_http"),
    "ClientPeer": ("lemon_mcp._server", "ClientPeer"),
    "ServedResult": ("lemon_mcp._server", "ServedResult"),
    "ServedTool": ("lemon_mcp._server", "ServedTool"),
    "ToolHost": ("lemon_mcp._server", "ToolHost"),
    "serve_stdio": ("lemon_mcp._server", "serve_stdio"),
    "serve_streams": ("lemon_mcp._server", "serve_streams"),
    "McpConnectionError": ("lemon_mcp.errors", "McpConnectionError"),
    "McpError": ("lemon_mcp.errors", "McpError"),
    "McpProtocolError": ("lemon_mcp.errors", "McpProtocolError"),
    "McpRemoteError": ("lemon_mcp.errors", "McpRemoteError"),
    "McpTimeoutError": ("lemon_mcp.errors", "McpTimeoutError"),
}

__all__ = [
    "ClientPeer",
    "HttpAuth",
    "HttpServeError",
    "HttpTransport",
    "McpAuthError",
    "McpClient",
    "McpConfig",
    "McpConnectionError",
    "McpError",
    "McpHttpApp",
    "McpHttpStatusError",
    "McpHubImpl",
    "McpProtocolError",
    "McpRemoteError",
    "McpServerConfig",
    "McpTimeoutError",
    "OAuthClient",
    "OAuthSettings",
    "ProjectApprovals",
    "ServedResult",
    "ServedTool",
    "ServerState",
    "ServerStatus",
    "SseTransport",
    "StdioTransport",
    "StoredToken",
    "TokenStore",
    "ToolHost",
    "ToolOverride",
    "Transport",
    "conformance_client",
    "definition_hash",
    "diagnose",
    "lemon_mcp_app",
    "project_server_names",
    "serve_http",
    "serve_stdio",
    "serve_streams",
    "tool_names",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
