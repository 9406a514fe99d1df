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

from typing import TYPE_CHECKING, Final

from lemon_core.facade import lazy_exports

if TYPE_CHECKING:
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
    from lemon_skills.bundle import (
        BundleEntry,
        BundleLimits,
        bundle_entries,
        bundle_hash,
        copy_bundle,
    )
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
    from lemon_skills.memory import MEMORY_TOOLS, format_recall, memory_tools
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

#: Where each facade name lives (the lazy loader reads it; the TYPE_CHECKING imports
#: repeat it for type checkers, ``__all__`` for the architecture gate).
_EXPORTS: Final[dict[str, tuple[str, str]]] = {
    "SkillsSection": ("lemon_skills._section", "SkillsSection"),
    "RULES": ("lemon_skills.audit", "RULES"),
    "AuditLimits": ("lemon_skills.audit", "AuditLimits"),
    "AuditReport": ("lemon_skills.audit", "AuditReport"),
    "Finding": ("lemon_skills.audit", "Finding"),
    "Rule": ("lemon_skills.audit", "Rule"),
    "Severity": ("lemon_skills.audit", "Severity"),
    "Verdict": ("lemon_skills.audit", "Verdict"),
    "audit_bundle": ("lemon_skills.audit", "audit_bundle"),
    "audit_text": ("lemon_skills.audit", "audit_text"),
    "BundleEntry": ("lemon_skills.bundle", "BundleEntry"),
    "BundleLimits": ("lemon_skills.bundle", "BundleLimits"),
    "bundle_entries": ("lemon_skills.bundle", "bundle_entries"),
    "bundle_hash": ("lemon_skills.bundle", "bundle_hash"),
    "copy_bundle": ("lemon_skills.bundle", "copy_bundle"),
    "SkillCatalog": ("lemon_skills.catalog", "SkillCatalog"),
    "SkillSummary": ("lemon_skills.catalog", "SkillSummary"),
    "prompt_safe": ("lemon_skills.catalog", "prompt_safe"),
    "LockfileError": ("lemon_skills.errors", "LockfileError"),
    "ManifestError": ("lemon_skills.errors", "ManifestError"),
    "PolicyRefusal": ("lemon_skills.errors", "PolicyRefusal"),
    "SkillsError": ("lemon_skills.errors", "SkillsError"),
    "SkillSourceError": ("lemon_skills.errors", "SkillSourceError"),
    "SkillsUsageError": ("lemon_skills.errors", "SkillsUsageError"),
    "ApprovalRequired": ("lemon_skills.installer", "ApprovalRequired"),
    "Approver": ("lemon_skills.installer", "Approver"),
    "Outcome": ("lemon_skills.installer", "Outcome"),
    "Plan": ("lemon_skills.installer", "Plan"),
    "SkillManager": ("lemon_skills.installer", "SkillManager"),
    "VerifyResult": ("lemon_skills.installer", "VerifyResult"),
    "BlockedAudit": ("lemon_skills.lockfile", "BlockedAudit"),
    "Lockfile": ("lemon_skills.lockfile", "Lockfile"),
    "LockRecord": ("lemon_skills.lockfile", "LockRecord"),
    "LockState": ("lemon_skills.lockfile", "LockState"),
    "MANIFEST_FILE": ("lemon_skills.manifest", "MANIFEST_FILE"),
    "Manifest": ("lemon_skills.manifest", "Manifest"),
    "parse_manifest": ("lemon_skills.manifest", "parse_manifest"),
    "read_manifest": ("lemon_skills.manifest", "read_manifest"),
    "valid_skill_name": ("lemon_skills.manifest", "valid_skill_name"),
    "DEFAULT_GITHUB_URL": ("lemon_skills.settings", "DEFAULT_GITHUB_URL"),
    "DEFAULT_HERMES_URL": ("lemon_skills.settings", "DEFAULT_HERMES_URL"),
    "DEFAULT_REGISTRY_URL": ("lemon_skills.settings", "DEFAULT_REGISTRY_URL"),
    "DEFAULT_WELL_KNOWN": ("lemon_skills.settings", "DEFAULT_WELL_KNOWN"),
    "SkillsSettings": ("lemon_skills.settings", "SkillsSettings"),
    "IDENTIFIER_FORMS": ("lemon_skills.sources", "IDENTIFIER_FORMS"),
    "FetchResult": ("lemon_skills.sources", "FetchResult"),
    "SkillSource": ("lemon_skills.sources", "SkillSource"),
    "SourceFetcher": ("lemon_skills.sources", "SourceFetcher"),
    "SourceRouter": ("lemon_skills.sources", "SourceRouter"),
    "discover_well_known": ("lemon_skills.sources", "discover_well_known"),
    "SourceKind": ("lemon_skills.taxonomy", "SourceKind"),
    "TrustLevel": ("lemon_skills.taxonomy", "TrustLevel"),
    "MEMORY_TOOLS": ("lemon_skills.memory", "MEMORY_TOOLS"),
    "format_recall": ("lemon_skills.memory", "format_recall"),
    "memory_tools": ("lemon_skills.memory", "memory_tools"),
    "READ_SKILL": ("lemon_skills.tool", "READ_SKILL"),
    "read_skill_tool": ("lemon_skills.tool", "read_skill_tool"),
    "Decision": ("lemon_skills.trust", "Decision"),
    "Operation": ("lemon_skills.trust", "Operation"),
    "Override": ("lemon_skills.trust", "Override"),
    "TrustPolicy": ("lemon_skills.trust", "TrustPolicy"),
    "trust_for": ("lemon_skills.trust", "trust_for"),
}

__all__ = [
    "DEFAULT_GITHUB_URL",
    "DEFAULT_HERMES_URL",
    "DEFAULT_REGISTRY_URL",
    "DEFAULT_WELL_KNOWN",
    "IDENTIFIER_FORMS",
    "MANIFEST_FILE",
    "MEMORY_TOOLS",
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
    "format_recall",
    "memory_tools",
    "parse_manifest",
    "prompt_safe",
    "read_manifest",
    "read_skill_tool",
    "trust_for",
    "valid_skill_name",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, __all__)
