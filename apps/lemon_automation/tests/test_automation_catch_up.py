"""Catch-up after 3 missed due times under each policy (latest: 1 run, 2 skipped; all: 3 runs;
skip: 0 runs, 3 skipped), the grace deadline, and the bounded listing after a week offline on
``* * * * *``."""

from __future__ import annotations

from lemon_automation.catch_up import Skip, plan_catch_up
from lemon_automation.schedule import Cron, Every

PERIOD = 60_000
EVERY = Every(PERIOD, 0)


def test_latest_fires_the_newest_and_skips_the_rest_as_coalesced() -> None:
    plan = plan_catch_up(
        EVERY, watermark_ms=0, now_ms=3 * PERIOD + 10, policy="latest", grace_ms=PERIOD
    )
    assert plan.fire == [3 * PERIOD]
    assert plan.skipped == [Skip(PERIOD, "coalesced"), Skip(2 * PERIOD, "coalesced")]


def test_latest_past_its_grace_fires_nothing_and_says_so() -> None:
    plan = plan_catch_up(EVERY, watermark_ms=0, now_ms=3 * PERIOD + 10, grace_ms=5)
    assert plan.fire == []
    assert plan.skipped[-1] == Skip(3 * PERIOD, "missed_deadline")
    assert len(plan.skipped) == 3


def test_all_fires_each_oldest_first() -> None:
    plan = plan_catch_up(EVERY, watermark_ms=0, now_ms=3 * PERIOD, policy="all", grace_ms=PERIOD)
    assert plan.fire == [PERIOD, 2 * PERIOD, 3 * PERIOD]
    assert plan.skipped == []


def test_skip_fires_none_and_records_each() -> None:
    plan = plan_catch_up(EVERY, watermark_ms=0, now_ms=3 * PERIOD, policy="skip", grace_ms=PERIOD)
    assert plan.fire == []
    assert [s.reason for s in plan.skipped] == ["missed_deadline"] * 3


def test_nothing_missed_is_an_empty_plan() -> None:
    plan = plan_catch_up(EVERY, watermark_ms=PERIOD, now_ms=PERIOD + 5, grace_ms=PERIOD)
    assert (plan.fire, plan.skipped, plan.uncounted) == ([], [], 0)


def test_a_week_offline_lists_at_most_max_catch_up_plus_one_and_counts_the_rest() -> None:
    week = 7 * 86_400_000
    cron = Cron.parse("* * * * *", "UTC")
    for policy in ("latest", "all", "skip"):
        plan = plan_catch_up(
            cron,
            watermark_ms=0,
            now_ms=week,
            policy=policy,
            grace_ms=PERIOD,
            max_catch_up=10,
        )
        assert len(plan.fire) + len(plan.skipped) == 11, policy
        assert plan.uncounted == week // PERIOD - 11
