"""``lemon setup``: write ``config.toml`` for one provider; the key never appears on screen.

On a terminal every missing or mistyped answer is asked (again), with the reason: an unknown
kind, a URL that is not ``http(s)://host``, an empty model id. Without a terminal a missing or
bad value is one ``error`` line and exit 2. Whether the server needs a key is asked (``--key`` /
``--no-key`` answer it up front); the key goes either nowhere (``--key-store env``: you export
the variable yourself) or into ``$LEMON_HOME/secrets.env`` (``--key-store file``, mode 0600).
It is read from a hidden prompt, or with ``--api-key-stdin`` from standard input (for scripts);
never from the command line, where it would end up in the shell history.

The file is edited with tomlkit, so the comments, order and other tables of an existing
``config.toml`` are kept; only ``[defaults] model`` and ``[providers.<name>]`` change.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final
from urllib.parse import urlsplit

import typer

from lemon_cli._home import home_error, require_home

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["setup", "write_secret"]

KINDS: Final = ("openai_completions", "anthropic_messages")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LOOPBACK_NAMES: Final = ("localhost", "localhost.localdomain")

Check = Callable[[str], str | None]


def write_secret(home: Path, variable: str, value: str) -> Path:
    """Set ``variable`` in ``$LEMON_HOME/secrets.env`` (created 0600, kept 0600)."""
    from lemon_core.config import SECRETS_FILENAME, read_secrets

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


def _check_kind(value: str) -> str | None:
    if value in KINDS:
        return None
    return f"unknown kind {value!r}: use openai_completions or anthropic_messages"


def _check_name(value: str) -> str | None:
    if _NAME.match(value):
        return None
    return f"{value!r} is not a provider name: use letters, digits, '-', '_' or '.'"


def _check_url(value: str) -> str | None:
    parts = urlsplit(value.strip())
    if parts.scheme in ("http", "https") and parts.hostname:
        try:
            _ = parts.port  # reading it validates the port
        except ValueError:
            return f"{value!r} has a bad port"
        return None
    return f"{value!r} is not a URL: give http:// or https:// and a host, e.g. http://127.0.0.1:11434/v1"


def _check_model(value: str) -> str | None:
    if not value.strip():
        return "the model id is empty: give the model's name at that provider, e.g. qwen2.5-coder"
    if any(c.isspace() for c in value.strip()):
        return f"{value!r} has spaces; a model id is one word, e.g. qwen2.5-coder"
    return None


def _check_variable(value: str) -> str | None:
    if _VARIABLE.match(value):
        return None
    return f"{value!r} is not an environment variable name (letters, digits, '_')"


def _check_store(value: str) -> str | None:
    return None if value in ("env", "file") else f"--key-store must be env or file, got {value!r}"


def _is_loopback(url: str | None) -> bool:
    import ipaddress

    host = urlsplit(url or "").hostname or ""
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Asker:
    """Values from the flags, else from prompts; a bad value is asked again on a terminal."""

    def __init__(self, console: Console, interactive: bool) -> None:
        self.console = console
        self.interactive = interactive

    def error(self, message: str) -> None:
        from rich.markup import escape

        self.console.print(f"[red]error[/] {escape(message)}")

    def value(
        self,
        given: str | None,
        *,
        prompt: str,
        check: Check,
        default: str | None = None,
        missing: str | None = None,
    ) -> str:
        """``given`` if it passes ``check``; else ask until an answer does (terminal only).

        Without a terminal: a missing value is ``default``, or (``default`` None) the error
        ``missing`` and exit 2; a bad value is its error and exit 2.
        """
        candidate = given
        while True:
            if candidate is not None:
                candidate = candidate.strip()
                problem = check(candidate)
                if problem is None:
                    return candidate
                self.error(problem)
                if not self.interactive:
                    raise typer.Exit(2)
            elif not self.interactive:
                if default is not None:
                    return default
                self.error(missing or f"{prompt} is required")
                raise typer.Exit(2)
            candidate = str(
                typer.prompt(prompt, default=default if default is not None else "",
                             show_default=default is not None)
            )  # fmt: skip

    def secret(self, prompt: str) -> str:
        while True:
            key = str(typer.prompt(prompt, default="", show_default=False, hide_input=True))
            if key.strip():
                return key.strip()
            self.error("the key is empty; paste it again (it is not shown)")


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
    key: Annotated[
        bool | None,
        typer.Option(
            "--key/--no-key",
            help="Whether the server needs an API key (asked on a terminal; else it does).",
        ),
    ] = None,
    api_key_env: Annotated[
        str | None, typer.Option(help="Name of the environment variable holding the key.")
    ] = None,
    key_store: Annotated[
        str | None,
        typer.Option(
            help="env (you export the variable; the default) or file (secrets.env, 0600)."
        ),
    ] = None,
    api_key_stdin: Annotated[
        bool,
        typer.Option(
            "--api-key-stdin",
            help="Read the key from standard input (never from the command line).",
        ),
    ] = False,
) -> None:
    """Configure a model provider in $LEMON_HOME/config.toml."""
    from rich.console import Console
    from rich.markup import escape

    from lemon_core.config import SECRETS_FILENAME, ConfigError, lemon_home, load_config

    console = Console(emoji=False, highlight=False, soft_wrap=True)
    ask = _Asker(console, interactive=sys.stdin.isatty() and not api_key_stdin)
    home = lemon_home()
    require_home(home, create=False)
    path = home / "config.toml"
    previous = _read_existing(path, console)

    kind = ask.value(
        kind,
        prompt="Provider kind (openai_completions / anthropic_messages)",
        check=_check_kind,
        default="openai_completions" if ask.interactive else None,
        missing="--kind must be openai_completions or anthropic_messages",
    )
    default_name = "anthropic" if kind == "anthropic_messages" else "local"
    name = ask.value(name, prompt="Provider name", check=_check_name, default=default_name)
    if kind == "openai_completions" or base_url is not None:
        base_url = ask.value(
            base_url,
            prompt="Base URL",
            check=_check_url,
            default="http://127.0.0.1:11434/v1" if ask.interactive else None,
            missing="--base-url is required for openai_completions "
            "(e.g. http://127.0.0.1:11434/v1)",
        )
    model = ask.value(
        model,
        prompt="Model id",
        check=_check_model,
        missing="--model is required (the model id at that provider)",
    )
    if key_store is not None:
        key_store = ask.value(key_store, prompt="Key store (env / file)", check=_check_store)
    if key is None:
        implied = api_key_env is not None or key_store is not None or api_key_stdin
        if implied or not ask.interactive:
            key = True
        else:
            likely = kind == "anthropic_messages" or not _is_loopback(base_url)
            key = typer.confirm("Does the server need an API key?", default=likely)

    variable: str | None = None
    secret: str | None = None
    if key:
        default_variable = f"{name.upper().replace('-', '_').replace('.', '_')}_API_KEY"
        variable = default_variable
        if api_key_env is not None:
            variable = ask.value(
                api_key_env,
                prompt="Environment variable for the key",
                check=_check_variable,
                default=default_variable,
            )
        if key_store is None:
            key_store = "env"
            if ask.interactive and not os.environ.get(variable):
                key_store = ask.value(
                    None,
                    prompt=f"Keep the key in {home / SECRETS_FILENAME} (file) "
                    f"or export {variable} yourself (env)",
                    check=_check_store,
                    default="file",
                )
        if key_store == "file":
            if api_key_stdin:
                secret = sys.stdin.readline().strip()
                if not secret:
                    ask.error("the key is empty")
                    raise typer.Exit(2)
            elif ask.interactive:
                secret = ask.secret(f"API key (stored in {home / SECRETS_FILENAME}, not shown)")
            else:
                ask.error("no key given: use --api-key-stdin, or --no-key")
                raise typer.Exit(2)

    text = _updated(previous, kind=kind, name=name, base_url=base_url, model=model,
                    variable=variable)  # fmt: skip
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        if variable and secret is not None:
            secret_path = write_secret(home, variable, secret)
            console.print(f"key stored in {escape(str(secret_path))} (mode 0600) as {variable}")
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        typer.echo(home_error(home, f"writing failed ({exc.strerror or exc})"), err=True)
        raise typer.Exit(2) from None
    try:
        load_config()
    except ConfigError as exc:
        if previous is None:
            path.unlink()
        else:
            path.write_text(previous, encoding="utf-8")
        for issue in exc.issues:
            ask.error(issue.render())
        console.print("config.toml was left as it was")
        raise typer.Exit(1) from None
    if variable and secret is None:
        if os.environ.get(variable):
            console.print(f"the key is read from {variable} (set in this environment)")
        else:
            console.print(
                f"export {variable}=<your key> before `lemon chat` (it is read from the "
                "environment)"
            )
    console.print(f"wrote {escape(str(path))}: model {escape(name)}:{escape(model)}")


def _read_existing(path: Path, console: Console) -> str | None:
    import tomllib

    from rich.markup import escape

    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, UnicodeDecodeError) as exc:
        console.print(f"[red]error[/] cannot read {escape(str(path))}: {escape(str(exc))}")
        raise typer.Exit(2) from None
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        console.print(
            f"[red]error[/] {escape(str(path))} is not valid TOML "
            f"({escape(str(exc))}); fix or move it first"
        )
        raise typer.Exit(2) from None
    return text


def _updated(
    previous: str | None,
    *,
    kind: str,
    name: str,
    base_url: str | None,
    model: str,
    variable: str | None,
) -> str:
    """``previous`` (or an empty file) with the default model and the provider set; every
    comment, table and key not named here stays as it was."""
    import tomlkit
    from tomlkit.items import InlineTable, Table

    doc = tomlkit.parse(previous or "")
    defaults = doc.get("defaults")
    if not isinstance(defaults, Table | InlineTable):
        defaults = tomlkit.table()
        doc["defaults"] = defaults
    defaults["model"] = f"{name}:{model}"
    providers = doc.get("providers")
    if not isinstance(providers, Table | InlineTable):
        providers = tomlkit.table(is_super_table=True)
        doc["providers"] = providers
    provider = providers.get(name)
    if not isinstance(provider, Table | InlineTable):
        provider = tomlkit.inline_table() if isinstance(providers, InlineTable) else tomlkit.table()
        providers[name] = provider
    provider["kind"] = kind
    for field, value in (("base_url", base_url), ("api_key_env", variable)):
        if value:
            provider[field] = value
        elif field in provider:
            del provider[field]
    return doc.as_string()
