"""Cooperative abort: a signal the loop checks at safe points and tools can watch."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from lemon_agent.errors import AbortedError

__all__ = ["AbortSignal"]


class AbortSignal:
    """Set once by :meth:`abort`; observed by polling, awaiting or callbacks.

    The agent loop checks it before every model call and tool batch, cancels an in-flight model
    stream when it fires, and gives running tools ``abort_grace`` seconds to stop on their own
    (a long tool should ``await signal.wait()`` alongside its work or call
    :meth:`raise_if_aborted` between steps) before cancelling them. Loop-only: call ``abort`` from
    the event loop thread (``loop.call_soon_threadsafe(signal.abort)`` from elsewhere).
    """

    def __init__(self) -> None:
        self._reason: str | None = None
        self._event = asyncio.Event()
        self._callbacks: list[Callable[[], None]] = []

    @property
    def aborted(self) -> bool:
        """Whether :meth:`abort` was called."""
        return self._reason is not None

    @property
    def reason(self) -> str | None:
        """Why the run was aborted, or ``None``."""
        return self._reason

    def abort(self, reason: str = "aborted") -> None:
        """Fire the signal (idempotent: the first reason wins)."""
        if self._reason is not None:
            return
        self._reason = reason
        self._event.set()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def raise_if_aborted(self) -> None:
        """Raise :class:`AbortedError` if the signal fired."""
        if self._reason is not None:
            raise AbortedError(self._reason)

    async def wait(self) -> str:
        """Wait until the signal fires; return the reason."""
        await self._event.wait()
        assert self._reason is not None
        return self._reason

    def add_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` when the signal fires (at once if it already has).

        Returns a function that removes the callback.
        """
        if self._reason is not None:
            callback()
            return lambda: None
        self._callbacks.append(callback)

        def remove() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return remove
