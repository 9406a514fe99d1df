"""Each queue mode and its fallback, on the pure per-conversation queue."""

from __future__ import annotations

from lemon_router import (
    CancelActive,
    ConversationQueue,
    Effect,
    QueueMode,
    Requeued,
    SendSteer,
    Settled,
    StartRun,
    Submission,
)

SESSION = "agent:a:main"


def sub(run_id: str, mode: QueueMode = "collect", **kw: object) -> Submission:
    return Submission(
        run_id=run_id,
        session_key=str(kw.pop("session_key", SESSION)),
        prompt=str(kw.pop("prompt", f"p-{run_id}")),
        queue_mode=mode,
        **kw,  # type: ignore[arg-type]  # forwards optional Submission fields
    )


def started(effects: list[Effect]) -> list[str]:
    return [e.submission.run_id for e in effects if isinstance(e, StartRun)]


def busy_queue(**kw: int) -> ConversationQueue:
    q = ConversationQueue("session:" + SESSION, **kw)
    receipt, effects = q.submit(sub("r0"), 0)
    assert receipt.status == "started"
    assert started(effects) == ["r0"]
    return q


def test_collect_queues_each_message_as_its_own_run_in_order() -> None:
    q = busy_queue()
    for i in range(1, 4):
        receipt, effects = q.submit(sub(f"r{i}"), i)
        assert (receipt.status, receipt.actual_mode, receipt.position) == (
            "queued",
            "collect",
            i - 1,
        )
        assert effects == []
    assert q.queued_run_ids() == ("r1", "r2", "r3")
    assert started(q.run_ended("r0", 10)) == ["r1"]
    assert started(q.run_ended("r1", 11)) == ["r2"]


def test_user_collect_goes_before_queued_goal_continuations() -> None:
    q = busy_queue()
    q.submit(sub("g1", "followup", auto_kind="goal", origin="goal"), 1)
    q.submit(sub("u1"), 2)
    assert q.queued_run_ids() == ("u1", "g1")


def test_followups_within_the_window_merge_newer_id_wins() -> None:
    q = busy_queue()
    r1, _ = q.submit(sub("f1", "followup", prompt="one"), 100)
    assert r1.status == "queued"
    r2, effects = q.submit(sub("f2", "followup", prompt="two"), 600)  # exactly 500 ms later
    assert r2.status == "queued"
    assert r2.reason == "merged with earlier followup f1"
    assert effects == [
        Settled(
            run_id="f1",
            session_key=SESSION,
            outcome="merged",
            into_run_id="f2",
            reason="followup within the merge window",
        )
    ]
    assert q.queued_run_ids() == ("f2",)
    (start,) = [e for e in q.run_ended("r0", 700) if isinstance(e, StartRun)]
    assert start.submission.prompt == "one\ntwo"
    assert start.submission.merged_run_ids == ("f1",)


def test_followups_outside_the_window_or_after_a_collect_do_not_merge() -> None:
    q = busy_queue()
    q.submit(sub("f1", "followup"), 100)
    q.submit(sub("f2", "followup"), 601)  # 501 ms later
    q.submit(sub("c1"), 602)
    q.submit(sub("f3", "followup"), 603)  # last queued item is a collect
    assert q.queued_run_ids() == ("f1", "f2", "c1", "f3")


def test_followup_with_nothing_queued_runs_at_once() -> None:
    q = ConversationQueue("k")
    receipt, effects = q.submit(sub("f1", "followup"), 0)
    assert receipt.status == "started"
    assert started(effects) == ["f1"]


def test_async_task_followups_never_merge_and_steer_into_an_active_run() -> None:
    q = busy_queue()
    receipt, effects = q.submit(sub("t1", "followup", auto_kind="task"), 1)
    assert (receipt.actual_mode, receipt.status) == ("steer", "dispatched_to_active")
    assert effects == [
        SendSteer(
            submission=sub("t1", "followup", auto_kind="task"), kind="steer", active_run_id="r0"
        )
    ]
    q.submit(sub("f1", "followup"), 2)
    effects = q.steer_result("t1", accepted=False, now_ms=3)
    assert [type(e) for e in effects] == [Requeued]
    assert q.queued_run_ids() == ("f1", "t1")


def test_merge_is_bounded_by_parts() -> None:
    q = busy_queue(max_pending=8)
    q.max_merged_parts = 3
    for i in range(5):
        q.submit(sub(f"f{i}", "followup"), i)
    assert q.queued_run_ids() == ("f2", "f4")


def test_steer_accepted_settles_into_the_active_run() -> None:
    q = busy_queue()
    receipt, effects = q.submit(sub("s1", "steer"), 1)
    assert (receipt.status, receipt.active_run_id) == ("dispatched_to_active", "r0")
    assert effects == [SendSteer(submission=sub("s1", "steer"), kind="steer", active_run_id="r0")]
    effects = q.steer_result("s1", accepted=True, now_ms=2)
    assert effects == [
        Settled(
            run_id="s1",
            session_key=SESSION,
            outcome="steered",
            into_run_id="r0",
            reason="steer taken by the active run",
        )
    ]
    assert q.queued_run_ids() == ()


def test_steer_rejected_falls_back_to_followup_and_merges() -> None:
    q = busy_queue()
    q.submit(sub("f1", "followup", prompt="a"), 0)
    q.submit(sub("s1", "steer", prompt="b"), 100)
    effects = q.steer_result("s1", accepted=False, now_ms=200)
    merged = [e for e in effects if isinstance(e, Settled)]
    assert merged[0].run_id == "f1"
    assert merged[0].into_run_id == "s1"
    requeued = [e for e in effects if isinstance(e, Requeued)]
    assert requeued == [
        Requeued(
            run_id="s1",
            session_key=SESSION,
            mode="followup",
            position=0,
            reason="steer not accepted",
        )
    ]


def test_steer_without_active_run_is_a_followup() -> None:
    q = ConversationQueue("k")
    receipt, _ = q.submit(sub("s1", "steer"), 0)
    assert (receipt.actual_mode, receipt.status) == ("followup", "started")


def test_steer_backlog_falls_back_to_collect() -> None:
    q = busy_queue()
    q.submit(sub("f1", "followup"), 0)
    q.submit(sub("b1", "steer_backlog"), 1)
    q.steer_result("b1", accepted=False, now_ms=2)
    assert q.queued_run_ids() == ("f1", "b1")  # not merged: collect
    q2 = ConversationQueue("k")
    receipt, _ = q2.submit(sub("b2", "steer_backlog"), 0)
    assert (receipt.actual_mode, receipt.status) == ("collect", "started")


def test_redirect_asks_for_a_redirect_and_falls_back_to_followup() -> None:
    q = busy_queue()
    _, effects = q.submit(sub("d1", "redirect"), 0)
    assert effects == [
        SendSteer(submission=sub("d1", "redirect"), kind="redirect", active_run_id="r0")
    ]
    effects = q.steer_result("d1", accepted=False, now_ms=1)
    assert effects == [
        Requeued(
            run_id="d1",
            session_key=SESSION,
            mode="followup",
            position=0,
            reason="redirect not accepted",
        )
    ]


def test_pending_steers_fall_back_when_the_active_run_ends() -> None:
    q = busy_queue()
    q.submit(sub("c1"), 0)
    q.submit(sub("s1", "steer"), 1)
    effects = q.run_ended("r0", 2)
    assert started(effects) == ["c1"]
    assert q.queued_run_ids() == ("s1",)
    assert q.steer_result("s1", accepted=True, now_ms=3) == []  # late answer is ignored


def test_interrupt_goes_first_and_cancels_the_active_run() -> None:
    q = busy_queue()
    q.submit(sub("c1"), 0)
    receipt, effects = q.submit(sub("i1", "interrupt"), 1)
    assert (receipt.status, receipt.position) == ("queued", 0)
    assert effects == [CancelActive(run_id="r0", reason="interrupted")]
    receipt, _ = q.submit(sub("i2", "interrupt"), 2)
    assert receipt.position == 1  # first come, first served among interrupts
    assert q.queued_run_ids() == ("i1", "i2", "c1")
    assert started(q.run_ended("r0", 3)) == ["i1"]


def test_interrupt_on_an_idle_conversation_just_runs() -> None:
    q = ConversationQueue("k")
    receipt, effects = q.submit(sub("i1", "interrupt"), 0)
    assert receipt.status == "started"
    assert effects == [StartRun(submission=sub("i1", "interrupt"))]


def test_past_the_bound_a_submission_is_rejected_with_a_receipt() -> None:
    q = busy_queue(max_pending=2)
    q.submit(sub("c1"), 0)
    q.submit(sub("s1", "steer"), 1)  # a pending steer holds a slot
    receipt, effects = q.submit(sub("c2"), 2)
    assert receipt.status == "rejected"
    assert receipt.reason is not None
    assert receipt.reason.startswith("queue_full")
    assert effects == []
    receipt, _ = q.submit(sub("s2", "steer"), 3)
    assert receipt.status == "rejected"
    # The pending steer's fallback always has room.
    q.steer_result("s1", accepted=False, now_ms=4)
    assert q.queued_run_ids() == ("c1", "s1")
    stats = q.statistics()
    assert (stats.rejected, stats.queued, stats.pending_steers, stats.submitted) == (2, 2, 0, 5)


def test_a_merging_followup_is_accepted_even_when_full() -> None:
    q = busy_queue(max_pending=1)
    q.submit(sub("f1", "followup"), 0)
    receipt, _ = q.submit(sub("f2", "followup"), 10)
    assert receipt.status == "queued"
    assert q.queued_run_ids() == ("f2",)


def test_abort_session_cancels_queued_pending_and_active() -> None:
    q = busy_queue()
    q.submit(sub("c1"), 0)
    q.submit(sub("x1", session_key="agent:a:other:b:dm:1"), 0)
    q.submit(sub("s1", "steer"), 1)
    effects = q.abort_session(SESSION, reason="user_requested")
    assert {(type(e).__name__, getattr(e, "run_id", None)) for e in effects} == {
        ("Settled", "c1"),
        ("Settled", "s1"),
        ("CancelActive", "r0"),
    }
    assert q.queued_run_ids() == ("x1",)
    assert q.abort_run("x1") == [
        Settled(
            run_id="x1", session_key="agent:a:other:b:dm:1", outcome="cancelled", reason="aborted"
        )
    ]
