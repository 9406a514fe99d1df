"""``lemon setup``: write ``config.toml`` for one provider; the key never appears on screen.

The key goes either nowhere (``--key-store env``: you export the variable yourself) or into
``$LEMON_HOME/secrets.env`` (``--key-store file``, mode 0600). Read it from a hidden prompt, or
with ``--api-key-stdin`` from standard input (for scripts); it is never taken from the command
line, where it would end up in the shell history.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.console import Console
from rich.markup import escape

from lemon_cli._toml import dumps
from lemon_core.config import SECRETS_FILENAME, ConfigError, lemon_home, load_config, read_secrets

__all__ = ["setup", "write_secret"]

Kind = Literal["openai_completions", "anthropic_messages"]


def write_secret(home: Path, variable: str, value: str) -> Path:
    """Set ``variable`` in ``$LEMON_HOME/secrets.env`` (created 0600, kept 0600)."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = home / SECRETS_FILENAME
    secrets = read_secrets(home)
    secrets[variable] = value
    text = "".join(f"{k}={v}\n" for k, v in secrets.items())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    path.chmod(0o600)
    return path


def setup(
    kind: Annotated[
        str | None,
        typer.Option(
            help="openai_completions (any OpenAI-compatible server) or anthropic_messages."
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="Provider name used in model references.")
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="Server URL, e.g. http://127.0.0.1:11434/v1.")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model id at that provider.")] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Name of the environment variable holding the key.")
    ] = None,
    key_store: Annotated[
        str, typer.Option(help="env (you export the variable) or file (secrets.env, 0600).")
    ] = "env",
    api_key_stdin: Annotated[
        bool, typer.Option(help="Read the key from standard input (never from the command line).")
    ] = False,
    no_key: Annotated[bool, typer.Option(help="The server needs no key.")] = False,
) -> None:
    """Configure a model provider in $LEMON_HOME/config.toml."""
    console = Console(emoji=False, highlight=False)
    interactive = sys.stdin.isatty()
    if kind is None:
        kind = (
            typer.prompt(
                "Provider kind (openai_completions / anthropic_messages)",
                default="openai_completions",
            )
            if interactive
            else None
        )
    if kind not in ("openai_completions", "anthropic_messages"):
        console.print(
            f"[red]error[/] --kind must be openai_completions or anthropic_messages, got {kind!r}"
        )
        raise typer.Exit(2)
    default_name = "anthropic" if kind == "anthropic_messages" else "local"
    name = name or (
        typer.prompt("Provider name", default=default_name) if interactive else default_name
    )
    if kind == "openai_completions" and not base_url:
        if not interactive:
            console.print(
                "[red]error[/] --base-url is required for openai_completions (e.g. http://127.0.0.1:11434/v1)"
            )
            raise typer.Exit(2)
        base_url = typer.prompt("Base URL", default="http://127.0.0.1:11434/v1")
    if not model:
        if not interactive:
            console.print("[red]error[/] --model is required (the model id at that provider)")
            raise typer.Exit(2)
        model = typer.prompt("Model id")
    if key_store not in ("env", "file"):
        console.print(f"[red]error[/] --key-store must be env or file, got {key_store!r}")
        raise typer.Exit(2)
    variable = None if no_key else (api_key_env or f"{name.upper().replace('-', '_')}_API_KEY")

    home = lemon_home()
    path = home / "config.toml"
    existing: dict[str, Any] = {}
    if path.exists():
        try:
            existing = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            console.print(
                f"[red]error[/] {escape(str(path))} is not valid TOML "
                f"({escape(str(exc))}); fix or move it first"
            )
            raise typer.Exit(2) from None
    provider: dict[str, Any] = {"kind": kind}
    if base_url:
        provider["base_url"] = base_url
    if variable:
        provider["api_key_env"] = variable
    existing.setdefault("defaults", {})["model"] = f"{name}:{model}"
    existing.setdefault("providers", {})[name] = provider

    if variable and key_store == "file":
        if api_key_stdin:
            key = sys.stdin.readline().strip()
        elif interactive:
            key = typer.prompt(
                f"API key (stored in {home / SECRETS_FILENAME}, not shown)", hide_input=True
            )
        else:
            console.print("[red]error[/] no key given: use --api-key-stdin, or --no-key")
            raise typer.Exit(2)
        if not key:
            console.print("[red]error[/] the key is empty")
            raise typer.Exit(2)
        secret_path = write_secret(home, variable, key)
        console.print(f"key stored in {secret_path} (mode 0600) as {variable}")
    elif variable:
        console.print(
            f"export {variable}=<your key> before `lemon chat` (it is read from the environment)"
        )

    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    previous = path.read_text(encoding="utf-8") if path.exists() else None
    path.write_text(dumps(existing), encoding="utf-8")
    try:
        load_config()
    except ConfigError as exc:
        if previous is None:
            path.unlink()
        else:
            path.write_text(previous, encoding="utf-8")
        for issue in exc.issues:
            console.print(f"[red]error[/] {escape(issue.render())}")
        console.print("config.toml was left as it was")
        raise typer.Exit(1) from None
    console.print(f"wrote {path}: model {name}:{model}")
