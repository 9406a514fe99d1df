"""What ``lemon doctor`` says of each configured MCP server, without starting any (they start
lazily; ``lemon mcp test NAME`` starts one): whether it may start (a project server needs its
approval), whether its command is there, whether the variables it names are set, whether an
OAuth server has a token. One line per server, as data: ``(name, level, detail)`` with level
``ok`` | ``warn`` (a server that cannot start never blocks the agent: it is a warning)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from lemon_core.config import Config
from lemon_mcp._approvals import ProjectApprovals, project_server_names
from lemon_mcp._oauth import TokenStore
from lemon_mcp._section import McpConfig, McpServerConfig, definition_hash

__all__ = ["diagnose"]

Level = Literal["ok", "warn"]


def diagnose(
    config: Config, *, home: Path, cwd: Path, environ: Mapping[str, str]
) -> list[tuple[str, Level, str]]:
    """One ``(server, level, detail)`` per configured server (empty when there are none)."""
    section = config.section(McpConfig)
    if not section.servers:
        return []
    project, from_project = project_server_names(cwd, home)
    approvals = ProjectApprovals(home)
    out: list[tuple[str, Level, str]] = []
    for name, server in sorted(section.servers.items()):
        what = server.command if server.transport == "stdio" else server.url
        if not server.enabled:
            out.append((name, "ok", f"{server.transport} {what}: disabled"))
            continue
        if (
            project is not None
            and name in from_project
            and not approvals.approved(project, name, definition_hash(server))
        ):
            out.append((name, "warn", f"defined in {project}: needs `lemon mcp approve {name}`"))
            continue
        problems = _problems(name, server, home, environ)
        if problems:
            out.append((name, "warn", f"{server.transport} {what}: " + "; ".join(problems)))
        else:
            out.append((name, "ok", f"{server.transport} {what}: ready (starts on first use)"))
    return out


def _problems(
    name: str, server: McpServerConfig, home: Path, environ: Mapping[str, str]
) -> list[str]:
    problems: list[str] = []
    if server.transport == "stdio":
        command = Path(server.command).expanduser()
        found = (
            command.is_file() and os.access(command, os.X_OK)
            if command.is_absolute() or "/" in server.command
            else shutil.which(server.command, path=environ.get("PATH")) is not None
        )
        if not found:
            problems.append(f"command {server.command!r} not found")
    wanted = [*server.env_from.values(), *server.headers_env.values()]
    wanted += [v for v in (server.bearer_token_env, server.oauth.client_secret_env) if v]
    unset = sorted({v for v in wanted if v not in environ})
    if unset:
        problems.append(f"unset variable(s): {', '.join(unset)}")
    if (
        server.auth == "oauth"
        and server.oauth.grant == "authorization_code"
        and TokenStore(home).load(name) is None
    ):
        problems.append(f"not logged in: run `lemon mcp login {name}`")
    return problems
