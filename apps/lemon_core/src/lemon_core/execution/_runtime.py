"""The EngineRuntime capability and the capability registry of a runtime context.

Lower apps reach higher ones through capabilities: the router calls the
:class:`EngineRuntime` that the gateway registered on the :class:`RuntimeContext` it was
started with. Nothing lives in module globals, so one process can host several isolated
runtimes (tests do).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Literal, Protocol, TypeVar, cast, runtime_checkable

import msgspec

from lemon_core.errors import LemonCoreError, UsageTypeError
from lemon_core.events import Completion
from lemon_core.execution._command import ExecutionCommand

__all__ = [
    "ENGINE_RUNTIME",
    "Capability",
    "CapabilityConflictError",
    "CapabilityMissingError",
    "CapabilityRegistry",
    "EngineRuntime",
    "RunActionView",
    "RunIntrospection",
    "RunLiveness",
    "RunView",
    "RuntimeContext",
    "SteerableRuntime",
]

T = TypeVar("T")


class CapabilityMissingError(LemonCoreError, LookupError):
    """No implementation of a required capability is registered."""


class CapabilityConflictError(LemonCoreError, RuntimeError):
    """A capability is already registered by another implementation."""


@runtime_checkable
class EngineRuntime(Protocol):
    """Runs ExecutionCommands. Implemented by the gateway, called by the router.

    ``submit_execution`` accepts (acceptance is not completion) or raises a clear error for
    a command that can never be accepted; it is the one way in (seed 000 forbids a
    ``Runtime.submit``: there is no other submission name). ``cancel`` is total and
    idempotent on the runtime's event loop: there it never raises and returns whether a
    live or queued run with exactly that id was found. Every method is loop-only: called
    from another thread, ``cancel`` raises a ``RuntimeError`` subclass that names the
    implementation's thread-safe twin and changes nothing (the gateway:
    ``WrongThreadError``, and ``Gateway.cancel_threadsafe(run_id, reason)`` returning a
    ``concurrent.futures.Future`` of the same answer). ``available`` is liveness, not
    capacity.
    """

    def submit_execution(self, command: ExecutionCommand) -> object:
        """Accept ``command`` for execution (loop-only); what it returns (the gateway: a
        ``RunHandle``) is the implementation's, callers of the seam ignore it."""
        ...

    def cancel(self, run_id: str, reason: str = "user_requested") -> bool:
        """Cancel the run with exactly this id, if it is queued or running."""
        ...

    def available(self) -> bool:
        """True when submissions are being accepted."""
        ...


@runtime_checkable
class SteerableRuntime(Protocol):
    """Optional EngineRuntime extension: offer text to a running run (loop-only).

    An EngineRuntime without it makes every steer fall back (the router queues the text as a
    follow-up). The gateway implements it by handing the text to the run's prepared
    execution when that implements :class:`~lemon_core.execution.SteerableExecution`.
    """

    def steer(self, run_id: str, text: str) -> bool:
        """True only when the run with exactly this id is running and took ``text``;
        False otherwise (unknown, queued, finishing, or its execution refused). Never
        raises."""
        ...


@runtime_checkable
class RunLiveness(Protocol):
    """Optional EngineRuntime extension: does the runtime still hold this run? (loop-only)"""

    def is_live(self, run_id: str) -> bool:
        """True from acceptance until the run's completion is published."""
        ...


class RunActionView(msgspec.Struct, frozen=True, kw_only=True):
    """The latest state of one action of a run, as its runtime knows it."""

    id: str
    kind: str
    title: str
    phase: Literal["started", "updated", "completed"]
    ok: bool | None = None
    message: str | None = None


class RunView(msgspec.Struct, frozen=True, kw_only=True):
    """A live run as its owner (the runtime executing it) knows it: the authority a session
    snapshot re-reads after a consumer fell behind."""

    run_id: str
    state: str
    text: str
    text_seq: int
    text_truncated: bool = False
    actions: tuple[RunActionView, ...] = ()


@runtime_checkable
class RunIntrospection(Protocol):
    """Optional EngineRuntime extension: read a live run's text and actions (loop-only)."""

    def run_view(self, run_id: str, *, max_text_chars: int = 262_144) -> RunView | None:
        """The run with exactly this id, while it is held; ``None`` once completed or unknown.
        ``text`` keeps the last ``max_text_chars`` characters (``text_truncated`` says so)."""
        ...

    def completion_future(self, run_id: str) -> asyncio.Future[Completion] | None:
        """The future of the live run's one Completion (``None`` once completed or unknown):
        a consumer whose event stream overflowed reads the real outcome from it. Await it
        through ``asyncio.shield``; never cancel or resolve it."""
        ...


class Capability(Generic[T]):
    """A typed capability key, e.g. :data:`ENGINE_RUNTIME` for :class:`EngineRuntime`."""

    __slots__ = ("__name__", "protocol")

    def __init__(self, name: str, protocol: type[Any]) -> None:
        self.__name__ = name
        self.protocol = protocol

    def __repr__(self) -> str:
        return f"Capability({self.__name__})"


#: The capability the gateway registers and the router calls.
ENGINE_RUNTIME: Final[Capability[EngineRuntime]] = Capability("EngineRuntime", EngineRuntime)


class CapabilityRegistry:
    """Capabilities keyed by :class:`Capability`; one implementation per capability.

    Registration checks the implementation against the capability's protocol.
    """

    __slots__ = ("_impls",)

    def __init__(self) -> None:
        self._impls: dict[Capability[Any], object] = {}

    def register(self, capability: Capability[T], impl: T) -> None:
        """Register ``impl`` as ``capability``; raise if another one is registered."""
        if not isinstance(impl, capability.protocol):
            raise UsageTypeError(
                f"{impl!r} does not implement {capability.__name__} "
                f"({capability.protocol.__module__}.{capability.protocol.__qualname__})"
            )
        current = self._impls.get(capability)
        if current is not None and current is not impl:
            raise CapabilityConflictError(
                f"{capability.__name__} is already provided by {current!r}; unregister it first"
            )
        self._impls[capability] = impl

    def unregister(self, capability: Capability[T], impl: T) -> bool:
        """Remove ``impl`` if it is the registered one; return whether it was."""
        if self._impls.get(capability) is impl:
            del self._impls[capability]
            return True
        return False

    def get(self, capability: Capability[T]) -> T | None:
        """The registered implementation, or None."""
        return cast("T | None", self._impls.get(capability))

    def require(self, capability: Capability[T]) -> T:
        """The registered implementation; raise :class:`CapabilityMissingError` if none."""
        impl = self._impls.get(capability)
        if impl is None:
            raise CapabilityMissingError(
                f"no {capability.__name__} is registered on this runtime; start the app "
                "that provides it (for EngineRuntime: lemon_gateway)"
            )
        return cast("T", impl)

    def statistics(self) -> dict[str, str]:
        """Capability name -> implementation type name."""
        return {cap.__name__: type(impl).__name__ for cap, impl in self._impls.items()}


@dataclass(kw_only=True, slots=True)
class RuntimeContext:
    """The runtime's name and capability registry (what apps publish to each other)."""

    name: str = "default"
    capabilities: CapabilityRegistry = field(default_factory=CapabilityRegistry)
