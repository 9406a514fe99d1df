"""ToolPolicy: which tools a run may call, strictly validated.

A policy is *supplied* data (from config, a request, a parent run), so
:meth:`ToolPolicy.from_mapping` rejects anything it does not understand instead of
guessing: unknown keys, non-string tool names, blank names and wrong container types all
raise :class:`InvalidToolPolicyError` naming the offending key. Policies combine by
intersection (:meth:`ToolPolicy.intersect`): the result never permits a tool that either
side forbids.

A policy a *client* supplies only narrows (:meth:`ToolPolicy.for_run`): the daemon's policy
(the agent's profile, else the executor's default) is always the base, so a request can deny
more tools or ask about more, never lift a deny or widen ``allow``. Skipping an approval
question is a separate grant, ``preapproved`` (tool names or :data:`ALL_TOOLS`), which the
surface that accepts it must authorise (the control plane asks for the ``approvals`` scope).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from lemon_core.execution.errors import InvalidToolPolicyError

__all__ = ["ALL_TOOLS", "ToolPolicy", "check_preapproved"]

#: In ``preapproved``: every tool's approval question is skipped (never a deny lifted).
ALL_TOOLS: Final = "*"

_TOOL_NAME_RE: Final = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$")
_KEYS: Final = frozenset({"allow", "deny", "require_approval"})
# In ``preapproved`` only: a glob over MCP tools (``mcp_fs_*``), whose names are known only
# once their server has started.
_MCP_GLOB_RE: Final = re.compile(r"^mcp_[A-Za-z0-9_.:*?-]{1,124}$")


def _names(key: str, value: object) -> frozenset[str]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise InvalidToolPolicyError(
            f"tool policy {key!r} must be a list of tool names, got {type(value).__name__}"
        )
    out: set[str] = set()
    for item in value:
        if not isinstance(item, str) or not _TOOL_NAME_RE.match(item):
            raise InvalidToolPolicyError(
                f"tool policy {key!r} has an invalid tool name {item!r}: use 1-128 characters "
                "of letters, digits, '_', '.', ':' or '-'"
            )
        out.add(item)
    return frozenset(out)


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolPolicy:
    """Which tools a run may use.

    ``allow`` is the set of permitted tools, or ``None`` for "every tool not denied";
    ``deny`` always wins over ``allow``; ``require_approval`` lists tools that need an
    approval before each call.
    """

    allow: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()
    require_approval: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.allow is not None:
            object.__setattr__(self, "allow", _names("allow", self.allow))
        object.__setattr__(self, "deny", _names("deny", self.deny))
        object.__setattr__(
            self, "require_approval", _names("require_approval", self.require_approval)
        )

    @classmethod
    def unrestricted(cls) -> ToolPolicy:
        """The policy that permits every tool without approval."""
        return cls()

    @classmethod
    def from_mapping(cls, data: object) -> ToolPolicy:
        """Strictly parse a supplied policy mapping (keys: allow, deny, require_approval)."""
        if isinstance(data, ToolPolicy):
            return data
        if not isinstance(data, Mapping):
            raise InvalidToolPolicyError(
                f"a tool policy must be a mapping with keys {sorted(_KEYS)}, "
                f"got {type(data).__name__}"
            )
        unknown = [k for k in data if k not in _KEYS]
        if unknown:
            raise InvalidToolPolicyError(
                f"unknown tool policy keys {sorted(map(str, unknown))}; "
                f"allowed keys are {sorted(_KEYS)}"
            )
        allow = data.get("allow")
        return cls(
            allow=None if allow is None else _names("allow", allow),
            deny=_names("deny", data.get("deny", ())),
            require_approval=_names("require_approval", data.get("require_approval", ())),
        )

    def permits(self, tool: str) -> bool:
        """True when ``tool`` may be called under this policy."""
        if tool in self.deny:
            return False
        return self.allow is None or tool in self.allow

    def needs_approval(self, tool: str) -> bool:
        """True when each call of ``tool`` needs an approval first."""
        return tool in self.require_approval

    def intersect(self, other: ToolPolicy) -> ToolPolicy:
        """The policy permitting only what both permit, needing every approval either needs."""
        if self.allow is None:
            allow = other.allow
        elif other.allow is None:
            allow = self.allow
        else:
            allow = self.allow & other.allow
        return ToolPolicy(
            allow=allow,
            deny=self.deny | other.deny,
            require_approval=self.require_approval | other.require_approval,
        )

    def is_within(self, other: ToolPolicy) -> bool:
        """True when this policy grants nothing that ``other`` does not."""
        return self.intersect(other).normalized() == self.normalized()

    def normalized(self) -> ToolPolicy:
        """An equal-meaning policy with denied tools removed from ``allow``."""
        allow = None if self.allow is None else self.allow - self.deny
        return ToolPolicy(allow=allow, deny=self.deny, require_approval=self.require_approval)

    def for_run(
        self, requested: ToolPolicy | None, preapproved: frozenset[str] = frozenset()
    ) -> ToolPolicy:
        """This (the daemon's) policy as one run gets it: narrowed by ``requested``, then
        without the approval questions ``preapproved`` skips (tool names or
        :data:`ALL_TOOLS`), except those ``requested`` itself asks for. Never permits a tool
        this policy does not."""
        narrowed = self if requested is None else self.intersect(requested)
        if not preapproved:
            return narrowed
        own = frozenset() if requested is None else requested.require_approval
        asked = narrowed.require_approval
        waived = asked if ALL_TOOLS in preapproved else asked & preapproved
        return ToolPolicy(
            allow=narrowed.allow,
            deny=narrowed.deny,
            require_approval=(asked - waived) | own,
        )

    def to_dict(self) -> dict[str, list[str] | None]:
        """The wire form, with sorted lists."""
        return {
            "allow": None if self.allow is None else sorted(self.allow),
            "deny": sorted(self.deny),
            "require_approval": sorted(self.require_approval),
        }


def check_preapproved(value: object) -> frozenset[str]:
    """A ``preapproved`` set, strictly validated (tool names, :data:`ALL_TOOLS`, or a glob
    over MCP tools such as ``mcp_fs_*``)."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise InvalidToolPolicyError(
            f"preapproved must be a list of tool names (or {ALL_TOOLS!r}), "
            f"got {type(value).__name__}"
        )
    items = list(value)
    globs = {
        v
        for v in items
        if isinstance(v, str) and v != ALL_TOOLS and ("*" in v or "?" in v)
        and _MCP_GLOB_RE.match(v)
    }  # fmt: skip
    names = _names("preapproved", [v for v in items if v != ALL_TOOLS and v not in globs])
    names |= globs
    return names | {ALL_TOOLS} if ALL_TOOLS in items else names
