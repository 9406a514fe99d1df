"""One run on the session port, as the pieces ``/v1`` answers with.

:func:`run_pieces` watches the session *before* it submits (so no event of the run is missed),
submits with ``followup`` (a request never merges into another client's message), and yields
its :class:`Receipt` once admitted, then the run's text deltas and tool cards (its retries'
too) and finally its :class:`RunEnded`. Approvals the run
asks are denied at once (an HTTP client cannot answer one) unless the request pre-approved the
tool. Leaving the iterator early (the client went away) cancels the run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from lemon_core.execution import Receipt, RunRequest
from lemon_core.sessions import (
    ApprovalAsked,
    QueueNotice,
    RunEnded,
    RunPhaseNotice,
    SessionPort,
    StreamOverflow,
    TextDelta,
    ToolCard,
)

__all__ = ["RunTimeoutError", "run_pieces"]

log = logging.getLogger("lemon_openai.runner")


class RunTimeoutError(Exception):
    """The run had not ended within the configured bound (it was cancelled)."""


async def run_pieces(
    port: SessionPort, request: RunRequest, *, timeout_s: float
) -> AsyncIterator[Receipt | str | ToolCard | RunEnded]:
    """See the module docstring."""
    stream = port.watch(request.session_key)
    run_id: str | None = None
    ended = False
    try:
        receipt = await port.submit(request)
        run_id = receipt.run_id
        yield receipt
        ids = {run_id}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise RunTimeoutError(f"the run did not end within {timeout_s:g} s")
            try:
                event = await asyncio.wait_for(stream.get(), remaining)
            except TimeoutError:
                raise RunTimeoutError(f"the run did not end within {timeout_s:g} s") from None
            if isinstance(event, RunPhaseNotice) and event.retry_of in ids:
                ids.add(event.run_id)
            elif isinstance(event, TextDelta) and event.run_id in ids:
                yield event.text
            elif isinstance(event, ToolCard) and event.run_id in ids:
                if str(event.kind) != "reasoning":
                    yield event
            elif isinstance(event, ApprovalAsked) and event.run_id in ids:
                log.info(
                    "denying approval %s (%s): no interactive client", event.approval_id, event.tool
                )
                await port.resolve_approval(event.approval_id, "deny")
            elif isinstance(event, QueueNotice) and event.run_id in ids and event.into_run_id:
                ids.add(event.into_run_id)
            elif isinstance(event, RunEnded) and event.run_id == run_id:
                ended = True
                yield event
                return
            elif isinstance(event, StreamOverflow):
                raise RunTimeoutError(f"lost the run's events: {event.reason}")
    finally:
        stream.close()
        if run_id is not None and not ended:
            await asyncio.shield(_cancel(port, run_id))


async def _cancel(port: SessionPort, run_id: str) -> None:
    try:
        await port.cancel(run_id=run_id)
    except Exception as exc:  # the port is stopping: nothing more to cancel through it
        log.warning("could not cancel run %s: %s", run_id, exc)
