"""``lemon mcp list|approve|revoke|tools|test|login|logout|status|logs|serve``: MCP servers.

``list`` shows each server of the configuration seen from the current directory (the home's
and the project's ``.lemon/config.toml``): its transport, where it is defined, whether it may
start (a project server needs ``approve``) and its approval. ``approve NAME`` approves a server
the project defines, bound to a hash of its definition (any change lapses it); ``revoke NAME``
withdraws that. ``tools NAME`` starts the server here, lists its tools as the model sees them
(``mcp_<server>_<tool>``) and stops it; ``test NAME`` starts it, lists, pings and stops it,
with the time of each step. ``login NAME`` runs an OAuth server's login (authorization code
with PKCE and a loopback redirect; the URL is printed and opened in a browser), ``logout NAME``
forgets its token; ``status`` shows the running daemon's servers (``mcp.status``), ``logs
NAME`` its stderr ring of a stdio server (``mcp.logs``). ``serve`` is the other direction:
Lemon's coding tools as an MCP server on stdio, or on Streamable HTTP with ``--http HOST:PORT``.
Secrets are never shown: only the variables naming them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lemon_cli._groups import command_group

if TYPE_CHECKING:
    from lemon_core.config import Config
    from lemon_mcp import McpServerConfig, OAuthClient

__all__ = ["mcp_app"]

mcp_app = command_group("List MCP servers, approve a project's servers, list a server's tools.")


def _fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _load() -> tuple[Config, Path, Path]:
    from lemon_core.config import ConfigError, lemon_home, load_config

    home, cwd = lemon_home(), Path.cwd()
    try:
        return load_config(cwd=cwd, home=home).config, home, cwd
    except ConfigError as exc:
        raise _fail(f"{exc}\n(fix it, then check with `lemon config validate`)", 2) from None


def _what(server: McpServerConfig) -> str:
    if server.transport == "stdio":
        return " ".join([server.command, *server.args])
    return server.url


@mcp_app.command("list")
def list_servers(
    as_json: Annotated[bool, typer.Option("--json", help="versioned JSON")] = False,
) -> None:
    """Each configured server: transport, where it is defined, whether it may start."""
    import json

    from lemon_mcp import McpConfig, ProjectApprovals, definition_hash, project_server_names

    config, home, cwd = _load()
    section = config.section(McpConfig)
    project, from_project = project_server_names(cwd, home)
    approvals = ProjectApprovals(home)
    rows = []
    for name, server in sorted(section.servers.items()):
        in_project = project is not None and name in from_project
        approved = not in_project or (
            project is not None and approvals.approved(project, name, definition_hash(server))
        )
        state = (
            "disabled"
            if not server.enabled
            else "ready to start"
            if approved
            else "needs approval (lemon mcp approve " + name + ")"
        )
        rows.append({
            "name": name, "transport": server.transport, "runs": _what(server),
            "defined_in": str(project) if in_project else "home", "state": state,
            "approval": server.approval,
        })  # fmt: skip
    if as_json:
        typer.echo(json.dumps({"version": 1, "servers": rows}, indent=2))
        return
    if not rows:
        typer.echo("no MCP servers configured ([mcp.servers.NAME] in config.toml)")
        return
    for row in rows:
        typer.echo(
            f"{row['name']}  {row['transport']}  {row['state']}  approval={row['approval']}\n"
            f"    {row['runs']}  ({row['defined_in']})"
        )


def _project_server(name: str) -> tuple[Path, str, McpServerConfig, Path]:
    from lemon_mcp import McpConfig, definition_hash, project_server_names

    config, home, cwd = _load()
    server = config.section(McpConfig).servers.get(name)
    project, from_project = project_server_names(cwd, home)
    if server is None:
        raise _fail(f"no MCP server named {name!r} (see `lemon mcp list`)")
    if project is None or name not in from_project:
        raise _fail(
            f"{name!r} is defined in the home config, which needs no approval; approve runs "
            "in a project whose .lemon/config.toml defines the server"
        )
    return project, definition_hash(server), server, home


@mcp_app.command("approve")
def approve(name: Annotated[str, typer.Argument(help="the server's name")]) -> None:
    """Approve a server this project defines (until its definition changes)."""
    from lemon_mcp import ProjectApprovals

    project, digest, server, home = _project_server(name)
    ProjectApprovals(home).approve(project, name, digest)
    typer.echo(f"approved {name} for {project}: it runs {_what(server)}")


@mcp_app.command("revoke")
def revoke(name: Annotated[str, typer.Argument(help="the server's name")]) -> None:
    """Withdraw the approval of a server this project defines."""
    from lemon_mcp import ProjectApprovals

    project, _digest, _server, home = _project_server(name)
    if not ProjectApprovals(home).revoke(project, name):
        raise _fail(f"{name!r} was not approved for {project}")
    typer.echo(f"revoked {name} for {project}")


@mcp_app.command("tools")
def tools(
    name: Annotated[str, typer.Argument(help="the server's name")],
    everything: Annotated[
        bool, typer.Option("--all", help="also list its resources and prompts")
    ] = False,
) -> None:
    """Start the server, list its tools as the model sees them, stop it."""
    import asyncio

    if everything:
        _list_everything(name)
        return
    from lemon_core.config import read_secrets
    from lemon_mcp import McpConfig, McpHubImpl

    config, home, cwd = _load()
    if name not in config.section(McpConfig).servers:
        raise _fail(f"no MCP server named {name!r} (see `lemon mcp list`)")
    hub = McpHubImpl(home=home, environ={**read_secrets(home), **os.environ})

    async def discover() -> tuple[list[tuple[str, str, str]], str | None]:
        try:
            found = await hub.discover(config, cwd=cwd)
        finally:
            await hub.aclose()
        listed: list[tuple[str, str, str]] = [
            (t.name, t.approval, t.description.splitlines()[0] if t.description else "")
            for t in found.tools
            if t.server == name
        ]
        return listed, found.unavailable.get(name)

    listed, why = asyncio.run(discover())
    if why is not None:
        raise _fail(f"server {name} is unavailable: {why}")
    for tool_name, approval, description in listed:
        typer.echo(f"{tool_name}  approval={approval}  {description}")
    if not listed:
        typer.echo(f"server {name} offers no tools (check tools.allow / tools.deny)")


@mcp_app.command("test")
def test(name: Annotated[str, typer.Argument(help="the server's name")]) -> None:
    """Start the server, list its tools, ping it and stop it, timing each step."""
    import asyncio
    import time

    from lemon_core.config import read_secrets
    from lemon_mcp import McpClient, McpConfig, McpError, McpHubImpl

    config, home, cwd = _load()
    server = config.section(McpConfig).servers.get(name)
    if server is None:
        raise _fail(f"no MCP server named {name!r} (see `lemon mcp list`)")
    hub = McpHubImpl(home=home, environ={**read_secrets(home), **os.environ})
    usable, refused = hub.configured(config, cwd=cwd)
    if name in refused:
        raise _fail(refused[name])
    if name not in usable:
        raise _fail(f"server {name} is disabled (enabled = false)")

    async def steps() -> list[tuple[str, float]]:
        timings: list[tuple[str, float]] = []
        client = McpClient(hub.transport_for(name, server), name=name)
        try:
            began = time.perf_counter()
            await asyncio.wait_for(client.start(), server.startup_timeout_s)
            timings.append(("start (initialize)", time.perf_counter() - began))
            began = time.perf_counter()
            listed = await client.list_tools()
            timings.append((f"tools/list ({len(listed)} tools)", time.perf_counter() - began))
            began = time.perf_counter()
            await client.ping()
            timings.append(("ping", time.perf_counter() - began))
        finally:
            began = time.perf_counter()
            await client.aclose()
            timings.append(("stop", time.perf_counter() - began))
        return timings

    try:
        timings = asyncio.run(steps())
    except (McpError, TimeoutError) as exc:
        raise _fail(f"server {name} failed: {str(exc) or 'timed out'}") from None
    for step, seconds in timings:
        typer.echo(f"{step}: {seconds * 1000:.1f} ms")
    typer.echo(f"server {name} ok (protocol and tools as above)")


def _list_everything(name: str) -> None:
    """Tools (by the server's names), resources and prompts of one server."""
    import asyncio

    from lemon_core.config import read_secrets
    from lemon_mcp import McpClient, McpConfig, McpError, McpHubImpl

    config, home, cwd = _load()
    server = config.section(McpConfig).servers.get(name)
    if server is None:
        raise _fail(f"no MCP server named {name!r} (see `lemon mcp list`)")
    hub = McpHubImpl(home=home, environ={**read_secrets(home), **os.environ})
    _usable, refused = hub.configured(config, cwd=cwd)
    if name in refused:
        raise _fail(refused[name])

    async def listing() -> list[str]:
        client = McpClient(hub.transport_for(name, server), name=name)
        try:
            await asyncio.wait_for(client.start(), server.startup_timeout_s)
            lines = [f"tool {t.get('name')}: {_first_line(t)}" for t in await client.list_tools()]
            lines += [
                f"resource {r.get('uri')} ({r.get('name')}): {_first_line(r)}"
                for r in await client.list_resources()
            ]
            lines += [
                f"prompt {p.get('name')}: {_first_line(p)}" for p in await client.list_prompts()
            ]
            return lines
        finally:
            await client.aclose()

    try:
        lines = asyncio.run(listing())
    except (McpError, TimeoutError) as exc:
        raise _fail(f"server {name} failed: {str(exc) or 'timed out'}") from None
    for line in lines:
        typer.echo(line)


def _first_line(item: object) -> str:
    text = str(getattr(item, "get", lambda _k: "")("description") or "")
    return text.strip().splitlines()[0] if text.strip() else ""


def _oauth_client(name: str) -> OAuthClient:
    from lemon_core.config import read_secrets
    from lemon_mcp import McpConfig, OAuthClient

    config, home, _cwd = _load()
    server = config.section(McpConfig).servers.get(name)
    if server is None:
        raise _fail(f"no MCP server named {name!r} (see `lemon mcp list`)")
    if server.auth != "oauth":
        raise _fail(f'server {name} does not use OAuth (set auth = "oauth" in its section)')
    return OAuthClient(
        name=name, server_url=server.url, settings=server.oauth, home=home,
        environ={**read_secrets(home), **os.environ},
    )  # fmt: skip


@mcp_app.command("login")
def login(
    name: Annotated[str, typer.Argument(help="the server's name")],
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="print the URL only (open it elsewhere)")
    ] = False,
    timeout: Annotated[float, typer.Option(min=1, max=3600, help="seconds to wait")] = 300,
    device: Annotated[
        bool, typer.Option("--device", help="a device code to enter elsewhere (no browser here)")
    ] = False,
) -> None:
    """Log in to an OAuth server: open its login page, wait for the loopback redirect."""
    import asyncio

    from lemon_mcp import McpError

    client = _oauth_client(name)

    def show(url: str) -> None:
        typer.echo(f"Open this URL to log in to {name}:\n{url}", err=True)
        if not no_browser:
            import webbrowser

            webbrowser.open(url)

    def show_code(uri: str, code: str) -> None:
        typer.echo(f"To log in to {name}, open {uri} and enter the code {code}", err=True)

    try:
        token = asyncio.run(
            client.login_device(show_code, timeout_s=timeout)
            if device
            else client.login(show, timeout_s=timeout)
        )
    except McpError as exc:
        raise _fail(f"login to {name} failed: {exc}") from None
    typer.echo(f"logged in to {name} (issuer {token.issuer}); the token is kept in the home")


@mcp_app.command("logout")
def logout(name: Annotated[str, typer.Argument(help="the server's name")]) -> None:
    """Forget the OAuth token of a server."""
    client = _oauth_client(name)
    if not client.logout():
        raise _fail(f"no token kept for {name}")
    typer.echo(f"logged out of {name}")


@mcp_app.command("status")
def status(
    as_json: Annotated[bool, typer.Option("--json", help="the daemon's answer as JSON")] = False,
) -> None:
    """The running daemon's servers: state, transport, tools, last error (mcp.status)."""
    import json

    from lemon_cli._wire_call import daemon_call

    found = daemon_call("lemon mcp status", "mcp.status", {}, feature="MCP", app="lemon_mcp")
    if as_json:
        typer.echo(json.dumps(found, indent=2))
        return
    rows = found.get("servers", []) if isinstance(found, dict) else []
    if not rows:
        typer.echo("the daemon has no MCP servers configured")
    for row in rows:
        how = row.get("detail") or row.get("transport")
        error = f"  last error: {row['last_error']}" if row.get("last_error") else ""
        typer.echo(f"{row.get('name')}  {how}  {row.get('state')}  tools={row.get('tools')}{error}")


@mcp_app.command("logs")
def logs(name: Annotated[str, typer.Argument(help="the server's name")]) -> None:
    """The running daemon's stderr ring of a stdio server (its last 64 KiB)."""
    from lemon_cli._wire_call import daemon_call

    found = daemon_call("lemon mcp logs", "mcp.logs", {"name": name}, feature="MCP",
                        app="lemon_mcp")  # fmt: skip
    text = str(found.get("stderr") or "") if isinstance(found, dict) else ""
    if not text:
        typer.echo(f"no stderr kept for {name} ({found.get('state', 'not started')})")
        return
    typer.echo(text, nl=not text.endswith("\n"))


@mcp_app.command("conformance-client")
def conformance_client(
    url: Annotated[str, typer.Argument(help="the server's URL (the suite gives it)")],
) -> None:
    """The client of the official conformance suite (conformance client --command ...): plays
    $MCP_CONFORMANCE_SCENARIO against URL with the agent's own MCP client."""
    import asyncio
    import json

    from lemon_mcp import McpError
    from lemon_mcp import conformance_client as play

    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    try:
        context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    except ValueError as exc:
        raise _fail(f"MCP_CONFORMANCE_CONTEXT is not JSON: {exc}") from None
    if not url.startswith(("http://", "https://")):
        raise _fail(f"{url!r} is not an http(s):// URL")
    try:
        asyncio.run(play(url, scenario=scenario, context=context,
                         say=lambda line: typer.echo(line, err=True)))  # fmt: skip
    except McpError as exc:
        raise _fail(f"scenario {scenario or '(none)'}: {exc}") from None


@mcp_app.command("serve")
def serve(
    allow_write: Annotated[
        bool,
        typer.Option(
            "--allow-write",
            help="also offer write, edit and bash (each call "
            "still asks, as the approval policy says)",
        ),
    ] = False,
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            metavar="HOST:PORT",
            help="serve over Streamable HTTP at http://HOST:PORT/mcp instead of stdio "
            "(loopback unless --token-env is given)",
        ),
    ] = None,
    token_env: Annotated[
        str | None,
        typer.Option(
            "--token-env",
            metavar="NAME",
            help="with --http: the variable holding the bearer token every request must "
            "carry (required for a non-loopback HOST)",
        ),
    ] = None,
    allow_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-origin",
            metavar="ORIGIN",
            help="with --http: an Origin allowed besides loopback ones (repeatable)",
        ),
    ] = None,
) -> None:
    """Serve Lemon's coding tools (read, ls, find, grep) to an MCP client (stdio or HTTP)."""
    import asyncio
    import logging
    import os
    import signal
    import sqlite3
    import sys

    from lemon_core import ExecApprovals
    from lemon_core.bus import Bus
    from lemon_core.store import ApprovalGrantStore, StoreError

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    if http is None and (token_env is not None or allow_origin):
        raise _fail("--token-env and --allow-origin go with --http HOST:PORT")
    token: str | None = None
    if token_env is not None:
        token = os.environ.get(token_env, "").strip() or None
        if token is None:
            raise _fail(f"--token-env {token_env}: that variable is unset or empty")
    config, home, cwd = _load()

    async def run() -> None:
        from coding_agent.tools.mcp_serve import CodingToolHost
        from lemon_mcp import HttpServeError, serve_http, serve_stdio
        from lemon_runtime import open_configured_store

        try:
            store = await open_configured_store(config, home)
        except (StoreError, OSError, sqlite3.Error) as exc:
            raise _fail(f"cannot open the home's store for its approval grants: {exc}") from None
        try:
            approvals = ExecApprovals(Bus(), grant_store=ApprovalGrantStore(store))
            host = CodingToolHost(
                cwd=cwd, home=home, config=config, approvals=approvals, allow_write=allow_write,
            )  # fmt: skip
            try:
                if http is None:
                    await serve_stdio(host)
                    return
                stop = asyncio.Event()
                loop = asyncio.get_running_loop()
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.add_signal_handler(sig, stop.set)

                def listening(url: str) -> None:
                    typer.echo(f"serving Lemon's tools at {url}", err=True)

                try:
                    await serve_http(
                        host, http, token=token, allowed_origins=allow_origin or (),
                        on_listening=listening, stop=stop,
                    )  # fmt: skip
                except HttpServeError as exc:
                    raise _fail(str(exc)) from None
            finally:
                await host.aclose()
        finally:
            await store.close()

    asyncio.run(run())
