"""``lemon config validate|show`` and the status lines shown by ``lemon`` with no arguments."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from lemon_cli._groups import command_group
from lemon_cli._home import home_problem
from lemon_cli._output import make_console

if TYPE_CHECKING:
    from rich.console import Console

    from lemon_core.config import LoadedConfig

config_app = command_group("Inspect and validate the layered configuration.")


def print_status(console: Console) -> LoadedConfig | None:
    """Print where state lives and whether the config is usable; return it when it is."""
    from rich.markup import escape

    from lemon_core.config import ConfigError, installed_sections, lemon_home, load_config

    home = lemon_home()
    problem = home_problem(home, create=False)
    if problem is not None:
        state = f"  [red](cannot be used: {escape(problem)})[/red]"
    else:
        state = "" if home.is_dir() else "  (not created yet)"
    console.print(f"[bold]home[/bold]    {escape(str(home))}{state}", highlight=False)
    try:
        loaded = load_config(sections=installed_sections())
    except ConfigError as exc:
        console.print("[bold]config[/bold]  [red]invalid[/red]")
        for issue in exc.issues:
            console.print(f"  - {issue.render()}", markup=False)
        return None
    files = [s for s in loaded.sources if s != "environment"]
    if files:
        console.print(f"[bold]config[/bold]  {escape(', '.join(files))}", highlight=False)
    else:
        console.print(
            f"[bold]config[/bold]  none found at {escape(str(loaded.home_config_path))} "
            "(the offline provider is used)",
            highlight=False,
        )
    model = loaded.config.defaults.model or "offline (no model configured)"
    console.print(f"[bold]model[/bold]   {escape(model)}", highlight=False)
    return loaded


@config_app.command()
def validate() -> None:
    """Validate every config layer; exit 1 listing each problem (file, key, what, how to fix).

    A key read under a deprecated spelling is listed as a warning with its new spelling, and an
    optional surface that would start degraded (a webhook endpoint whose secret variable is
    unset, a channel without its token) as a warning naming the variable; neither fails
    validation (lemon doctor counts the second as a problem)."""
    from rich.markup import escape

    from lemon_core.config import ConfigError, installed_sections, load_config

    console = make_console(emoji=False)
    try:
        loaded = load_config(sections=installed_sections())
    except ConfigError as exc:
        for issue in exc.issues:
            console.print(f"[red]error[/red] {escape(issue.render())}", highlight=False)
        raise typer.Exit(1) from None
    for deprecation in loaded.deprecations:
        console.print(f"[yellow]warning[/yellow] {escape(deprecation.render())}", highlight=False)
    from lemon_cli._surfaces import surface_problems

    for _surface, text in surface_problems(loaded.config, loaded.home):
        console.print(
            f"[yellow]warning[/yellow] {escape(text)} (this surface starts degraded)",
            highlight=False,
        )
    sources = ", ".join(loaded.sources) or "defaults only"
    console.print(f"config ok ({sources})", highlight=False)


@config_app.command()
def show() -> None:
    """Print the effective configuration after layering, as JSON, secrets hidden (a DSN's or
    URL's userinfo and password, secret-named keys: see lemon_core.config.redact_config)."""
    import msgspec

    from lemon_core.config import ConfigError, installed_sections, load_config, redact_config

    try:
        loaded = load_config(sections=installed_sections())
    except ConfigError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None
    shown = redact_config(loaded.config.to_builtins())
    typer.echo(msgspec.json.format(msgspec.json.encode(shown)).decode())
