"""An MCP server a client gives for one session (ACP's ``session/new`` ``mcpServers``).

The record travels on the run request (``RunRequest.mcp_servers``) through the router and the
gateway to the executor, which hands it to the runtime's MCP hub with the run's session key:
the hub starts the server for that session only. A definition is checked here, so a bad one is
refused at the submitting edge with the field named; its ``env`` and ``headers`` values may be
secrets (an editor's token for its server): they go to the server only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final, Literal

import msgspec

from lemon_core.execution.errors import ExecutionContractError

__all__ = ["MAX_SESSION_MCP_SERVERS", "McpServerSpec", "check_mcp_servers"]

#: At most this many servers per request (a session's editor rarely gives more than a few).
MAX_SESSION_MCP_SERVERS: Final = 16
_NAME_RE: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ENV_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_RE: Final = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_URL_RE: Final = re.compile(r"^https?://[^/\s]+")


class McpServerSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One session's MCP server: ``stdio`` (``command``, ``args``, ``env``) or ``http``
    (``url``, ``headers``). ``name`` is ``[A-Za-z0-9_-]``, at most 64 characters."""

    name: str
    transport: Literal["stdio", "http"] = "stdio"
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = msgspec.field(default_factory=dict)
    url: str = ""
    headers: Mapping[str, str] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        problem = self.problem()
        if problem is not None:
            raise ExecutionContractError(f"MCP server {self.name!r}: {problem}")

    def problem(self) -> str | None:
        """What is wrong with this definition, in plain words (``None``: nothing)."""
        if not _NAME_RE.match(self.name):
            return "the name must be 1-64 letters, digits, '_' or '-'"
        if self.transport == "stdio":
            if not self.command.strip():
                return "a stdio server needs a command"
            if self.url or self.headers:
                return "url and headers are for http servers"
            bad = [k for k in self.env if not _ENV_RE.match(k)]
            if bad:
                return f"{bad[0]!r} is not an environment variable name"
        else:  # "http" (msgspec and the type checker keep the Literal)
            if not _URL_RE.match(self.url):
                return f"the url must be http:// or https://, got {self.url!r}"
            if self.command or self.args or self.env:
                return "command, args and env are for stdio servers"
            bad = [k for k in self.headers if not _HEADER_RE.match(k)]
            if bad:
                return f"{bad[0]!r} is not an HTTP header name"
        return None


def check_mcp_servers(servers: Iterable[McpServerSpec]) -> tuple[McpServerSpec, ...]:
    """``servers`` as a tuple: each a :class:`McpServerSpec`, names unique, at most
    :data:`MAX_SESSION_MCP_SERVERS`; else :class:`ExecutionContractError`."""
    out = tuple(servers)
    if len(out) > MAX_SESSION_MCP_SERVERS:
        raise ExecutionContractError(
            f"at most {MAX_SESSION_MCP_SERVERS} MCP servers per session, got {len(out)}"
        )
    seen: set[str] = set()
    for server in out:
        if not isinstance(server, McpServerSpec):
            raise ExecutionContractError(f"mcp_servers holds {server!r}, not an McpServerSpec")
        if server.name in seen:
            raise ExecutionContractError(f"two MCP servers are named {server.name!r}")
        seen.add(server.name)
    return out
