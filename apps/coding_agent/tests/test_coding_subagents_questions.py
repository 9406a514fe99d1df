"""Subagents, second part: a child asks its parent (``ask_parent``), the budget counted per
model call, a child's approval relayed to the parent's session, ``output_schema``. Booted
runtime on a real SQLite store; the scripted provider server (real HTTP) is the model."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from coding_agent.subagents import ParentRun, TaskRequest
from lemon_agent import ToolError
from lemon_core.bus import Delivery, run_topic
from lemon_core.errors import UsageError
from lemon_core.events import Event
from lemon_core.execution import ToolPolicy
from lemon_core.sessions import ApprovalAsked, ApprovalEnded, QueueNotice, RunEnded, ToolCard
from lemon_core.wire_methods import WIRE_METHODS, WireCall
from lemon_platform_test.providers import (
    Gate,
    ScriptedProviderServer,
    ScriptedToolCall,
    ScriptedTurn,
)

from .test_coding_subagents_e2e import (
    SESSION,
    boot,
    parent_of,
    port_of,
    request,
    run_to_end,
    subagents_of,
    task_call,
    tool_results,
    work,
)

__all__ = ["boot", "work"]  # fixtures, imported to be found


def call(id: str, name: str, **arguments: Any) -> ScriptedToolCall:
    return ScriptedToolCall(id=id, name=name, arguments=arguments)


def drain(delivery: Delivery) -> list[Event]:
    seen: list[Event] = []
    with contextlib.suppress(asyncio.QueueEmpty):
        while True:
            item = delivery.get_nowait()
            if isinstance(item, Event):
                seen.append(item)
    return seen


async def test_a_parent_blocked_in_a_sync_task_gets_the_question_and_its_answer_reaches_the_child(
    boot: Callable[..., Any], scripted_provider: ScriptedProviderServer, work: Path
) -> None:
    scripted_provider.script(
        ScriptedTurn(tool_calls=(task_call("c1", description="pick", prompt="pick one"),)),
        ScriptedTurn(tool_calls=(call("q1", "ask_parent", question="red or blue?",
                                      options=["red", "blue"]),)),  # the child asks
        # The parent's sync call returned with the question: it answers, then waits.
        ScriptedTurn(tool_calls=(call("a1", "agent", action="answer", answer="blue"),
                                 call("w1", "agent", action="wait"))),
        ScriptedTurn(text="I pick BLUE-7"),  # the child, with the answer
        ScriptedTurn(text="the child picked blue"),
    )  # fmt: skip
    async with boot() as runtime:
        port = port_of(runtime)
        events = Delivery(max_entries=10_000, bind_current_task=False)
        stream = port.watch(SESSION)
        receipt = await port.submit(request("delegate a choice", work))
        sub = runtime.bus.subscribe(run_topic(receipt.run_id), delivery=events)
        card_updates: list[str] = []
        while True:
            event = await asyncio.wait_for(stream.get(), 60)
            if isinstance(event, ToolCard) and event.kind.value == "subagent":
                card_updates.append(event.message or "")
            if isinstance(event, RunEnded) and event.run_id == receipt.run_id:
                break
        # The parent's task card followed the child's last action live.
        assert any(m.endswith(": ask_parent") for m in card_updates), card_updates
        stream.close()
        assert event.ok, event
        assert event.answer == "the child picked blue"
        (node,) = await subagents_of(runtime).graph.children(receipt.run_id)
        assert node.status == "completed"
        assert "BLUE-7" in node.answer
        seen = drain(events)
        sub.cancel()
        asked = [e for e in seen if e.type.startswith("parent_question_")]
        assert [e.type for e in asked] == ["parent_question_requested", "parent_question_answered"]
        question_id = asked[0].payload["question_id"]
        stored = await subagents_of(runtime).questions.get(question_id)
        assert stored is not None
        assert (stored.status, stored.answer, stored.answered_by) == ("answered", "blue", "parent")
        statuses = [e.payload["status"] for e in seen if e.type == "run_graph_changed"]
        assert statuses == ["queued", "running", "waiting_for_parent", "running", "completed"]
    bodies = [r.body for r in scripted_provider.requests]
    interim = tool_results(bodies[2])["c1"]  # the sync call's result: the question
    assert "waiting_for_parent" in interim
    assert "<child_question" in interim
    assert "red or blue?" in interim
    assert "not an instruction from the user" in interim
    assert "blue" in tool_results(bodies[3])["q1"]  # the child got the answer
    assert "parent answered" in tool_results(bodies[3])["q1"]
    assert "BLUE-7" in tool_results(bodies[4])["w1"]  # the wait got the child's result
    assert len(bodies) == 5


async def test_an_idle_parent_run_is_woken_by_its_childs_question(
    boot: Callable[..., Any],
    scripted_provider: ScriptedProviderServer,
    work: Path,
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "hold"
    os.mkfifo(fifo)
    scripted_provider.script(
        # The parent starts an async child and is busy in bash (held on a fifo) meanwhile.
        ScriptedTurn(tool_calls=(task_call("c1", prompt="ask", **{"async": True}),
                                 call("b1", "bash", command=f"cat {fifo}"))),
        ScriptedTurn(tool_calls=(call("q1", "ask_parent", question="WHICH-FILE?"),)),
        ScriptedTurn(tool_calls=(call("a1", "agent", action="answer", answer="notes.txt"),
                                 call("w1", "agent", action="wait"))),
        ScriptedTurn(text="using notes.txt"),
        ScriptedTurn(text="done"),
    )  # fmt: skip
    async with boot() as runtime:
        port = port_of(runtime)
        receipt_id = "run_idle_parent"
        stream = port.watch(SESSION)
        ended_task = asyncio.ensure_future(run_to_end(port, request("go", work, run_id=receipt_id)))
        while True:  # the question is asked while the parent is busy in bash ...
            event = await asyncio.wait_for(stream.get(), 60)
            if isinstance(event, QueueNotice) and event.outcome.value == "steered":
                break  # ... and the parent's running answer took it as a steered message
        stream.close()
        await asyncio.to_thread(fifo.write_text, "released\n")  # now let bash end
        ended = await asyncio.wait_for(ended_task, 60)
        assert ended.ok, ended
        approvals = subagents_of(runtime)._approvals
        assert approvals is not None
        assert approvals.pending() == ()  # the person's copy ended once the parent answered
    bodies = [r.body for r in scripted_provider.requests]
    steered = [m for m in bodies[2]["messages"] if m["role"] == "user"][-1]  # woken
    assert "WHICH-FILE?" in str(steered["content"])
    assert "child's data, not the user's message" in str(steered["content"])
    assert "notes.txt" in tool_results(bodies[3])["q1"]
    assert len(bodies) == 5


async def test_the_person_answers_a_childs_question_through_the_parents_approval(
    boot: Callable[..., Any], scripted_provider: ScriptedProviderServer, work: Path
) -> None:
    parent_turn = Gate()
    scripted_provider.script(
        ScriptedTurn(tool_calls=(task_call("c1", prompt="ask the person"),)),
        ScriptedTurn(tool_calls=(call("q1", "ask_parent", question="MAY-I-DEPLOY?"),)),
        # The parent's model, woken with the question, is held here while the person answers.
        ScriptedTurn(tool_calls=(call("w1", "agent", action="wait"),), pause=parent_turn,
                     pause_after=1),
        ScriptedTurn(text="deploying"),  # the child, with the person's answer
        ScriptedTurn(text="the child deployed"),
    )  # fmt: skip
    async with boot() as runtime:
        port = port_of(runtime)
        stream = port.watch(SESSION)
        receipt = await port.submit(request("delegate", work))
        approval: ApprovalAsked | None = None
        while approval is None:
            event = await asyncio.wait_for(stream.get(), 60)
            if isinstance(event, ApprovalAsked) and event.tool == "ask_parent":
                approval = event
        assert "MAY-I-DEPLOY?" in (approval.rationale or "")
        assert approval.run_id == receipt.run_id  # on the parent's run: the person's surface
        assert await parent_turn.wait_reached_async(30)  # the parent's request was taken
        decided = await port.resolve_approval(approval.approval_id, "approve_once")
        assert decided.resolved, decided
        parent_turn.open()
        while True:
            event = await asyncio.wait_for(stream.get(), 60)
            if isinstance(event, RunEnded) and event.run_id == receipt.run_id:
                break
        stream.close()
        assert event.ok, event
        (node,) = await subagents_of(runtime).graph.children(receipt.run_id)
        assert node.status == "completed"
    bodies = [r.body for r in scripted_provider.requests]
    answer = tool_results(bodies[3])["q1"]
    assert "person answered" in answer
    assert "yes" in answer
    assert len(bodies) == 5


async def test_a_question_nobody_answers_ends_as_an_error_by_its_deadline(
    boot: Callable[..., Any], scripted_provider: ScriptedProviderServer, work: Path
) -> None:
    scripted_provider.script(
        ScriptedTurn(tool_calls=(call("q1", "ask_parent", question="anyone?", timeout_s=0.3),)),
        ScriptedTurn(text="decided alone"),
    )
    async with boot() as runtime:
        subagents = subagents_of(runtime)
        node = await subagents.start(parent_of(work), TaskRequest(prompt="x", mode="async"))
        (done,) = await subagents.wait(parent_of(work), [node.task_id], timeout_s=60)
        if done.status == "waiting_for_parent":  # delivered to this wait: wait for the end
            (done,) = await subagents.wait(parent_of(work), [node.task_id], timeout_s=60)
        assert done.status == "completed"
        assert done.answer == "decided alone"
        approvals = subagents._approvals
        assert approvals is not None
        assert approvals.pending() == ()  # the person's copy ended with the question
    result = tool_results(scripted_provider.requests[1].body)["q1"]
    assert "no answer from the parent" in result
    assert "timeout" in result


async def test_one_answer_wins_and_another_sessions_question_is_not_found(
    boot: Callable[..., Any], scripted_provider: ScriptedProviderServer, work: Path
) -> None:
    scripted_provider.script(
        ScriptedTurn(tool_calls=(call("q1", "ask_parent", question="A or B?",
                                      options=["A", "B"]),)),
        ScriptedTurn(text="took B"),
    )  # fmt: skip
    async with boot() as runtime:
        subagents = subagents_of(runtime)
        parent = parent_of(work)
        node = await subagents.start(parent, TaskRequest(prompt="x", mode="async"))
        (waiting,) = await subagents.wait(parent, [node.task_id], timeout_s=60)
        assert waiting.status == "waiting_for_parent"
        question = subagents.pending_question(node.task_id)
        assert question is not None
        other = ParentRun(run_id="r2", session_key="agent:default:other", root_run_id="r2",
                          depth=0, policy=ToolPolicy(), cwd=str(work))  # fmt: skip
        with pytest.raises(ToolError, match="not found in this session"):
            await subagents.answer(other, question.question_id, "A")
        with pytest.raises(ToolError, match="takes one of"):
            await subagents.answer(parent, question.question_id, "C")
        results = await asyncio.gather(
            subagents.answer(parent, question.question_id, "B"),
            subagents.answer(parent, question.question_id, "A"),
            return_exceptions=True,
        )
        won = [r for r in results if not isinstance(r, BaseException)]
        lost = [r for r in results if isinstance(r, ToolError)]
        assert len(won) == 1
        assert len(lost) == 1
        assert "already ended (answered)" in str(lost[0])
        (done,) = await subagents.wait(parent, [node.task_id], timeout_s=60)
        assert done.status == "completed"
        stored = await subagents.questions.get(question.question_id)
        assert stored is not None
        assert stored.answer == "B"


async def test_a_looping_child_is_stopped_mid_run_when_the_tree_budget_is_spent(
    boot: Callable[..., Any], scripted_provider: ScriptedProviderServer, work: Path
) -> None:
    held = Gate()
    ls = call("l", "ls", path=".")
    scripted_provider.script(
        ScriptedTurn(text="slow sibling", pause=held, pause_after=1),  # the sibling, held
        # The looping child: each call is 12 + 7 = 19 tokens; the budget is 30, so it is
        # stopped after its second call, before a third (none is scripted: a third request
        # would fail the child with the server's error, not budget_exceeded).
        ScriptedTurn(tool_calls=(ls,)),
        ScriptedTurn(tool_calls=(ls,)),
    )
    async with boot("[subagents]\nmax_tokens_per_tree = 30\n") as runtime:
        subagents = subagents_of(runtime)
        parent = parent_of(work)
        sibling = await subagents.start(parent, TaskRequest(prompt="a", mode="async"))
        assert await held.wait_reached_async(30)
        looper = await subagents.run(parent, TaskRequest(prompt="loop"))
        assert looper.status == "failed"
        assert looper.reason is not None
        assert looper.reason.startswith("budget_exceeded")
        (stopped,) = await subagents.wait(parent, [sibling.task_id], timeout_s=30)
        held.open()
        assert stopped.status == "failed"
        assert stopped.reason is not None
        assert stopped.reason.startswith("budget_exceeded")
    assert len(scripted_provider.requests) == 3  # the sibling's one, the looper's two


async def test_an_async_childs_approval_is_shown_on_the_parents_session_and_decided_there(
    boot: Callable[..., Any], scripted_provider: ScriptedProviderServer, work: Path
) -> None:
    scripted_provider.script(
        ScriptedTurn(text="hello"),  # the parent session's earlier run
        ScriptedTurn(tool_calls=(call("b1", "bash", command="touch relayed"),)),
        ScriptedTurn(text="made it"),
    )
    async with boot() as runtime:
        subagents = subagents_of(runtime)
        port = port_of(runtime)
        every = port.watch_all()  # what a wire client's bridge follows: every session
        assert (await run_to_end(port, request("hi", work))).ok  # it learns the session
        parent = ParentRun(
            run_id="run_parent",
            session_key=SESSION,
            root_run_id="run_parent",
            depth=0,
            policy=ToolPolicy(),
            cwd=str(work),
        )  # fmt: skip (no grants)
        stream = port.watch(SESSION)  # the parent's session: what its person sees
        node = await subagents.start(parent, TaskRequest(prompt="x", mode="async"))
        asked: ApprovalAsked | None = None
        while asked is None:
            event = await asyncio.wait_for(stream.get(), 30)
            if isinstance(event, ApprovalAsked):
                asked = event
        assert asked.tool == "bash"
        assert node.task_id in (asked.rationale or "")
        decided = await port.resolve_approval(asked.approval_id, "approve_once")
        assert decided.resolved, decided
        while True:
            event = await asyncio.wait_for(stream.get(), 30)
            if isinstance(event, ApprovalEnded) and event.approval_id == asked.approval_id:
                break
        stream.close()
        (done,) = await subagents.wait(parent, [node.task_id], timeout_s=30)
        assert done.status == "completed"
        # Following every session, the approval is asked and ends in both: the child's own
        # session and the parent's (the relayed copy has the same id; it used to be dropped
        # as already ended, and the parent's surfaces kept a card nobody could clear).
        seen: dict[str, list[str]] = {}
        while True:
            event = await asyncio.wait_for(every.get(), 30)
            if isinstance(event, ApprovalAsked | ApprovalEnded) and (
                event.approval_id == asked.approval_id
            ):
                seen.setdefault(event.session_key, []).append(type(event).__name__)
            if seen.get(SESSION) == ["ApprovalAsked", "ApprovalEnded"] and len(seen) == 2:
                break
        every.close()
        assert seen[node.session_key] == ["ApprovalAsked", "ApprovalEnded"]
    assert (work / "relayed").exists()


async def test_an_answer_that_misses_the_output_schema_gets_one_correction(
    boot: Callable[..., Any], scripted_provider: ScriptedProviderServer, work: Path
) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}  # fmt: skip
    scripted_provider.script(
        ScriptedTurn(text="forty-two"),
        ScriptedTurn(text='```json\n{"n": 42}\n```'),
        ScriptedTurn(text="still prose"),
        ScriptedTurn(text='{"n": "x", "extra": 1}'),
    )
    async with boot() as runtime:
        subagents = subagents_of(runtime)
        parent = parent_of(work)
        fixed = await subagents.run(parent, TaskRequest(prompt="count", output_schema=schema))
        assert fixed.status == "completed"
        assert '"n": 42' in fixed.answer
        failed = await subagents.run(parent, TaskRequest(prompt="count", output_schema=schema))
        assert failed.status == "failed"
        assert failed.reason is not None
        assert failed.reason.startswith("output_schema")
        assert "$.n: expected integer, got string" in failed.reason
        assert "'extra' is not allowed" in failed.reason
        with pytest.raises(ToolError, match="unsupported schema keywords"):
            await subagents.start(
                parent, TaskRequest(prompt="x", output_schema={"type": "string", "pattern": "a"})
            )
    bodies = [r.body for r in scripted_provider.requests]
    assert "JSON Schema" in bodies[0]["messages"][-1]["content"]
    correction = bodies[1]["messages"][-1]["content"]
    assert "does not match the required output schema" in correction
    assert len(bodies) == 4


async def test_the_session_snapshot_shows_the_active_runs_tasks(
    boot: Callable[..., Any], scripted_provider: ScriptedProviderServer, work: Path
) -> None:
    held = Gate()
    scripted_provider.script(
        ScriptedTurn(tool_calls=(task_call("c1", description="SNAP-JOB", prompt="work"),)),
        ScriptedTurn(text="child answer", pause=held, pause_after=1),  # the child, held
        ScriptedTurn(text="parent done"),
    )
    async with boot() as runtime:
        port = port_of(runtime)
        stream = port.watch(SESSION)
        receipt = await port.submit(request("delegate", work))
        assert await held.wait_reached_async(30)
        snapshot = await port.snapshot(SESSION)
        while snapshot.status == "retry":  # the session moved while it was composed
            snapshot = await port.snapshot(SESSION)
        assert snapshot.active is not None
        assert snapshot.active.run_id == receipt.run_id
        (task,) = snapshot.tasks
        assert (task.description, task.status, task.depth) == ("SNAP-JOB", "running", 1)
        assert task.session_key.startswith(f"{SESSION}:sub:")
        held.open()
        while True:
            event = await asyncio.wait_for(stream.get(), 60)
            if isinstance(event, RunEnded) and event.run_id == receipt.run_id:
                break
        stream.close()
        assert (await port.snapshot(SESSION)).tasks == ()  # idle: no active run, no tasks


async def test_a_person_answers_through_tasks_answer_and_runs_tree_shows_the_question(
    boot: Callable[..., Any], scripted_provider: ScriptedProviderServer, work: Path
) -> None:
    scripted_provider.script(
        ScriptedTurn(tool_calls=(call("q1", "ask_parent", question="PORT?"),)),
        ScriptedTurn(text="using 8080"),
    )
    async with boot() as runtime:
        subagents = subagents_of(runtime)
        methods = runtime.context.capabilities.require(WIRE_METHODS)
        tree, answer = methods.get("runs.tree"), methods.get("tasks.answer")
        assert tree is not None
        assert answer is not None
        assert (tree.scope, answer.scope) == ("read", "approvals")
        parent = parent_of(work)
        node = await subagents.start(parent, TaskRequest(prompt="x", mode="async"))
        (waiting,) = await subagents.wait(parent, [node.task_id], timeout_s=60)
        assert waiting.status == "waiting_for_parent"
        shown = await tree.handler(WireCall(method="runs.tree", params={"runId": parent.run_id}))
        (task,) = shown["tasks"]
        assert task["status"] == "waiting_for_parent"
        assert task["question"]["question"] == "PORT?"
        with pytest.raises(UsageError, match="runId"):
            await tree.handler(WireCall(method="runs.tree", params={}))
        listed = methods.get("tasks.list")
        assert listed is not None
        found = await listed.handler(WireCall(method="tasks.list", params={"sessionKey": SESSION}))
        assert [t["task_id"] for t in found["tasks"]] == [node.task_id]
        with pytest.raises(UsageError, match="not found"):
            await answer.handler(
                WireCall(method="tasks.answer", params={"questionId": "pq_x", "answer": "1"})
            )
        params = {"questionId": task["question"]["question_id"], "answer": "8080"}
        done = await answer.handler(WireCall(method="tasks.answer", params=params))
        assert done["question"]["answered_by"] == "person"
        (finished,) = await subagents.wait(parent, [node.task_id], timeout_s=60)
        assert finished.status == "completed"
    assert "person answered" in tool_results(scripted_provider.requests[1].body)["q1"]


async def test_an_operator_cancels_a_running_task_through_tasks_cancel(
    boot: Callable[..., Any], scripted_provider: ScriptedProviderServer, work: Path
) -> None:
    held = Gate()
    scripted_provider.script(ScriptedTurn(text="never done", pause=held, pause_after=1))
    async with boot() as runtime:
        subagents = subagents_of(runtime)
        cancel = runtime.context.capabilities.require(WIRE_METHODS).get("tasks.cancel")
        assert cancel is not None
        assert cancel.scope == "write"
        node = await subagents.start(parent_of(work), TaskRequest(prompt="x", mode="async"))
        assert await held.wait_reached_async(30)
        done = await cancel.handler(
            WireCall(method="tasks.cancel", params={"taskId": node.task_id})
        )
        held.open()
        assert done["task"]["status"] == "cancelled"
        assert done["task"]["reason"] == "cancelled by an operator"
        with pytest.raises(UsageError, match="no task task_none"):
            await cancel.handler(WireCall(method="tasks.cancel", params={"taskId": "task_none"}))


async def test_a_child_repeating_the_same_tool_call_is_stopped_as_a_loop(
    boot: Callable[..., Any], scripted_provider: ScriptedProviderServer, work: Path
) -> None:
    same = call("l", "ls", path=".")
    # Five identical calls, then nothing scripted: a sixth request would fail the child with
    # the server's error instead of the loop's reason.
    scripted_provider.script(*(ScriptedTurn(tool_calls=(same,)) for _ in range(5)))
    async with boot("[subagents]\nmax_repeated_calls = 5\n") as runtime:
        node = await subagents_of(runtime).run(parent_of(work), TaskRequest(prompt="spin"))
        assert node.status == "failed"
        assert node.reason is not None
        assert node.reason.startswith("loop: ls was called 5 times with the same arguments")
    assert len(scripted_provider.requests) == 5


async def test_a_running_parent_is_told_when_its_async_child_ends(
    boot: Callable[..., Any],
    scripted_provider: ScriptedProviderServer,
    work: Path,
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "hold"
    os.mkfifo(fifo)
    scripted_provider.script(
        ScriptedTurn(tool_calls=(task_call("c1", prompt="quick", **{"async": True}),
                                 call("b1", "bash", command=f"cat {fifo}"))),
        ScriptedTurn(text="CHILD-DONE"),  # the child, while the parent is busy in bash
        ScriptedTurn(tool_calls=(call("w1", "agent", action="wait"),)),  # told: it waits
        ScriptedTurn(text="parent done"),
    )  # fmt: skip
    async with boot() as runtime:
        port = port_of(runtime)
        stream = port.watch(SESSION)
        ended_task = asyncio.ensure_future(run_to_end(port, request("go", work)))
        while True:  # the child ended while nobody waited for it: the parent was steered
            event = await asyncio.wait_for(stream.get(), 60)
            if isinstance(event, QueueNotice) and event.outcome.value == "steered":
                break
        stream.close()
        await asyncio.to_thread(fifo.write_text, "released\n")
        ended = await asyncio.wait_for(ended_task, 60)
        assert ended.ok, ended
    bodies = [r.body for r in scripted_provider.requests]
    notice = [m for m in bodies[2]["messages"] if m["role"] == "user"][-1]
    assert "ended: completed" in str(notice["content"])
    assert "not the user's message" in str(notice["content"])
    assert "CHILD-DONE" in tool_results(bodies[3])["w1"]
    assert len(bodies) == 4


async def test_a_question_asked_after_the_parents_run_ended_reaches_the_parents_session(
    boot: Callable[..., Any], scripted_provider: ScriptedProviderServer, work: Path
) -> None:
    # A detached child whose parent run is not running (it ended): the person's copy of the
    # question goes on the parent's session, not on the ended run's stream nobody reads.
    scripted_provider.script(
        ScriptedTurn(tool_calls=(call("q1", "ask_parent", question="LATE-QUESTION?"),)),
        ScriptedTurn(text="went on with the answer"),
    )
    async with boot() as runtime:
        port = port_of(runtime)
        subagents = subagents_of(runtime)
        stream = port.watch(SESSION)
        parent = parent_of(work, run_id="run_ended_parent")
        node = await subagents.start(
            parent, TaskRequest(prompt="ask later", mode="async", detached=True)
        )
        asked: ApprovalAsked | None = None
        while asked is None:
            event = await asyncio.wait_for(stream.get(), 60)
            if isinstance(event, ApprovalAsked) and event.tool == "ask_parent":
                asked = event
        assert "LATE-QUESTION?" in (asked.rationale or "")
        assert asked.action["task_id"] == node.task_id
        snapshot = await port.snapshot(SESSION)
        assert [p.tool for p in snapshot.pending_approvals] == ["ask_parent"]
        question_id = asked.action["question_id"]
        await subagents.answer_as_person(question_id, "free words from the person")
        while True:  # the person's copy ends with the question
            event = await asyncio.wait_for(stream.get(), 60)
            if isinstance(event, ApprovalEnded) and event.approval_id == asked.approval_id:
                break
        stream.close()
        (done,) = await subagents.wait(parent, [node.task_id], timeout_s=60)
        assert done.status == "completed"
    result = tool_results(scripted_provider.requests[1].body)["q1"]
    assert "free words from the person" in result
