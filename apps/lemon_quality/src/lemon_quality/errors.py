"""The error hierarchy of lemon_quality.

Findings are data, not exceptions: a workspace that breaks the rules yields a report. These
exceptions are for what stops the gate from checking at all (exit code 2): a policy file that
cannot be read or is malformed, a root that is not a uv workspace, bad command-line usage.
"""

from __future__ import annotations


class QualityError(Exception):
    """Base class: the gate could not run (exit code 2)."""


class UsageError(QualityError):
    """Bad command-line arguments."""


class PolicyError(QualityError):
    """``architecture.toml`` is missing, unreadable or malformed."""


class WorkspaceError(QualityError):
    """The root is not a uv workspace the gate can read (no or broken root ``pyproject.toml``)."""
