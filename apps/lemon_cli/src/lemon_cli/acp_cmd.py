"""``lemon acp``: Lemon as an Agent Client Protocol agent for an editor (the ``lemon_acp`` app).

The editor starts ``lemon acp`` and speaks ACP on its stdin/stdout; stdout carries only
JSON-RPC frames (every log line goes to stderr). The agent is a client of this home's daemon
over its WebSocket session port, started like bare ``lemon`` does when none runs; with
``LEMON_DAEMON=0`` (or a daemon that cannot start) the runtime is hosted in this process for as
long as the editor keeps the agent. ``--url`` names another daemon's WebSocket (it gets only
``LEMON_CONTROL_PLANE_TOKEN``; a daemon on another machine cannot reach the editor's file
system and terminal, so an editor that offers them is refused at ``initialize`` with what to
do, unless ``--daemon-tools`` lets that daemon's own tools run there); ``--session KEY``
attaches the first ``session/new`` to an existing session instead of a new ``acp:<uuid>``.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

__all__ = ["acp"]


def acp(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option(help="The daemon's WebSocket, ws://HOST:PORT/ws (default: this home's)."),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option(help="Attach the editor's first new session to this session key."),
    ] = None,
    daemon_tools: Annotated[
        bool,
        typer.Option(
            "--daemon-tools",
            help="With a --url daemon on another machine: let its own file and shell tools "
            "run there (the editor's file system and terminal cannot reach it).",
        ),
    ] = False,
) -> None:
    """Speak the Agent Client Protocol on stdin/stdout (for Zed, JetBrains and other editors)."""
    import asyncio
    import logging
    import sys

    from lemon_acp import claim_stdout
    from lemon_cli._output import make_console
    from lemon_cli.tui_cmd import check_client_options

    frames = claim_stdout()  # from here on, fd 1 is stderr: only frames reach the editor
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    err = make_console(emoji=False, stderr=True, highlight=False)
    check_client_options(err, "lemon acp", url=url, session=session)
    if url is None:
        from lemon_cli._app import ensure_daemon

        ensure_daemon(ctx)
    raise typer.Exit(asyncio.run(_serve(err, frames, url, session, daemon_tools)))


async def _serve(
    err: Any, frames: Any, url: str | None, session: str | None, daemon_tools: bool = False
) -> int:
    from importlib.metadata import version

    from lemon_acp import AcpAgent, serve_stdio
    from lemon_core.config import ConfigError, load_config

    stop: Any = None
    loaded: Any = None
    runtime: Any = None
    if url is not None:
        import os

        from lemon_control_plane.client import WebSocketSessionPort
        from lemon_control_plane.config import TOKEN_ENV
        from lemon_control_plane.errors import ControlPlaneError, WireError

        remote = WebSocketSessionPort(url, token=os.environ.get(TOKEN_ENV) or None)
        try:
            port: Any = await remote.__aenter__()
        except (ControlPlaneError, WireError, OSError) as exc:
            err.print(f"lemon acp: cannot connect to {url}: {exc}", markup=False)
            return 1
        stop = remote.aclose
    else:
        from lemon_cli._chat_command import booted_port

        try:
            loaded = load_config()
        except ConfigError as exc:
            for issue in exc.issues:
                err.print(f"error {issue.render()}", markup=False)
            return 2
        booted = await booted_port(loaded, err)
        if booted is None:
            return 2
        owner, port = booted
        stop = owner.stop
        if hasattr(owner, "context"):  # an in-process runtime: its own catalogue
            runtime = owner
    try:
        home = loaded.home if url is None else None
        agent = AcpAgent(
            port,
            version=version("lemon_acp"),
            attach=session,
            models=_model_source(runtime, port),
            skills=_skill_source(home),
            editor=_reaches_here(url),
            editor_refusal=None if daemon_tools else _remote_refusal(url),
        )
        await serve_stdio(agent, frames)
    finally:
        await stop()
    return 0


def _reaches_here(url: str | None) -> bool:
    """Whether the runs can reach this process's loopback (the editor's file system and
    terminal are served there): the home's own daemon or runtime, or a ``--url`` on loopback."""
    if url is None:
        return True
    import ipaddress
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _remote_refusal(url: str | None) -> str:
    """Why an editor offering its file system or terminal is refused with a daemon on another
    machine, and what to do about it."""
    from urllib.parse import urlsplit

    host = (urlsplit(url).hostname if url else None) or "the daemon"
    return (
        f"lemon acp: the editor offers its file system and terminal, but the daemon at {host} "
        "is on another machine and cannot reach them (they are served on this machine's "
        "loopback only: no unauthenticated bridge leaves it). Run lemon acp on the daemon's "
        f"machine (e.g. the editor's agent command `ssh {host} lemon acp`), or start it "
        "with --daemon-tools to let the daemon's own file and shell tools run there "
        "(the editor's unsaved changes are then not seen)."
    )


def _model_source(runtime: Any, port: Any) -> Any:
    """The models for the model select: the in-process runtime's catalogue, or the daemon's
    ``models.list`` (when it offers it); ``None`` when neither is at hand."""
    if runtime is not None:
        from lemon_core.capabilities import MODEL_CATALOG

        catalogue = runtime.context.capabilities.get(MODEL_CATALOG)
        if catalogue is None:
            return None

        async def local() -> Any:
            return catalogue.models()

        return local
    call = getattr(port, "call", None)
    if call is None or "models.list" not in _advertised(port):
        return None

    async def remote() -> Any:
        from lemon_control_plane.errors import ControlPlaneError, WireError
        from lemon_core.capabilities import ModelInfo

        try:
            payload = await call("models.list")
        except (ControlPlaneError, WireError, OSError) as exc:
            import logging

            logging.getLogger("lemon_acp").warning("could not list the models: %s", exc)
            return ()
        rows = payload.get("models") if isinstance(payload, dict) else None
        out = []
        for row in rows if isinstance(rows, list) else []:
            ref = row.get("id") if isinstance(row, dict) else None
            if not isinstance(ref, str) or ":" not in ref:
                continue
            window = row.get("contextWindow")
            out.append(
                ModelInfo(
                    ref=ref,
                    provider=str(row.get("provider") or ref.split(":", 1)[0]),
                    id=ref.split(":", 1)[1],
                    name=str(row.get("name") or ref),
                    context_window=window if isinstance(window, int) and window > 0 else 0,
                    default=row.get("default") is True,
                    unavailable=""
                    if row.get("available", True)
                    else str(row.get("unavailableReason") or "unavailable"),
                )
            )
        return out

    return remote


def _advertised(port: Any) -> frozenset[str]:
    hello = getattr(port, "hello", None)
    features = hello.get("features") if isinstance(hello, dict) else None
    methods = features.get("methods") if isinstance(features, dict) else None
    return frozenset(m for m in methods or () if isinstance(m, str))


def _skill_source(home: Any) -> Any:
    """This home's enabled skills, read in a thread (``None`` for another daemon's ``--url``:
    its skills are not this home's)."""
    if home is None:
        return None

    async def skills() -> list[tuple[str, str]]:
        import asyncio

        from lemon_skills import SkillCatalog, SkillsError, SkillsSettings

        catalog = SkillCatalog(SkillsSettings(home=home))
        try:
            found = await asyncio.to_thread(catalog.enabled)
        except (SkillsError, OSError) as exc:  # a corrupt lockfile, an unreadable home
            import logging

            logging.getLogger("lemon_acp").warning("could not list the skills: %s", exc)
            return []
        return [(s.name, s.description) for s in found]

    return skills
