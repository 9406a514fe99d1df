"""Queue facts that the mutation lane (scripts/mutate) found untested."""

from __future__ import annotations

import pytest

from lemon_router import ConversationQueue, StartRun, Submission


def _sub(run_id: str) -> Submission:
    return Submission(
        run_id=run_id, session_key="agent:a:main", prompt=run_id, queue_mode="collect"
    )


def test_router_queue_end_of_a_run_that_is_not_active_changes_nothing() -> None:
    q = ConversationQueue("k")
    q.submit(_sub("r0"), 0)
    q.submit(_sub("r1"), 1)
    assert q.run_ended("someone-else", 2) == []
    assert q.active is not None
    assert q.active.run_id == "r0"
    assert q.queued_run_ids() == ("r1",)
    effects = q.run_ended("r0", 3)
    assert [e.submission.run_id for e in effects if isinstance(e, StartRun)] == ["r1"]


@pytest.mark.parametrize("bound", [0, -1])
def test_router_queue_without_room_is_refused(bound: int) -> None:
    with pytest.raises(ValueError, match="max_pending must be at least 1"):
        ConversationQueue("k", max_pending=bound)
