"""What loading a configuration reports: issues (errors) and deprecations (findings)."""

from __future__ import annotations

from dataclasses import dataclass

from lemon_core.errors import LemonCoreError

__all__ = ["ConfigDeprecation", "ConfigError", "ConfigIssue"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfigIssue:
    """One problem: where it is (``source`` file or env var, dotted ``key``), what, how to fix."""

    source: str
    key: str
    message: str
    hint: str = ""

    def render(self) -> str:
        where = f"{self.source}: {self.key}" if self.key else self.source
        return f"{where}: {self.message}" + (f" ({self.hint})" if self.hint else "")


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfigDeprecation:
    """A key read under its old spelling: where (``source`` file, dotted ``key``) and the
    spelling to use instead (``replacement``, dotted). Reported, never an error."""

    source: str
    key: str
    replacement: str

    def render(self) -> str:
        return f"{self.source}: {self.key}: deprecated, still read; use {self.replacement}"


class ConfigError(LemonCoreError, ValueError):
    """The configuration is invalid; ``issues`` lists every problem found."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        self.issues = tuple(issues)
        super().__init__("invalid configuration:\n" + "\n".join(f"  {i.render()}" for i in issues))
