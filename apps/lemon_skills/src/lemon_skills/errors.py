"""The errors of lemon_skills: one base class, misuse apart from runtime failures and refusals.

* :class:`SkillsUsageError`: the caller's mistake (an identifier no source form matches, an
  unknown skill name, a bad option); the CLI exits 2.
* :class:`PolicyRefusal`: the trust policy or the audit refused an operation (a block verdict
  without a matching override, an operation nobody approved); the CLI exits 1.
* :class:`SkillSourceError`, :class:`ManifestError`, :class:`LockfileError`: a runtime failure
  (a clone failed, a registry did not answer, a SKILL.md is malformed, the lockfile is corrupt).
"""

from __future__ import annotations

__all__ = [
    "LockfileError",
    "ManifestError",
    "PolicyRefusal",
    "SkillSourceError",
    "SkillsError",
    "SkillsUsageError",
]


class SkillsError(Exception):
    """Base class of every lemon_skills error."""


class SkillsUsageError(SkillsError):
    """The caller's mistake: what is wrong and how to fix it."""


class PolicyRefusal(SkillsError):
    """The trust policy or the audit refused the operation; nothing was changed."""


class SkillSourceError(SkillsError):
    """A source could not be fetched (clone, registry, probe) or is not a skill."""


class ManifestError(SkillsError):
    """A ``SKILL.md`` is missing or its front matter is not a valid skill manifest."""


class LockfileError(SkillsError):
    """The lockfile cannot be read or written."""
