"""The architecture and quality gate for uv workspaces (``lemon quality``).

Public API: :func:`run_checks` returns a :class:`Report` of :class:`Finding` records;
:func:`main` is the command line; :data:`RULES` is the rule catalogue; :func:`load_policy` reads
``architecture.toml``.
"""

from __future__ import annotations

from lemon_quality.cli import main
from lemon_quality.errors import PolicyError, QualityError, UsageError, WorkspaceError
from lemon_quality.findings import Finding, Report
from lemon_quality.gate import run_checks
from lemon_quality.policy import Policy, load_policy
from lemon_quality.rules import RULES, Rule

__all__ = [
    "RULES",
    "Finding",
    "Policy",
    "PolicyError",
    "QualityError",
    "Report",
    "Rule",
    "UsageError",
    "WorkspaceError",
    "load_policy",
    "main",
    "run_checks",
]
