"""``lemon skills list|show|install|update|uninstall|audit|override|verify|discover``.

Works on ``$LEMON_HOME/skills`` directly through lemon_skills (no daemon needed). Exit codes:
0 done; 1 refused by policy (a block, a ``block`` verdict of ``audit``, an operation nobody
approved, an override that does not match, a verify mismatch) or a source / lockfile failure;
2 a usage error.

Approval: ``--yes``, or on a terminal a ``[y/N]`` prompt shown after the audit. Without a
terminal on stdin and without ``--yes`` an operation that needs approval is refused (exit 1) with
a message saying how to approve. A ``block`` verdict is never approved this way: only
``override`` (bound to the bundle hash and the exact finding ids) lets it through.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Final

import typer

from lemon_cli._groups import command_group
from lemon_cli._home import require_home

if TYPE_CHECKING:  # imported when a command runs: `lemon --help` stays fast
    from lemon_skills import AuditReport, LockRecord, Plan, SkillManager

__all__ = ["skills_app"]

skills_app = command_group(
    "Install, audit and manage skills (SKILL.md bundles the agent can load)."
)

_OK: Final = 0
_REFUSED: Final = 1
_USAGE: Final = 2

YesOption = Annotated[
    bool, typer.Option("--yes", "-y", help="approve the operation (never bypasses a block)")
]
JsonOption = Annotated[bool, typer.Option("--json", help="print JSON")]


def _err(message: str) -> None:
    typer.echo(message, err=True)


@contextmanager
def _translated() -> Iterator[None]:
    """lemon_skills errors as one clear message and the exit code."""
    from lemon_skills import PolicyRefusal, SkillsError, SkillsUsageError

    try:
        yield
    except SkillsUsageError as exc:
        _err(f"lemon skills: {exc}")
        raise typer.Exit(_USAGE) from None
    except PolicyRefusal as exc:
        _err(f"lemon skills: {exc}")
        raise typer.Exit(_REFUSED) from None
    except SkillsError as exc:
        _err(f"lemon skills: {exc}")
        raise typer.Exit(_REFUSED) from None
    except OSError as exc:  # the skills directory itself: permissions, a full disk
        _err(f"lemon skills: {exc}")
        raise typer.Exit(_REFUSED) from None


def _manager() -> SkillManager:
    from lemon_core.config import ConfigError, lemon_home, load_config
    from lemon_skills import SkillManager, SkillsSection, SkillsSettings

    home = lemon_home()
    require_home(home, create=True)
    try:
        section: SkillsSection | None = load_config(home=home).section(SkillsSection)
    except ConfigError:
        section = None  # `lemon config validate` names the problem; skills use the defaults
    return SkillManager(SkillsSettings.from_config(section, home=home), cwd=Path.cwd())


def _print_report(report: AuditReport) -> None:
    typer.echo(f"audit: {report.verdict}  bundle hash {report.bundle_hash}  "
               f"({report.files_scanned} file(s), {len(report.findings)} finding(s))")  # fmt: skip
    for f in report.findings:
        typer.echo(f"  [{f.severity}] {f.id}  {f.excerpt}")


def _approver(yes: bool) -> Callable[[Plan], bool]:
    def approve(plan: Plan) -> bool:
        if plan.report is not None:
            _print_report(plan.report)
        fetched = plan.fetched
        if fetched is not None and fetched.clone_url and fetched.clone_url != plan.source.location:
            # a registry / well-known entry: the index chose the repository; show which
            typer.echo(
                f"fetched from {fetched.clone_url}"
                + (f" at {fetched.resolved_ref}" if fetched.resolved_ref else "")
            )
        if yes:
            return True
        if not sys.stdin.isatty():
            _err(
                f"lemon skills: {plan.operation} of {plan.name!r} ({plan.source.trust.value}, "
                f"from {plan.source.identifier}) needs explicit approval and there is no "
                "terminal to ask; review the audit above and run again with --yes to approve"
            )
            return False
        answer = typer.prompt(
            f"{plan.operation} {plan.name} ({plan.source.trust.value}) from "
            f"{plan.source.identifier}? [y/N]",
            default="n",
            show_default=False,
        )
        return answer.strip().lower() in ("y", "yes")

    return approve


def _row(manager: SkillManager, record: LockRecord) -> dict[str, object]:
    return {
        "name": record.name, "source_kind": record.source_kind.value,
        "identifier": record.identifier, "trust": record.trust.value,
        "verdict": record.verdict, "bundle_hash": record.bundle_hash,
        "enabled": manager.usable(record), "description": record.description,
        "resolved_ref": record.resolved_ref, "overridden": record.override is not None,
    }  # fmt: skip


@skills_app.command("list")
def list_skills(as_json: JsonOption = False) -> None:
    """The installed skills (builtins are seeded at first start)."""
    import json

    with _translated():
        manager = _manager()
        rows = [_row(manager, r) for r in manager.records()]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        typer.echo("no skills installed (lemon skills install SOURCE)")
        return
    typer.echo(f"{'NAME':<24} {'TRUST':<10} {'VERDICT':<8} {'ENABLED':<8} SOURCE")
    for row in rows:
        typer.echo(f"{row['name']!s:<24} {row['trust']!s:<10} {row['verdict']!s:<8} "
                   f"{'yes' if row['enabled'] else 'no':<8} {row['identifier']}")  # fmt: skip


@skills_app.command()
def show(name: str) -> None:
    """One installed skill: its record, description and files."""
    from lemon_skills import bundle_entries, prompt_safe

    with _translated():
        manager = _manager()
        manager.ensure_seeded()
        record = manager.get(name)
        files = [e.path for e in bundle_entries(manager.path_of(name))]
        usable = manager.usable(record)
    # the description as plain text: no terminal control sequence reaches the terminal
    typer.echo(f"{record.name}: {prompt_safe(record.description, 1024)}")
    for label, value in (
        ("source", f"{record.source_kind.value} {record.identifier}"),
        ("location", record.location + (f" ({record.subdir})" if record.subdir else "")),
        ("resolved", record.resolved_ref or "-"),
        ("trust", record.trust.value),
        ("verdict", record.verdict + (" (overridden)" if record.override else "")),
        ("bundle hash", record.bundle_hash),
        ("enabled", "yes" if usable else "no (disabled, blocked, or changed since install)"),
        ("installed", f"{record.installed_at}, updated {record.updated_at}"),
        ("path", str(manager.path_of(name))),
    ):
        typer.echo(f"  {label:<12} {value}")
    for finding in record.findings:
        typer.echo(f"  finding      {finding}")
    typer.echo(f"  files        {', '.join(files)}")


@skills_app.command()
def install(source: str, yes: YesOption = False) -> None:
    """Fetch SOURCE, audit it, ask for approval, install it."""
    with _translated():
        outcome = _manager().install(source, approve=_approver(yes))
    typer.echo(outcome.message)


@skills_app.command()
def update(name: str, yes: YesOption = False) -> None:
    """Fetch NAME again from its recorded source, audit it, ask, replace it."""
    with _translated():
        outcome = _manager().update(name, approve=_approver(yes))
    typer.echo(outcome.message)


@skills_app.command()
def uninstall(name: str, yes: YesOption = False) -> None:
    """Remove NAME (needs approval unless it is a builtin)."""
    with _translated():
        outcome = _manager().uninstall(name, approve=_approver(yes))
    typer.echo(outcome.message)


@skills_app.command()
def audit(target: str, as_json: JsonOption = False) -> None:
    """Audit an installed skill (NAME) or a source (SOURCE) without installing it.

    Exits 1 on a block verdict (with or without --json), 0 on pass or warn."""
    import json

    with _translated():
        name, report = _manager().audit(target)
    if as_json:
        typer.echo(json.dumps({"name": name, **report.to_json()}, indent=2))
    else:
        typer.echo(f"{name}:")
        _print_report(report)
    if report.verdict == "block":
        raise typer.Exit(_REFUSED)


@skills_app.command()
def override(
    name: str,
    bundle_hash: Annotated[str, typer.Option("--bundle-hash", help="the audited bundle hash")],
    accept_findings: Annotated[
        list[str],
        typer.Option("--accept-findings", help="a finding id to accept (repeat, or commas)"),
    ],
) -> None:
    """Accept a blocked audit of NAME: only for its exact bundle hash and finding ids."""
    findings = {f.strip() for item in accept_findings for f in item.split(",") if f.strip()}
    with _translated():
        result = _manager().override(name, bundle_hash.strip(), findings)
    typer.echo(
        f"override recorded for {name}: bundle {result.bundle_hash[:12]}, "
        f"{len(result.findings)} finding(s) accepted; install or update it with --yes. Any "
        "changed byte or new finding voids it."
    )


@skills_app.command()
def discover(
    name: str,
    install_first: Annotated[
        bool, typer.Option("--install", help="install the first hit (community trust)")
    ] = False,
    yes: YesOption = False,
) -> None:
    """Probe the well-known URL patterns (LEMON_SKILLS_WELL_KNOWN) for NAME."""
    from lemon_skills import discover_well_known

    with _translated():
        manager = _manager()
        found = discover_well_known(name, manager.settings)
        for source in found:
            typer.echo(f"{source.kind.value:<11} {source.trust.value:<10} {source.identifier}")
        if not found:
            _err(f"lemon skills: no well-known source answered for {name!r}")
            raise typer.Exit(_REFUSED)
        if install_first:
            typer.echo(manager.install_source(found[0], approve=_approver(yes)).message)


@skills_app.command()
def verify() -> None:
    """Re-hash installed skills against the lockfile (exit 1 on any mismatch)."""
    with _translated():
        results = _manager().verify()
    bad = 0
    for result in results:
        typer.echo(f"{result.status:<9} {result.name}  {result.expected[:12]}"
                   + (f" != {result.actual[:12]}" if result.actual and result.status != "ok"
                      else ""))  # fmt: skip
        bad += result.status != "ok"
    if bad:
        _err(f"lemon skills: {bad} skill(s) changed or missing; `lemon skills update NAME` "
             "restores one from its source")  # fmt: skip
        raise typer.Exit(_REFUSED)
