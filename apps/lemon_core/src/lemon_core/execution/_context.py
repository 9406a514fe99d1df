"""ExecutionContext: the authority one run executes with.

A context binds a run's lineage (run, parent, root, depth), who asked for it (principal and
origin), where it works (workspace), what it may do (capabilities, tool policy) and its
limits. A child's authority is the *intersection* with its parent's: :meth:`ExecutionContext.child`
can only narrow, never widen, and says exactly what was refused when asked to widen.

The wire form (:meth:`ExecutionContext.to_dict`) is versioned; :meth:`ExecutionContext.from_dict`
revalidates everything, so a context that crossed a process boundary is never trusted as-is.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Final, Literal, get_args

from lemon_core.execution._policy import ToolPolicy
from lemon_core.execution.errors import (
    ExecutionContractError,
    PermissionEscalationError,
    require_text,
)

__all__ = ["ExecutionContext", "ExecutionLimits", "Principal", "PrincipalKind"]

PrincipalKind = Literal["user", "channel", "automation", "agent", "system"]
_PRINCIPAL_KINDS: Final = frozenset(get_args(PrincipalKind))


def _min_limit(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionLimits:
    """Resource limits of a run; ``None`` means "no limit at this level"."""

    max_runtime_ms: int | None = None
    max_tool_calls: int | None = None
    max_depth: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_runtime_ms", "max_tool_calls", "max_depth"):
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < 0
            ):
                raise ExecutionContractError(
                    f"ExecutionLimits.{name} must be a non-negative integer or None, got {value!r}"
                )

    def intersect(self, other: ExecutionLimits) -> ExecutionLimits:
        """The tighter of both limits, field by field."""
        return ExecutionLimits(
            max_runtime_ms=_min_limit(self.max_runtime_ms, other.max_runtime_ms),
            max_tool_calls=_min_limit(self.max_tool_calls, other.max_tool_calls),
            max_depth=_min_limit(self.max_depth, other.max_depth),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Principal:
    """Who a run acts for."""

    kind: PrincipalKind
    id: str

    def __post_init__(self) -> None:
        if self.kind not in _PRINCIPAL_KINDS:
            raise ExecutionContractError(
                f"Principal.kind must be one of {sorted(_PRINCIPAL_KINDS)}, got {self.kind!r}"
            )
        require_text("Principal", "id", self.id)


def _is_within(path: str, root: str) -> bool:
    path = os.path.normpath(path)
    root = os.path.normpath(root)
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionContext:
    """The authority of one run. Build the top-level one directly, children with :meth:`child`."""

    VERSION: ClassVar[int] = 1

    run_id: str
    principal: Principal
    origin: str
    parent_run_id: str | None = None
    root_run_id: str = ""
    depth: int = 0
    workspace: str | None = None
    capabilities: frozenset[str] = frozenset()
    tool_policy: ToolPolicy = field(default_factory=ToolPolicy)
    limits: ExecutionLimits = field(default_factory=ExecutionLimits)

    def __post_init__(self) -> None:
        require_text("ExecutionContext", "run_id", self.run_id)
        require_text("ExecutionContext", "origin", self.origin)
        if not self.root_run_id:
            object.__setattr__(self, "root_run_id", self.parent_run_id or self.run_id)
        depth: object = self.depth
        if not isinstance(depth, int) or depth < 0:
            raise ExecutionContractError(f"ExecutionContext.depth must be >= 0, got {self.depth!r}")
        if self.workspace is not None and not os.path.isabs(self.workspace):
            raise ExecutionContractError(
                f"ExecutionContext.workspace must be an absolute path, got {self.workspace!r}"
            )
        caps: object = self.capabilities
        if not isinstance(caps, set | frozenset) or not all(isinstance(c, str) and c for c in caps):
            raise ExecutionContractError(
                f"ExecutionContext.capabilities must be a set of non-empty strings, got {caps!r}"
            )
        object.__setattr__(self, "capabilities", frozenset(caps))
        if self.limits.max_depth is not None and self.depth > self.limits.max_depth:
            raise PermissionEscalationError(
                f"run {self.run_id} is at depth {self.depth}, beyond max_depth "
                f"{self.limits.max_depth}"
            )

    def child(
        self,
        *,
        run_id: str,
        capabilities: Iterable[str] | None = None,
        tool_policy: ToolPolicy | None = None,
        limits: ExecutionLimits | None = None,
        workspace: str | None = None,
        strict: bool = True,
    ) -> ExecutionContext:
        """A child context whose authority is the intersection with this one.

        With ``strict`` (the default) asking for a capability this context lacks, or a
        workspace outside this one, raises :class:`PermissionEscalationError`; with
        ``strict=False`` the request is silently narrowed to the intersection.
        """
        wanted = self.capabilities if capabilities is None else frozenset(capabilities)
        extra = wanted - self.capabilities
        if extra and strict:
            raise PermissionEscalationError(
                f"child run {run_id} asked for capabilities {sorted(extra)} that parent run "
                f"{self.run_id} does not have"
            )
        child_workspace = self.workspace
        if workspace is not None:
            if self.workspace is not None and not _is_within(workspace, self.workspace):
                if strict:
                    raise PermissionEscalationError(
                        f"child run {run_id} asked for workspace {workspace!r} outside the "
                        f"parent's {self.workspace!r}"
                    )
            else:
                child_workspace = workspace
        return ExecutionContext(
            run_id=run_id,
            principal=self.principal,
            origin=self.origin,
            parent_run_id=self.run_id,
            root_run_id=self.root_run_id,
            depth=self.depth + 1,
            workspace=child_workspace,
            capabilities=wanted & self.capabilities,
            tool_policy=self.tool_policy
            if tool_policy is None
            else self.tool_policy.intersect(tool_policy),
            limits=self.limits if limits is None else self.limits.intersect(limits),
        )

    def with_limits(self, limits: ExecutionLimits) -> ExecutionContext:
        """This context with its limits narrowed by ``limits``."""
        return replace(self, limits=self.limits.intersect(limits))

    def to_dict(self) -> dict[str, Any]:
        """The versioned wire form."""
        return {
            "version": self.VERSION,
            "run_id": self.run_id,
            "parent_run_id": self.parent_run_id,
            "root_run_id": self.root_run_id,
            "depth": self.depth,
            "principal": {"kind": self.principal.kind, "id": self.principal.id},
            "origin": self.origin,
            "workspace": self.workspace,
            "capabilities": sorted(self.capabilities),
            "tool_policy": self.tool_policy.to_dict(),
            "limits": {
                "max_runtime_ms": self.limits.max_runtime_ms,
                "max_tool_calls": self.limits.max_tool_calls,
                "max_depth": self.limits.max_depth,
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExecutionContext:
        """Revalidate a wire form; raise :class:`ExecutionContractError` on any problem."""
        if not isinstance(data, Mapping):
            raise ExecutionContractError(f"an execution context must be a mapping, got {data!r}")
        version = data.get("version")
        if version != cls.VERSION:
            raise ExecutionContractError(
                f"unsupported execution context version {version!r}; this build reads "
                f"version {cls.VERSION}"
            )
        try:
            principal = data["principal"]
            limits = data.get("limits") or {}
            return cls(
                run_id=data["run_id"],
                parent_run_id=data.get("parent_run_id"),
                root_run_id=data.get("root_run_id") or "",
                depth=data.get("depth", 0),
                principal=Principal(kind=principal["kind"], id=principal["id"]),
                origin=data["origin"],
                workspace=data.get("workspace"),
                capabilities=frozenset(data.get("capabilities") or ()),
                tool_policy=ToolPolicy.from_mapping(data.get("tool_policy") or {}),
                limits=ExecutionLimits(**limits),
            )
        except (KeyError, TypeError) as exc:
            raise ExecutionContractError(f"malformed execution context: {exc}") from exc
