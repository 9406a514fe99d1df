"""The trust policy: which level a source gets, and what an operation needs to go ahead.

Assignment (the seed's "Trust Levels" table): ``builtin`` for the builtin source kind only;
``official`` for registry entries in the ``official/`` namespace and for ``hermes:`` sources;
``trusted`` for local sources (a path the user controls); ``community`` for every other git,
registry and well-known source.

Rules (:meth:`TrustPolicy.decide`):

* builtin is the only level that is not audited and is auto-approved;
* every other install, update and uninstall needs explicit approval (``--yes`` or a "y" at the
  prompt), and every install and update is audited first;
* a ``warn`` verdict needs that approval like any other (it is shown with the findings);
* a ``block`` verdict is never bypassed by approval: only an :class:`Override` bound to the
  exact bundle hash and the exact set of finding ids lets it through. Any byte changed (another
  hash) or any finding added or gone (another set) voids the override.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lemon_skills.audit import AuditReport
from lemon_skills.taxonomy import SourceKind, TrustLevel

__all__ = ["Decision", "Operation", "Override", "TrustPolicy", "trust_for"]

Operation = Literal["install", "update", "uninstall"]


def trust_for(kind: SourceKind, *, official: bool = False) -> TrustLevel:
    """The trust level of a source of ``kind``; ``official`` marks an ``official/`` registry
    entry or a ``hermes:`` source."""
    if kind is SourceKind.BUILTIN:
        return TrustLevel.BUILTIN
    if kind is SourceKind.LOCAL:
        return TrustLevel.TRUSTED
    if official and kind in (SourceKind.GIT, SourceKind.REGISTRY):
        return TrustLevel.OFFICIAL
    return TrustLevel.COMMUNITY


@dataclass(frozen=True, kw_only=True, slots=True)
class Override:
    """A security override of a ``block`` verdict, bound to exact bytes and exact findings."""

    bundle_hash: str
    findings: frozenset[str]
    accepted_at: str = ""

    def covers(self, report: AuditReport) -> bool:
        """Whether this override lets ``report`` through: same hash, same finding set."""
        return self.bundle_hash == report.bundle_hash and self.findings == report.finding_ids


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    """What the policy says about one operation."""

    allowed: bool
    needs_approval: bool
    reason: str
    overridden: bool = False


class TrustPolicy:
    """The install / update / uninstall rules per trust level (stateless)."""

    def requires_audit(self, trust: TrustLevel) -> bool:
        """Every level but builtin is audited."""
        return trust is not TrustLevel.BUILTIN

    def auto_approved(self, trust: TrustLevel) -> bool:
        """Only builtin goes ahead without an explicit approval."""
        return trust is TrustLevel.BUILTIN

    def decide(
        self,
        operation: Operation,
        trust: TrustLevel,
        report: AuditReport | None,
        *,
        approved: bool,
        override: Override | None = None,
    ) -> Decision:
        """Whether ``operation`` may go ahead; ``report`` is the audit of the new bundle
        (``None`` for an uninstall), ``approved`` whether the user explicitly approved."""
        if self.auto_approved(trust):
            return Decision(allowed=True, needs_approval=False, reason="builtin: auto-approved")
        if operation != "uninstall":
            if report is None:
                raise ValueError(f"{operation} of a {trust.value} skill needs its audit report")
            if report.verdict == "block":
                if override is None or not override.covers(report):
                    why = (
                        "the override no longer matches (the bundle or its findings changed)"
                        if override is not None
                        else "no override"
                    )
                    return Decision(
                        allowed=False,
                        needs_approval=False,
                        reason=f"blocked by the security audit ({why}); approval cannot "
                        "bypass a block, only `lemon skills override` bound to this bundle "
                        "hash and these findings",
                    )
                if not approved:
                    return Decision(
                        allowed=False,
                        needs_approval=True,
                        reason="overridden block: needs explicit approval",
                        overridden=True,
                    )
                return Decision(
                    allowed=True,
                    needs_approval=True,
                    overridden=True,
                    reason="block overridden for this exact bundle; approved",
                )
        if not approved:
            return Decision(
                allowed=False,
                needs_approval=True,
                reason=f"{operation} of a {trust.value} skill needs explicit approval",
            )
        return Decision(allowed=True, needs_approval=True, reason="approved")
