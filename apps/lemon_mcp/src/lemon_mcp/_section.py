"""``[mcp]``: the MCP servers whose tools the agent may use (this app's README documents each
key).

``[mcp.servers.NAME]`` (NAME = ``[A-Za-z0-9_-]+``) is a stdio server (``command``, ``args``,
``env``, ``env_from``, ``cwd``) or a Streamable HTTP one (``url``, ``headers_env``,
``bearer_token_env``). A secret never sits in the file: ``env_from``, ``headers_env`` and
``bearer_token_env`` name the variables holding it. ``tools.allow`` / ``tools.deny`` are glob
lists over the server's tool names; ``[mcp.servers.NAME.tools.TOOL] approval`` overrides the
server's ``approval`` for one tool. A project's ``.lemon/config.toml`` may define servers, but
they do not start until approved with ``lemon mcp approve NAME``, and it may not set
``approval = "allow"`` (that widens what the agent runs without asking).
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Final, Literal

import msgspec

from lemon_core.config import CheckContext, ConfigIssue, Section

__all__ = [
    "SECTIONS",
    "McpConfig",
    "McpServerConfig",
    "OAuthSettings",
    "ToolOverride",
    "definition_hash",
]

SERVER_NAME_RE: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ENV_NAME_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_RE: Final = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_FILTER_KEYS: Final = frozenset({"allow", "deny"})

Approval = Literal["ask", "allow", "deny"]


class ToolOverride(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[mcp.servers.NAME.tools.TOOL]``: one tool's own approval."""

    approval: Approval = "ask"


class OAuthSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[mcp.servers.NAME.oauth]`` (with ``auth = "oauth"``): how to get a token. Endpoints
    are discovered (protected-resource, then authorization-server metadata); a client is
    registered dynamically unless ``client_id`` is set. Never a secret in the file."""

    grant: Literal["authorization_code", "client_credentials"] = "authorization_code"
    client_id: str = ""
    client_secret_env: str = ""
    """The variable holding the client secret (client credentials, or a confidential client)."""
    scopes: tuple[str, ...] = ()
    redirect_port: Annotated[int, msgspec.Meta(ge=0, le=65535)] = 0
    """The loopback port ``lemon mcp login`` listens on (0: any free port)."""


class McpServerConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One server: stdio (``command``) or Streamable HTTP (``url``), never both."""

    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = msgspec.field(default_factory=dict)
    """Plain values for the server's environment (not secrets: use ``env_from``)."""
    env_from: dict[str, str] = msgspec.field(default_factory=dict)
    """``{SERVER_VAR = "OUR_VAR"}``: the server gets ``SERVER_VAR`` set from our ``OUR_VAR``."""
    cwd: str = ""
    url: str = ""
    headers_env: dict[str, str] = msgspec.field(default_factory=dict)
    """``{"X-Api-Key" = "OUR_VAR"}``: each header's value is read from a variable."""
    bearer_token_env: str = ""
    http_transport: Literal["auto", "streamable-http", "sse"] = "auto"
    """``auto``: Streamable HTTP, falling back to the legacy HTTP+SSE transport when the
    server answers ``initialize`` with 400, 404 or 405."""
    auth: Literal["none", "oauth"] = "none"
    oauth: OAuthSettings = msgspec.field(default_factory=OAuthSettings)
    startup_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=600)] = 30.0
    call_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=86_400)] = 300.0
    enabled: bool = True
    approval: Approval = "ask"
    tools: dict[str, Any] = msgspec.field(default_factory=dict)
    """``allow`` / ``deny`` glob lists, and per-tool ``[...tools.TOOL]`` tables."""

    def problems(self) -> list[str]:
        """What is wrong with this (merged) definition, each said with how to fix it."""
        out: list[str] = []
        if bool(self.command) == bool(self.url):
            out.append(
                "set exactly one of `command` (a stdio server) or `url` (a Streamable HTTP server)"
            )
        if self.url:
            if not re.match(r"^https?://[^/\s]+", self.url):
                out.append(f"`url` must be an http:// or https:// URL, got {self.url!r}")
            if self.args or self.env or self.env_from or self.cwd:
                out.append("`args`, `env`, `env_from` and `cwd` are for stdio servers only")
        elif (
            self.headers_env
            or self.bearer_token_env
            or self.auth != "none"
            or self.http_transport != "auto"
        ):
            out.append(
                "`headers_env`, `bearer_token_env`, `auth` and `http_transport` are for HTTP "
                "servers only"
            )
        if self.auth == "oauth" and self.bearer_token_env:
            out.append('set either `auth = "oauth"` or `bearer_token_env`, not both')
        if self.oauth != OAuthSettings() and self.auth != "oauth":
            out.append('`[...oauth]` is read only with `auth = "oauth"`')
        secret = self.oauth.client_secret_env
        if secret and not _ENV_NAME_RE.match(secret):
            out.append(f"oauth.client_secret_env: {secret!r} is not a variable name")
        if self.oauth.grant == "client_credentials" and not (self.oauth.client_id and secret):
            out.append(
                'oauth.grant = "client_credentials" needs `client_id` and `client_secret_env`'
            )
        for var in [*self.env, *self.env_from, *self.env_from.values()]:
            if not _ENV_NAME_RE.match(var):
                out.append(f"{var!r} is not an environment variable name")
        for header, var in self.headers_env.items():
            if not _HEADER_RE.match(header):
                out.append(f"{header!r} is not an HTTP header name")
            if not _ENV_NAME_RE.match(var):
                out.append(f"headers_env.{header}: {var!r} is not a variable name")
        if self.bearer_token_env and not _ENV_NAME_RE.match(self.bearer_token_env):
            out.append(f"bearer_token_env: {self.bearer_token_env!r} is not a variable name")
        for key, value in self.tools.items():
            if key in _FILTER_KEYS:
                if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
                    out.append(f"tools.{key} must be a list of glob patterns (strings)")
                continue
            if not isinstance(value, dict):
                out.append(
                    f"tools.{key} must be a table (`[...tools.{key}] approval = ...`); only "
                    "`allow` and `deny` are lists"
                )
                continue
            try:
                msgspec.convert(value, ToolOverride, strict=True)
            except msgspec.ValidationError as exc:
                out.append(f"tools.{key}: {exc}")
        return out

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command else "http"

    @property
    def allow(self) -> tuple[str, ...]:
        value = self.tools.get("allow")
        return tuple(value) if isinstance(value, list) else ("*",)

    @property
    def deny(self) -> tuple[str, ...]:
        value = self.tools.get("deny")
        return tuple(value) if isinstance(value, list) else ()

    def offers(self, tool: str) -> bool:
        """True when ``tool`` passes ``tools.allow`` / ``tools.deny`` and is not denied."""
        if any(fnmatch.fnmatchcase(tool, p) for p in self.deny):
            return False
        return any(fnmatch.fnmatchcase(tool, p) for p in self.allow)

    def overrides(self) -> dict[str, ToolOverride]:
        """The per-tool ``[...tools.TOOL]`` tables."""
        out: dict[str, ToolOverride] = {}
        for key, value in self.tools.items():
            if key not in _FILTER_KEYS and isinstance(value, dict):
                with contextlib.suppress(msgspec.ValidationError):
                    out[key] = msgspec.convert(value, ToolOverride)
        return out

    def approval_of(self, tool: str) -> Approval:
        raw = self.tools.get(tool) if tool not in _FILTER_KEYS else None
        if isinstance(raw, dict):
            try:
                return msgspec.convert(raw, ToolOverride).approval
            except msgspec.ValidationError:
                return "deny"  # reported by problems(); never run an invalid override
        return self.approval


#: Keys added after approvals were first recorded: left out of the hash while at their
#: default, so adding them did not lapse every approval.
_LATER_KEYS: Final = {
    "http_transport": "auto",
    "auth": "none",
    "oauth": msgspec.to_builtins(OAuthSettings()),
}


def definition_hash(server: McpServerConfig) -> str:
    """A stable hash of everything that decides what the server runs and may do."""
    raw = msgspec.to_builtins(server)
    for key, default in _LATER_KEYS.items():
        if raw.get(key) == default:
            raw.pop(key, None)
    encoded = msgspec.json.encode(raw, order="sorted")
    return hashlib.sha256(encoded).hexdigest()


class McpConfig(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[mcp]``: no servers by default."""

    servers: dict[str, McpServerConfig] = msgspec.field(default_factory=dict)
    max_servers: Annotated[int, msgspec.Meta(ge=1, le=256)] = 32
    discover_wait_s: Annotated[float, msgspec.Meta(ge=0, le=600)] = 10.0
    """How long a run waits for servers still starting; one slower than this goes on starting
    (up to its ``startup_timeout_s``) and is offered to the next run."""

    def check(self, name: str, ctx: CheckContext) -> Iterable[ConfigIssue]:
        home_file = str(ctx.home / "config.toml")
        if len(self.servers) > self.max_servers:
            yield ctx.issue(
                f"{name}.servers",
                f"{len(self.servers)} servers configured, more than max_servers "
                f"({self.max_servers})",
                "remove servers or raise max_servers",
            )
        for server_name, server in self.servers.items():
            key = f"{name}.servers.{server_name}"
            if not SERVER_NAME_RE.match(server_name):
                yield ctx.issue(
                    key,
                    f"invalid server name {server_name!r}",
                    "use 1-64 letters, digits, '_' or '-'",
                )
            for problem in server.problems():
                yield ctx.issue(key, problem)
            yield from _widening(ctx, key, server, home_file)

    def secret_env_names(self) -> Iterable[str | None]:
        for server in self.servers.values():
            yield from server.env_from.values()
            yield from server.headers_env.values()
            yield server.bearer_token_env or None
            yield server.oauth.client_secret_env or None


def _widening(
    ctx: CheckContext, key: str, server: McpServerConfig, home_file: str
) -> Iterable[ConfigIssue]:
    """A project file may narrow ``approval`` (``ask``, ``deny``) but never set ``allow``."""
    candidates: list[tuple[str, str]] = [(f"{key}.approval", server.approval)]
    candidates += [
        (f"{key}.tools.{tool}.approval", value.approval)
        for tool, value in server.overrides().items()
    ]
    for dotted, value in candidates:
        origin = ctx.origin(dotted)
        if value == "allow" and origin not in (home_file, "config", "environment"):
            yield ctx.issue(
                dotted,
                'a project file cannot set approval = "allow" (it would run the server\'s '
                "tools without asking)",
                f'set it in {home_file}, or use approval = "ask"',
            )


#: The config sections this app owns, by name (the ``lemon.config`` entry point names it).
SECTIONS: Final[Mapping[str, type[Section]]] = {"mcp": McpConfig}
