"""Parent questions: a child task asks the run that delegated it (``ask_parent``).

A question is a durable record (:class:`ParentQuestion`, table ``parent_questions``) that
moves once from ``pending`` to ``answered``, ``timeout`` or ``cancelled``;
:meth:`ParentQuestionStore.resolve` is the one place that moves it, under a lock, so between
an answer and the deadline there is exactly one winner (the loser reads the winner's record).

Each change is published (seed 003) as ``parent_question_requested`` /
``parent_question_answered`` / ``parent_question_timeout`` / ``parent_question_cancelled``
with the full record on the child's and the parent's run topics, and rung on
``parent_question:<id>``: a doorbell. Its payload is not read by the waiter: it re-reads the
record from the store (:meth:`ParentQuestionStore.wait`).
"""

from __future__ import annotations

import asyncio
from typing import Any, Final, Literal

import msgspec

from lemon_core.bus import Bus, Delivery, run_topic
from lemon_core.store import Store

__all__ = [
    "ParentQuestion",
    "ParentQuestionStore",
    "QuestionStatus",
    "question_topic",
]

QuestionStatus = Literal["pending", "answered", "timeout", "cancelled"]
_EVENTS: Final[dict[str, str]] = {
    "pending": "parent_question_requested",
    "answered": "parent_question_answered",
    "timeout": "parent_question_timeout",
    "cancelled": "parent_question_cancelled",
}


def question_topic(question_id: str) -> str:
    """``parent_question:<id>``: the question's doorbell (a signal; re-read the record)."""
    return f"parent_question:{question_id}"


class ParentQuestion(msgspec.Struct, frozen=True, kw_only=True):
    """One question of a child task to its parent, and how it ended."""

    question_id: str
    task_id: str
    child_run_id: str
    parent_run_id: str
    parent_session_key: str
    session_key: str
    """The child's session."""
    question: str
    options: tuple[str, ...] = ()
    status: QuestionStatus = "pending"
    answer: str | None = None
    answered_by: Literal["parent", "person"] | None = None
    created_at_ms: int = 0
    deadline_ms: int = 0
    resolved_at_ms: int | None = None

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = msgspec.to_builtins(self)
        return data


class ParentQuestionStore:
    """The questions over a :class:`~lemon_core.store.Store`, published on ``bus``. Loop-only."""

    TABLE: Final = "parent_questions"

    def __init__(self, store: Store, bus: Bus | None) -> None:
        self._store = store
        self._bus = bus
        self._lock = asyncio.Lock()
        self._rung: dict[str, asyncio.Event] = {}  # the doorbell without a bus

    async def get(self, question_id: str) -> ParentQuestion | None:
        data = await self._store.get(self.TABLE, question_id)
        return None if data is None else msgspec.convert(data, ParentQuestion)

    async def ask(self, question: ParentQuestion) -> ParentQuestion:
        """Write a new pending question and announce it."""
        await self._store.put(self.TABLE, question.question_id, question.to_dict())
        self._announce(question)
        return question

    async def resolve(
        self,
        question_id: str,
        status: QuestionStatus,
        *,
        now_ms: int,
        answer: str | None = None,
        by: Literal["parent", "person"] | None = None,
    ) -> tuple[ParentQuestion, bool]:
        """Move a pending question to ``status``; returns the record and whether this call
        won (False: it had already ended, the record returned is the winner's)."""
        async with self._lock:
            current = await self.get(question_id)
            if current is None:
                raise KeyError(question_id)
            if not current.pending:
                return current, False
            final = msgspec.structs.replace(
                current, status=status, answer=answer, answered_by=by, resolved_at_ms=now_ms
            )
            await self._store.put(self.TABLE, question_id, final.to_dict())
        self._announce(final)
        return final, True

    async def wait(self, question_id: str, timeout_s: float) -> ParentQuestion | None:
        """Wait until the question is no longer pending, at most ``timeout_s``: on each ring
        of its doorbell the record is read again. Returns it ended, or None at the timeout."""
        delivery: Delivery | None = None
        subscription = None
        rung = self._rung.setdefault(question_id, asyncio.Event())
        if self._bus is not None:
            delivery = Delivery(max_entries=8, bind_current_task=False)
            subscription = self._bus.subscribe(question_topic(question_id), delivery=delivery)
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    current = await self.get(question_id)
                    if current is not None and not current.pending:
                        return current
                    if delivery is not None:
                        await delivery.get()  # a ring (or an overflow): either way, re-read
                    else:
                        await rung.wait()
                        rung.clear()
        except TimeoutError:
            return None
        finally:
            if subscription is not None:
                subscription.cancel()
            self._rung.pop(question_id, None)

    def _announce(self, question: ParentQuestion) -> None:
        rung = self._rung.get(question.question_id)
        if rung is not None:
            rung.set()
        if self._bus is None:
            return
        payload = question.to_dict()
        meta = {"task_id": question.task_id, "question_id": question.question_id}
        event = _EVENTS[question.status]
        for topic in (
            run_topic(question.child_run_id),
            run_topic(question.parent_run_id),
            question_topic(question.question_id),
        ):
            self._bus.broadcast_event(topic, event, payload, meta=meta)
