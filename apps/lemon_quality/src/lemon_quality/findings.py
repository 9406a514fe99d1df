"""Findings and the report: what the gate produces, as data, rendered once at the end."""

from __future__ import annotations

from dataclasses import dataclass, field

from lemon_quality.rules import RULES, Severity


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    """One violation (or warning) of one rule.

    ``path`` is relative to the workspace root with ``/`` separators; ``line`` is 1-based.
    ``hint`` says what to do about it.
    """

    code: str
    app: str | None
    path: str | None
    line: int | None
    message: str
    hint: str

    @property
    def severity(self) -> Severity:
        """``fail`` or ``warn``, from the rule catalogue."""
        return RULES[self.code].severity

    def sort_key(self) -> tuple[str, str, int, str, str]:
        """Stable order: by path, line, code, message."""
        return (self.path or "", self.code, self.line or 0, self.app or "", self.message)


@dataclass(frozen=True, kw_only=True, slots=True)
class Report:
    """The result of one run: all findings, sorted, and counters about the run."""

    root: str
    findings: tuple[Finding, ...]
    statistics: dict[str, int] = field(default_factory=dict)

    @property
    def failures(self) -> tuple[Finding, ...]:
        """Findings whose rule fails the gate."""
        return tuple(f for f in self.findings if f.severity == "fail")

    @property
    def warnings(self) -> tuple[Finding, ...]:
        """Findings that are only reported."""
        return tuple(f for f in self.findings if f.severity == "warn")

    @property
    def ok(self) -> bool:
        """True when nothing fails."""
        return not self.failures
