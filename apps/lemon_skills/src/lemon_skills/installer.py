"""Install, update and uninstall: audited, approved, transactional.

Every operation runs inside one lockfile transaction (an exclusive lock for its whole length):

1. the source is fetched into a fresh directory under ``skills/.staging/`` (nothing of it runs);
2. its ``SKILL.md`` is read and the whole bundle audited (:func:`~lemon_skills.audit.audit_bundle`);
3. the :class:`~lemon_skills.trust.TrustPolicy` decides; when it needs an approval the
   ``approve`` callback is asked with the :class:`Plan` (the CLI prompts, or refuses when there
   is no terminal and no ``--yes``); a ``block`` needs a matching override *and* approval;
4. the staged bundle is renamed into ``skills/installed/<name>`` (the old one renamed aside
   first), then the lockfile is replaced; if that fails the old bundle is renamed back.

Whatever fails, the staging directory is removed: a failed or refused operation leaves the
installed skills and the lockfile as they were (a refused block records only its audit under
``blocked``, which ``override`` checks against).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lemon_skills.audit import AuditReport, audit_bundle
from lemon_skills.bundle import bundle_hash
from lemon_skills.errors import PolicyRefusal, SkillsError, SkillSourceError, SkillsUsageError
from lemon_skills.lockfile import BlockedAudit, Lockfile, LockRecord, LockState
from lemon_skills.manifest import Manifest, read_manifest, valid_skill_name
from lemon_skills.settings import SkillsSettings
from lemon_skills.sources import SkillSource, SourceFetcher, SourceRouter
from lemon_skills.sources.fetch import FetchResult
from lemon_skills.taxonomy import SourceKind, TrustLevel
from lemon_skills.trust import Decision, Operation, Override, TrustPolicy

__all__ = ["ApprovalRequired", "Approver", "Outcome", "Plan", "SkillManager", "VerifyResult"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """An operation waiting for approval: what would change and what the audit found."""

    operation: Operation
    name: str
    source: SkillSource
    report: AuditReport | None
    decision: Decision
    previous: LockRecord | None = None
    fetched: FetchResult | None = None
    """Where the bytes came from: the clone URL and commit (a registry or well-known entry
    names its repository only in the index; the approver is shown it)."""


Approver = Callable[[Plan], bool]
"""Asked when the policy needs an explicit approval; True approves."""


class ApprovalRequired(PolicyRefusal):
    """Refused because nobody approved (the plan says what was asked)."""

    def __init__(self, message: str, plan: Plan) -> None:
        super().__init__(message)
        self.plan = plan


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    """What an operation did."""

    operation: Operation
    name: str
    changed: bool
    message: str
    record: LockRecord | None = None
    report: AuditReport | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class VerifyResult:
    """One installed skill re-hashed against its lockfile record."""

    name: str
    status: Literal["ok", "modified", "missing"]
    expected: str
    actual: str | None


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _deny(_plan: Plan) -> bool:
    return False


class SkillManager:
    """The skills of one ``$LEMON_HOME`` (see the module docstring)."""

    def __init__(
        self,
        settings: SkillsSettings,
        *,
        policy: TrustPolicy | None = None,
        cwd: Path | None = None,
        lockfile: Lockfile | None = None,
    ) -> None:
        self.settings = settings
        self.policy = policy or TrustPolicy()
        self.router = SourceRouter(settings, cwd=cwd)
        self.fetcher = SourceFetcher(settings)
        self.lockfile = lockfile or Lockfile(settings.lockfile)

    # -- reading ---------------------------------------------------------------------------

    def records(self) -> list[LockRecord]:
        """The installed skills by name (builtins seeded first if this is the first start)."""
        self.ensure_seeded()
        return [r for _, r in sorted(self.lockfile.read().skills.items())]

    def get(self, name: str) -> LockRecord:
        """The record of the installed skill ``name``; :class:`SkillsUsageError` if none."""
        record = self.lockfile.read().skills.get(name)
        if record is None:
            raise SkillsUsageError(f"no installed skill named {name!r} (see `lemon skills list`)")
        return record

    def path_of(self, name: str) -> Path:
        return self.settings.installed_dir / name

    def current_hash(self, name: str) -> str | None:
        """The bundle hash of the installed copy now (``None`` if missing or unreadable)."""
        try:
            return bundle_hash(self.path_of(name))
        except SkillsError:
            return None

    def usable(self, record: LockRecord) -> bool:
        """Enabled, not blocked (or blocked under a still-matching override), and unchanged
        since install."""
        if not record.enabled:
            return False
        if record.verdict == "block" and (
            record.override is None or record.override.bundle_hash != record.bundle_hash
        ):
            return False
        return self.current_hash(record.name) == record.bundle_hash

    # -- staging ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _stage(self) -> Iterator[Path]:
        staging = self.settings.staging_dir
        staging.mkdir(parents=True, exist_ok=True, mode=0o700)
        stage = Path(tempfile.mkdtemp(prefix="op-", dir=staging))
        try:
            yield stage
        finally:
            shutil.rmtree(stage, ignore_errors=True)
            with contextlib.suppress(OSError):
                staging.rmdir()  # only when empty

    def _fetch(self, source: SkillSource, stage: Path) -> tuple[Path, FetchResult, Manifest]:
        bundle = stage / "bundle"
        try:
            fetched = self.fetcher.fetch(source, bundle)
        except OSError as exc:  # an unreadable file of a local source, a full disk
            raise SkillSourceError(f"{source.identifier} could not be copied: {exc}") from None
        return bundle, fetched, read_manifest(bundle)

    # -- builtin seeding -------------------------------------------------------------------

    def _builtin_names(self) -> list[str]:
        root = self.settings.builtin_dir
        if not root.is_dir():
            return []
        return sorted(p.name for p in root.iterdir() if (p / "SKILL.md").is_file())

    def ensure_seeded(self) -> list[str]:
        """Seed the builtin skills not seeded before (first start); returns the names."""
        state = self.lockfile.read()
        if set(self._builtin_names()) <= state.seeded_builtins:
            return []
        with self.lockfile.transaction() as state:
            todo = [n for n in self._builtin_names() if n not in state.seeded_builtins]
            return self._seed(state, todo)

    def _seed(self, state: LockState, names: list[str]) -> list[str]:
        seeded: list[str] = []
        for name in names:
            source = SkillSource(
                kind=SourceKind.BUILTIN,
                identifier=f"builtin:{name}",
                location=name,
                trust=TrustLevel.BUILTIN,
            )
            with self._stage() as stage:
                bundle, fetched, manifest = self._fetch(source, stage)
                record = self._record(
                    manifest, source, fetched, bundle_hash(bundle), None, None, None
                )
                self._activate(state, stage, bundle, record, commit=False)
            seeded.append(name)
        state.seeded_builtins.update(names)
        self.lockfile.write(state)
        return seeded

    # -- install / update / uninstall ------------------------------------------------------

    def install(self, identifier: str, *, approve: Approver = _deny) -> Outcome:
        """Install the skill ``identifier`` names (see :class:`SourceRouter`)."""
        source = self.router.route(identifier)
        if source.kind is SourceKind.BUILTIN:
            return self._install_builtin(source)
        return self.install_source(source, approve=approve)

    def install_source(self, source: SkillSource, *, approve: Approver = _deny) -> Outcome:
        """Install from a resolved source (a discovered ``well_known`` one, say)."""
        with self.lockfile.transaction() as state, self._stage() as stage:
            bundle, fetched, manifest = self._fetch(source, stage)
            if manifest.name in self._builtin_names():
                raise SkillsUsageError(
                    f"{source.identifier} holds a skill named {manifest.name!r}, the name of a "
                    "builtin skill; builtin names are reserved (a skill from elsewhere cannot "
                    "stand in for one, even after it was uninstalled): rename the skill"
                )
            existing = state.skills.get(manifest.name)
            if existing is not None:
                raise SkillsUsageError(
                    f"a skill named {manifest.name!r} is already installed (from "
                    f"{existing.identifier}); use `lemon skills update {manifest.name}`, or "
                    "uninstall it first"
                )
            return self._apply(
                "install", state, stage, bundle, fetched, manifest, source, None, approve
            )

    def _install_builtin(self, source: SkillSource) -> Outcome:
        with self.lockfile.transaction() as state:
            names = [source.location] if source.location else self._builtin_names()
            if source.location and source.location not in self._builtin_names():
                raise SkillsUsageError(
                    f"no builtin skill named {source.location!r}; builtin skills: "
                    f"{', '.join(self._builtin_names())}"
                )
            todo = [n for n in names if n not in state.skills]
            seeded = self._seed(state, todo)
        message = (
            f"seeded builtin skill(s): {', '.join(seeded)}"
            if seeded
            else ("the builtin skills are already installed")
        )
        return Outcome(
            operation="install", name=",".join(seeded), changed=bool(seeded), message=message
        )

    def update(self, name: str, *, approve: Approver = _deny) -> Outcome:
        """Fetch ``name`` again from its recorded source, audit it and replace the copy."""
        with self.lockfile.transaction() as state, self._stage() as stage:
            record = _installed(state, name)
            source = SkillSource(
                kind=record.source_kind,
                identifier=record.identifier,
                location=record.location,
                trust=record.trust,
                subdir=record.subdir,
            )
            bundle, fetched, manifest = self._fetch(source, stage)
            if manifest.name != name:
                raise PolicyRefusal(
                    f"the source of {name!r} now holds a skill named {manifest.name!r}; install "
                    "it under its new name instead"
                )
            if bundle_hash(bundle) == record.bundle_hash == self.current_hash(name):
                return Outcome(
                    operation="update",
                    name=name,
                    changed=False,
                    record=record,
                    message=f"{name} is up to date ({record.bundle_hash[:12]})",
                )
            return self._apply(
                "update", state, stage, bundle, fetched, manifest, source, record, approve
            )

    def uninstall(self, name: str, *, approve: Approver = _deny) -> Outcome:
        """Remove ``name`` (builtins are auto-approved and not seeded again)."""
        with self.lockfile.transaction() as state, self._stage() as stage:
            record = _installed(state, name)
            source = SkillSource(
                kind=record.source_kind,
                identifier=record.identifier,
                location=record.location,
                trust=record.trust,
            )
            decision = self.policy.decide("uninstall", record.trust, None, approved=False)
            if not decision.allowed:
                plan = Plan(
                    operation="uninstall",
                    name=name,
                    source=source,
                    report=None,
                    decision=decision,
                    previous=record,
                )
                decision = self.policy.decide(
                    "uninstall", record.trust, None, approved=approve(plan)
                )
                if not decision.allowed:
                    raise ApprovalRequired(f"uninstall of {name!r}: {decision.reason}", plan)
            dest = self.path_of(name)
            removed = stage / "removed"
            present = dest.exists() or dest.is_symlink()
            if present:
                os.rename(dest, removed)
            del state.skills[name]
            state.overrides.pop(name, None)
            try:
                self.lockfile.write(state)
            except BaseException:
                if present:
                    os.rename(removed, dest)
                raise
        return Outcome(
            operation="uninstall",
            name=name,
            changed=True,
            record=record,
            message=f"uninstalled {name}",
        )

    def _record(
        self,
        manifest: Manifest,
        source: SkillSource,
        fetched: FetchResult,
        digest: str,
        report: AuditReport | None,
        override: Override | None,
        previous: LockRecord | None,
    ) -> LockRecord:
        now = _now()
        return LockRecord(
            name=manifest.name,
            source_kind=source.kind,
            identifier=source.identifier,
            location=source.location,
            subdir=source.subdir,
            resolved_ref=fetched.resolved_ref,
            bundle_hash=digest,
            trust=source.trust,
            verdict=report.verdict if report is not None else "pass",
            findings=tuple(sorted(report.finding_ids)) if report is not None else (),
            override=override,
            description=manifest.description,
            installed_at=previous.installed_at if previous is not None else now,
            updated_at=now,
        )

    def _apply(
        self,
        operation: Operation,
        state: LockState,
        stage: Path,
        bundle: Path,
        fetched: FetchResult,
        manifest: Manifest,
        source: SkillSource,
        previous: LockRecord | None,
        approve: Approver,
    ) -> Outcome:
        name = manifest.name
        report = (
            audit_bundle(bundle, self.settings.audit)
            if self.policy.requires_audit(source.trust)
            else None
        )
        override = state.overrides.get(name)
        decision = self.policy.decide(
            operation, source.trust, report, approved=False, override=override
        )
        if not decision.allowed and decision.needs_approval:
            plan = Plan(
                operation=operation,
                name=name,
                source=source,
                report=report,
                decision=decision,
                previous=previous,
                fetched=fetched,
            )
            decision = self.policy.decide(
                operation, source.trust, report, approved=approve(plan), override=override
            )
            if not decision.allowed and decision.needs_approval:
                raise ApprovalRequired(f"{operation} of {name!r}: {decision.reason}", plan)
        if not decision.allowed:
            assert report is not None
            state.blocked[name] = BlockedAudit(
                identifier=source.identifier,
                bundle_hash=report.bundle_hash,
                findings=report.finding_ids,
                recorded_at=_now(),
            )
            self.lockfile.write(state)
            raise PolicyRefusal(
                f"{operation} of {name!r} refused: {decision.reason}.\n"
                + _override_hint(name, report)
            )
        digest = report.bundle_hash if report is not None else bundle_hash(bundle)
        record = self._record(
            manifest,
            source,
            fetched,
            digest,
            report,
            override if decision.overridden else None,
            previous,
        )
        self._activate(state, stage, bundle, record)
        return Outcome(
            operation=operation,
            name=name,
            changed=True,
            record=record,
            report=report,
            message=f"{operation}ed {name} ({digest[:12]})",
        )

    def _activate(
        self,
        state: LockState,
        stage: Path,
        bundle: Path,
        record: LockRecord,
        *,
        commit: bool = True,
    ) -> None:
        """Rename ``bundle`` into place and commit ``record`` (``commit=False``: the caller
        writes the lockfile once for several); undo both if either fails."""
        dest = self.path_of(record.name)
        dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        backup = stage / "previous"
        had_old = dest.exists() or dest.is_symlink()
        old_record = state.skills.get(record.name)
        old_blocked = state.blocked.get(record.name)
        if had_old:
            os.rename(dest, backup)
        try:
            os.rename(bundle, dest)
            try:
                state.skills[record.name] = record
                state.blocked.pop(record.name, None)
                if commit:
                    self.lockfile.write(state)
            except BaseException:
                shutil.rmtree(dest, ignore_errors=True)
                raise
        except BaseException:
            if old_record is not None:
                state.skills[record.name] = old_record
            else:
                state.skills.pop(record.name, None)
            if old_blocked is not None:
                state.blocked[record.name] = old_blocked
            if had_old:
                os.rename(backup, dest)
            raise

    # -- audit, override, verify -----------------------------------------------------------

    def audit(self, target: str) -> tuple[str, AuditReport]:
        """Audit an installed skill (by name) or a source (by identifier): the skill's name
        and the report. A blocked source's audit is recorded for ``override``."""
        state = self.lockfile.read()
        if valid_skill_name(target) and target in state.skills:
            return target, audit_bundle(self.path_of(target), self.settings.audit)
        source = self.router.route(target)
        with self._stage() as stage:
            bundle = stage / "bundle"
            self.fetcher.fetch(source, bundle)
            report = audit_bundle(bundle, self.settings.audit)
            try:
                name = read_manifest(bundle).name
            except SkillsError:
                return target, report
        if report.verdict == "block":
            with self.lockfile.transaction() as locked:
                locked.blocked[name] = BlockedAudit(
                    identifier=source.identifier,
                    bundle_hash=report.bundle_hash,
                    findings=report.finding_ids,
                    recorded_at=_now(),
                )
                self.lockfile.write(locked)
        return name, report

    def override(
        self, name: str, bundle_hash: str, findings: set[str] | frozenset[str]
    ) -> Override:
        """Accept the blocked audit of ``name``: only for its exact hash and finding set."""
        with self.lockfile.transaction() as state:
            blocked = state.blocked.get(name)
            if blocked is None:
                raise SkillsUsageError(
                    f"no blocked audit recorded for {name!r}; run `lemon skills install SOURCE` "
                    "or `lemon skills audit SOURCE` first to see its hash and findings"
                )
            if bundle_hash != blocked.bundle_hash:
                raise PolicyRefusal(
                    f"override of {name!r} refused: the bundle hash {bundle_hash!r} is not the "
                    f"audited one ({blocked.bundle_hash}); an override binds to exact bytes"
                )
            accepted = frozenset(findings)
            if accepted != blocked.findings:
                missing = sorted(blocked.findings - accepted)
                extra = sorted(accepted - blocked.findings)
                raise PolicyRefusal(
                    f"override of {name!r} refused: the accepted findings are not the audit's "
                    f"(not accepted: {', '.join(missing) or '-'}; not found by the audit: "
                    f"{', '.join(extra) or '-'})"
                )
            override = Override(bundle_hash=bundle_hash, findings=accepted, accepted_at=_now())
            state.overrides[name] = override
            self.lockfile.write(state)
            return override

    def verify(self) -> list[VerifyResult]:
        """Re-hash every installed bundle against the lockfile."""
        results: list[VerifyResult] = []
        for record in self.records():
            path = self.path_of(record.name)
            if not path.is_dir():
                results.append(
                    VerifyResult(
                        name=record.name, status="missing", expected=record.bundle_hash, actual=None
                    )
                )
                continue
            actual = self.current_hash(record.name)
            status: Literal["ok", "modified"] = "ok" if actual == record.bundle_hash else "modified"
            results.append(
                VerifyResult(
                    name=record.name, status=status, expected=record.bundle_hash, actual=actual
                )
            )
        return results


def _override_hint(name: str, report: AuditReport | None) -> str:
    if report is None:
        return ""
    accept = " ".join(f"--accept-findings {f}" for f in sorted(report.finding_ids))
    lines = [f"  [{f.severity}] {f.id}  {f.excerpt}" for f in report.findings]
    return (
        f"Findings (bundle hash {report.bundle_hash}):\n" + "\n".join(lines) + "\n"
        "If you have reviewed every finding and accept this exact bundle:\n"
        f"  lemon skills override {name} --bundle-hash {report.bundle_hash} {accept}"
    )


def _installed(state: LockState, name: str) -> LockRecord:
    """The lock record of the installed skill ``name``; a usage error when there is none."""
    record = state.skills.get(name)
    if record is None:
        raise SkillsUsageError(f"no installed skill named {name!r} (see `lemon skills list`)")
    return record
