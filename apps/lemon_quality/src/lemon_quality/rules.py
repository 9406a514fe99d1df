"""The rule catalogue: every finding carries one of these stable codes.

Codes never change meaning; a retired rule's code is not reused. ``severity`` says whether a
finding of that rule fails the gate (``fail``) or is only reported (``warn``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["fail", "warn"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Rule:
    """One rule: its stable code, severity, and a one-line summary."""

    code: str
    severity: Severity
    summary: str


_ALL = (
    Rule(
        code="unknown_app",
        severity="fail",
        summary="a workspace app has no entry in architecture.toml",
    ),
    Rule(
        code="missing_app",
        severity="fail",
        summary="an architecture.toml entry names no workspace app",
    ),
    Rule(
        code="forbidden_dependency",
        severity="fail",
        summary="a pyproject dependency on another app is not allowed by the policy",
    ),
    Rule(
        code="stale_permission",
        severity="fail",
        summary="the policy allows an edge that no pyproject declares any more",
    ),
    Rule(
        code="workspace_source",
        severity="fail",
        summary="a dependency on another app does not come from a `workspace = true` source",
    ),
    Rule(
        code="undeclared_reference",
        severity="fail",
        summary="source imports another app without a runtime edge or a reference-only exception",
    ),
    Rule(
        code="stale_exception",
        severity="fail",
        summary="a reference-only exception matches no import",
    ),
    Rule(
        code="private_reference",
        severity="fail",
        summary="source imports another app's private (`_name`) module or name",
    ),
    Rule(
        code="forbidden_reference",
        severity="fail",
        summary="source imports a module that a forbidden-reference rule reserves to other apps",
    ),
    Rule(
        code="undeclared_third_party",
        severity="fail",
        summary="a runtime import of a third-party package the app does not declare",
    ),
    Rule(
        code="unused_dependency",
        severity="warn",
        summary="a declared third-party dependency that no source file imports",
    ),
    Rule(
        code="dependency_cycle",
        severity="fail",
        summary="a cycle among apps in the declared or the policy graph",
    ),
    Rule(code="role_violation", severity="fail", summary="an allowed edge breaks the role rules"),
    Rule(
        code="sys_path_manipulation",
        severity="fail",
        summary="app source edits sys.path / calls site.addsitedir, or ships a .pth file",
    ),
    Rule(
        code="app_layout",
        severity="fail",
        summary="an app's name, directory and import package disagree, or src/ has extra packages",
    ),
    Rule(
        code="duplicate_name",
        severity="fail",
        summary="two apps share a distribution name or an import name",
    ),
    Rule(
        code="invalid_pyproject",
        severity="fail",
        summary="a member pyproject.toml cannot be read or has no [project] name",
    ),
    Rule(code="syntax_error", severity="fail", summary="an app source file cannot be parsed"),
    Rule(
        code="stale_architecture_doc",
        severity="fail",
        summary="the generated policy table is missing or out of date",
    ),
    Rule(
        code="broken_link",
        severity="fail",
        summary="a local Markdown link points at a missing file or heading",
    ),
    Rule(code="duplicate_test_module", severity="fail", summary="two test files share a basename"),
    Rule(
        code="no_source_files",
        severity="fail",
        summary="an app has no import package, or its packages hold no .py file",
    ),
    Rule(
        code="unresolved_dynamic_metadata",
        severity="fail",
        summary="dynamic dependencies that cannot be resolved statically",
    ),
    Rule(
        code="oversized_file",
        severity="fail",
        summary="a source file above [scan] max_file_bytes: its imports are not checked",
    ),
    Rule(
        code="denied_third_party",
        severity="fail",
        summary="an app imports or declares a third-party package its role or policy denies",
    ),
    Rule(
        code="unexported_reference",
        severity="fail",
        summary="source imports a module another app does not list in its exports",
    ),
    Rule(
        code="boot_reference",
        severity="fail",
        summary="an AppSpec requires/before name or an entry point breaks the policy",
    ),
    Rule(
        code="stale_forbidden_reference",
        severity="fail",
        summary="a forbidden-reference rule names a module no app has",
    ),
    Rule(
        code="export_list",
        severity="fail",
        summary="an __all__ is not literal, sorted, complete and exact",
    ),
    Rule(
        code="stale_baseline",
        severity="fail",
        summary="a baseline entry matches no current finding",
    ),
    Rule(
        code="target_drift",
        severity="warn",
        summary="the current dependencies differ from the target policy (migration report)",
    ),
)

RULES: dict[str, Rule] = {rule.code: rule for rule in _ALL}
"""Every rule by code, in catalogue order."""
