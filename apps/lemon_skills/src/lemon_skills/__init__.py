"""Skills: where they come from, how far they are trusted, the static audit, installs, and the
``read_skill`` tool an agent loads them with.

* :class:`SourceRouter` maps identifiers (``builtin``, a path, a git URL, ``gh:``, ``hermes:``,
  registry namespace paths) to a :class:`SkillSource`; :func:`discover_well_known` probes the
  well-known patterns.
* :class:`TrustPolicy` over :class:`TrustLevel` (builtin > official > trusted > community).
* :func:`audit_bundle` statically audits a whole bundle (nothing of it runs).
* :class:`SkillManager` installs, updates and uninstalls transactionally, with the lockfile
  ``$LEMON_HOME/skills/skills.lock``; overrides and verification.
* :class:`SkillCatalog` and :func:`read_skill_tool` for agents.
"""

from __future__ import annotations

from lemon_skills._section import SkillsSection
from lemon_skills.audit import (
    RULES,
    AuditLimits,
    AuditReport,
    Finding,
    Rule,
    Severity,
    Verdict,
    audit_bundle,
    audit_text,
)
from lemon_skills.bundle import BundleEntry, BundleLimits, bundle_entries, bundle_hash, copy_bundle
from lemon_skills.catalog import SkillCatalog, SkillSummary, prompt_safe
from lemon_skills.errors import (
    LockfileError,
    ManifestError,
    PolicyRefusal,
    SkillsError,
    SkillSourceError,
    SkillsUsageError,
)
from lemon_skills.installer import (
    ApprovalRequired,
    Approver,
    Outcome,
    Plan,
    SkillManager,
    VerifyResult,
)
from lemon_skills.lockfile import BlockedAudit, Lockfile, LockRecord, LockState
from lemon_skills.manifest import (
    MANIFEST_FILE,
    Manifest,
    parse_manifest,
    read_manifest,
    valid_skill_name,
)
from lemon_skills.settings import (
    DEFAULT_GITHUB_URL,
    DEFAULT_HERMES_URL,
    DEFAULT_REGISTRY_URL,
    DEFAULT_WELL_KNOWN,
    SkillsSettings,
)
from lemon_skills.sources import (
    IDENTIFIER_FORMS,
    FetchResult,
    SkillSource,
    SourceFetcher,
    SourceRouter,
    discover_well_known,
)
from lemon_skills.taxonomy import SourceKind, TrustLevel
from lemon_skills.tool import READ_SKILL, read_skill_tool
from lemon_skills.trust import Decision, Operation, Override, TrustPolicy, trust_for

__all__ = [
    "DEFAULT_GITHUB_URL",
    "DEFAULT_HERMES_URL",
    "DEFAULT_REGISTRY_URL",
    "DEFAULT_WELL_KNOWN",
    "IDENTIFIER_FORMS",
    "MANIFEST_FILE",
    "READ_SKILL",
    "RULES",
    "ApprovalRequired",
    "Approver",
    "AuditLimits",
    "AuditReport",
    "BlockedAudit",
    "BundleEntry",
    "BundleLimits",
    "Decision",
    "FetchResult",
    "Finding",
    "LockRecord",
    "LockState",
    "Lockfile",
    "LockfileError",
    "Manifest",
    "ManifestError",
    "Operation",
    "Outcome",
    "Override",
    "Plan",
    "PolicyRefusal",
    "Rule",
    "Severity",
    "SkillCatalog",
    "SkillManager",
    "SkillSource",
    "SkillSourceError",
    "SkillSummary",
    "SkillsError",
    "SkillsSection",
    "SkillsSettings",
    "SkillsUsageError",
    "SourceFetcher",
    "SourceKind",
    "SourceRouter",
    "TrustLevel",
    "TrustPolicy",
    "Verdict",
    "VerifyResult",
    "audit_bundle",
    "audit_text",
    "bundle_entries",
    "bundle_hash",
    "copy_bundle",
    "discover_well_known",
    "parse_manifest",
    "prompt_safe",
    "read_manifest",
    "read_skill_tool",
    "trust_for",
    "valid_skill_name",
]
