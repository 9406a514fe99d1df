"""The router's chat-state readback, asked for by the engine under a shared session lease.

The router owns automatic resume: before it submits a command it reads the session's chat
state and sets ``resume`` (with ``resume_mode="auto"``). With several daemons on one store, a
run of the same session on another daemon may write a newer native session id between that
readback and the moment this daemon's engine holds the session's shared lease. The engine then
asks the :class:`ResumeReadback` the router registered as :data:`RESUME_READBACK` for the token
to use now; the router decides (an explicit token, or auto-resume disabled: none) and reads its
chat state. Without a registered readback (no router, one daemon) the command runs as
submitted.
"""

from __future__ import annotations

from typing import Final, Protocol, runtime_checkable

from lemon_core.execution._command import ExecutionCommand
from lemon_core.execution._resume import ResumeToken
from lemon_core.execution._runtime import Capability

__all__ = ["RESUME_READBACK", "ResumeReadback"]


@runtime_checkable
class ResumeReadback(Protocol):
    """Implemented by the router, called by the engine (loop-only)."""

    async def latest_resume(self, command: ExecutionCommand) -> ResumeToken | None:
        """The token an automatic resume of ``command`` should use now, when it differs from
        the command's own; ``None``: run the command as submitted (not automatic, nothing
        newer, or the chat state unreadable). Never raises for a store failure."""
        ...


#: The capability the router registers and the engine asks under a shared session lease.
RESUME_READBACK: Final[Capability[ResumeReadback]] = Capability("ResumeReadback", ResumeReadback)
