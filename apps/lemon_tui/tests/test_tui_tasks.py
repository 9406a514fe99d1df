"""Subagent tasks in the TUI, against a real daemon (the offline model delegates with the
``task`` tool): the `task` card shows its child's live status from the ``task.*`` wire events
(running → completed with its duration, turns, tokens and answer), unfolds to the child's
session; ``/tasks`` lists, cancels and opens them; bad input is one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lemon_control_plane import ControlPlane
from lemon_control_plane.client import WebSocketSessionPort
from lemon_core.execution import ALL_TOOLS
from lemon_tui import LemonTUI, websocket_connector
from lemon_tui._editor import Editor
from lemon_tui._tasks import TaskState, from_event, from_row
from lemon_tui._widgets import NoteLine, ToolCardView

from .conftest import NO_APPROVALS, app_for, until
from .test_tui_reconnect import boot


def notes(app: LemonTUI) -> str:
    return "\n".join(str(n.render()) for n in app.query(NoteLine))


async def run(pilot: object, app: LemonTUI, line: str) -> None:
    from textual.pilot import Pilot

    assert isinstance(pilot, Pilot)
    app.query_one("#input", Editor).value = line
    await pilot.press("enter")


def task_call(**arguments: object) -> str:
    return f"/tool task {json.dumps(arguments)}"


async def test_a_task_card_shows_its_child_live_and_unfolds_to_its_session(
    daemon: ControlPlane,
) -> None:
    app = app_for(daemon, NO_APPROVALS)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await run(pilot, app, task_call(prompt="/echo hi from the child", description="greet"))
        await until(pilot, lambda: bool(app.query(ToolCardView)), "a card")
        card = app.query_one(ToolCardView)
        await until(pilot, lambda: card.entry.task is not None, "the card knows its task")
        task = card.entry.task
        assert task is not None
        await until(pilot, lambda: task.status == "completed", "the child completed")
        await until(pilot, lambda: not app.waiting_for, "the parent's run ended")
        await until(pilot, lambda: task.turns is not None, "its usage, from runs.tree")
        shown = str(card.render())
        assert f"{task.task_id} · general · completed in " in shown
        assert " turn" in shown
        assert "hi from the child" in shown
        assert task.session_key == f"{app.session}:sub:{task.task_id}"
        assert len(app.query(ToolCardView)) == 1  # the task's status is on the tool's card
        await pilot.click(ToolCardView)
        unfolded = str(card.render())
        assert card.expanded
        assert "greet" in unfolded
        assert f"session {task.session_key}" in unfolded
        assert f"/tasks open {task.task_id}" in unfolded
        # /tasks lists it (ended: heard of here), then opens the child's transcript.
        app.editor.focus()  # the click took the focus
        await run(pilot, app, "/tasks")
        await until(pilot, lambda: f"{task.task_id}  completed  general  greet" in notes(app), "ls")
        await run(pilot, app, f"/tasks open {task.task_id}")
        await until(pilot, lambda: app.session == task.session_key, "switched to the child")
        await until(pilot, lambda: "hi from the child" in _answers(app), "the child's answer")


def _answers(app: LemonTUI) -> str:
    from lemon_tui._widgets import AnswerBlock

    return "\n".join(a.text for a in app.query(AnswerBlock))


async def test_tasks_cancel_stops_a_running_child(daemon: ControlPlane) -> None:
    app = app_for(daemon, NO_APPROVALS)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        child = '/tool bash {"command": "sleep 60"}'
        await run(pilot, app, task_call(prompt=child, description="nap"))
        await until(pilot, lambda: bool(app.tasks), "a task heard of")
        (task,) = app.tasks.values()
        await until(pilot, lambda: task.status == "running", "the child runs")
        card = app.query_one(ToolCardView)
        await until(pilot, lambda: card.entry.task is task, "its card")
        assert card.state == "running"  # the parent's call waits for the child
        assert f"{task.task_id} · general · running" in str(card.render())
        last = "last: $ sleep 60"  # the child's bash call, as its own session shows it
        await until(pilot, lambda: last in str(card.render()), "the child's last action")
        await run(pilot, app, "/tasks")
        await until(pilot, lambda: "(1 not ended)" in notes(app), "listed by tasks.list")
        assert f"{task.task_id}  running  general  nap" in notes(app)
        await run(pilot, app, f"/tasks cancel {task.task_id}")
        await until(pilot, lambda: f"task {task.task_id}: cancelled" in notes(app), "cancelled")
        await until(pilot, lambda: task.status == "cancelled", "its state")
        await until(pilot, lambda: not app.waiting_for, "the parent's run ended")
        assert f"{task.task_id} · general · cancelled" in str(card.render())


async def test_bad_task_commands_say_what_to_type(daemon: ControlPlane) -> None:
    app = app_for(daemon, NO_APPROVALS)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await run(pilot, app, "/tasks")
        await until(pilot, lambda: "no tasks in this session" in notes(app), "none")
        for line in ("/tasks cancel", "/tasks open", "/tasks frobnicate x", "/tasks x"):
            before = notes(app).count("usage: /tasks")
            await run(pilot, app, line)
            await until(pilot, lambda b=before: notes(app).count("usage: /tasks") > b, line)
        await run(pilot, app, "/tasks cancel task_nonesuch")
        await until(pilot, lambda: "no task task_nonesuch" in notes(app), "unknown id")
        await run(pilot, app, "/tasks open task_nonesuch")
        await until(pilot, lambda: "no task task_nonesuch in this session" in notes(app), "?")
        assert app.session == "agent:default:main"
        assert "Traceback" not in notes(app)


def test_events_and_rows_update_one_task_and_an_ended_one_stays_ended() -> None:
    known: dict[str, TaskState] = {}
    ids = {"taskId": "t1", "parentRunId": "r", "sessionKey": "s:sub:t1", "agentId": "general"}
    task = from_event("task.started", {**ids, "description": "d"}, known)
    assert task is not None
    known["t1"] = task
    assert task.status == "running"
    assert from_event("task.error", {**ids, "error": "boom", "durationMs": 1500}, known) is task
    assert task.line() == "t1 · general · failed in 1.5 s · boom"
    assert from_event("run.graph.changed", {**ids, "status": "running"}, known) is task
    assert task.status == "failed"  # a late transition does not revive it
    assert from_event("tick", ids, known) is None
    assert from_event("task.started", {"taskId": 3}, known) is None
    row = {"task_id": "t1", "status": "failed", "usage": {"turns": 2, "input_tokens": 1200}}
    assert from_row(row, known) is task
    assert "2 turns · 1,200 tokens" in task.line()
    assert from_row({"status": "running"}, known) is None


def test_progress_events_show_turns_tokens_and_dollars_while_the_task_runs() -> None:
    known: dict[str, TaskState] = {}
    ids = {"taskId": "t2", "parentRunId": "r", "sessionKey": "s:sub:t2", "agentId": "explore"}
    task = from_event("task.started", ids, known)
    assert task is not None
    known["t2"] = task
    progress = {**ids, "status": "running", "turns": 3, "tokens": 4200, "costUsd": 0.0123,
                "lastAction": "grep TODO (started)"}  # fmt: skip
    assert from_event("task.progress", progress, known) is task
    assert (
        task.line() == "t2 · explore · running · 3 turns · 4,200 tokens · $0.0123 · "
        "last: grep TODO (started)"
    )
    stopped = {**ids, "error": "budget_exceeded: task t2 spent $0.02 of its $0.02 budget",
               "durationMs": 2000, "turns": 4, "tokens": 5000, "costUsd": 0.02}  # fmt: skip
    from_event("task.error", stopped, known)
    assert task.line().startswith("t2 · explore · failed in 2.0 s · 4 turns · 5,000 tokens")
    assert "budget_exceeded" in task.line()


async def test_an_async_task_card_learns_its_end_after_the_call_returned(
    daemon: ControlPlane,
) -> None:
    app = app_for(daemon, NO_APPROVALS)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        call = task_call(prompt="/echo later", description="bg", detached=True, **{"async": True})
        await run(pilot, app, call)
        await until(pilot, lambda: bool(app.query(ToolCardView)), "a card")
        card = app.query_one(ToolCardView)
        await until(pilot, lambda: card.state == "ok", "the call returned the task's id")
        await until(pilot, lambda: card.entry.task is not None, "bound to its task")
        task = card.entry.task
        assert task is not None
        assert task.task_id in card.message
        await until(pilot, lambda: task.status == "completed", "the child ended later")
        await until(pilot, lambda: "later" in str(card.render()), "its answer on the card")


async def test_the_port_client_hands_other_wire_events_to_bounded_handlers(
    other: WebSocketSessionPort,
) -> None:
    removers = [other.on_event(lambda name, payload: None) for _ in range(16)]
    with pytest.raises(ValueError, match="at most 16"):
        other.on_event(lambda name, payload: None)
    removers[0]()
    removers[0]()  # twice changes nothing
    other.on_event(lambda name, payload: None)  # room again


async def test_a_task_running_when_the_daemon_restarts_is_never_left_running(
    tmp_path: Path,
) -> None:
    first = boot(tmp_path, 0)
    await first.start()
    try:
        plane = first.handle("lemon_control_plane")
        assert isinstance(plane, ControlPlane)
        url = plane.ws_url
        port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        app = LemonTUI(
            websocket_connector(url, token=plane.local_token),
            where=url,
            tool_policy=NO_APPROVALS,
            preapproved=frozenset({ALL_TOOLS}),
        )
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: app.status.connection == "online", "connected")
            await run(pilot, app, task_call(prompt='/tool bash {"command": "sleep 60"}'))
            await until(pilot, lambda: any(not t.ended for t in app.tasks.values()), "running")
            (task,) = app.tasks.values()
            await first.stop()
            await until(pilot, lambda: app.status.connection != "online", "the drop is seen")
            async with boot(tmp_path, port):
                await until(pilot, lambda: app.status.connection == "online", "reconnected")
                await until(pilot, lambda: task.ended, "the run graph's word on it")
                card = app.query_one(ToolCardView)
                assert card.entry.task is task
                assert "running" not in str(card.render()).split("\n")[1]
    finally:
        await first.stop()


def _question_call(**asked: object) -> str:
    # Detached: the child outlives the parent's run and asks the person afterwards.
    return task_call(
        prompt=f"/tool ask_parent {json.dumps(asked)}", description="ask",
        detached=True, **{"async": True},
    )  # fmt: skip


async def test_a_childs_question_is_its_own_prompt_answered_in_free_text(
    daemon: ControlPlane,
) -> None:
    from lemon_tui._question import QuestionPanel

    app = app_for(daemon, NO_APPROVALS)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await run(pilot, app, _question_call(question="Which [b]branch[/b]?", timeout_s=60))
        await until(pilot, lambda: isinstance(app.panel, QuestionPanel), "the question waits")
        assert app.status.run == "question waiting (Tab)"
        # Typing goes on in the editor: only Tab opens the question.
        await pilot.press("x")
        assert app.editor.value == "x"
        await pilot.press("tab")
        panel = app.screen
        assert isinstance(panel, QuestionPanel)
        shown = "\n".join(str(s.render()) for s in panel.query("Static"))
        assert "Which [b]branch[/b]?" in shown  # the child's words, never markup
        await pilot.press(*"use main")
        await pilot.press("enter")
        await until(pilot, lambda: app.panel is None, "answered")
        await until(pilot, lambda: any(t.status == "completed" for t in app.tasks.values()), "done")
        (task,) = app.tasks.values()
        assert "use main" in task.preview
        assert "answered the child's question: use main" in notes(app)
        assert app.editor.value == "x"  # what was typed stayed in the editor


async def test_a_question_with_options_is_answered_by_its_number_and_tab_goes_back(
    daemon: ControlPlane,
) -> None:
    from lemon_tui._question import QuestionPanel

    app = app_for(daemon, NO_APPROVALS)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.status.connection == "online", "connected")
        await run(pilot, app, _question_call(question="Proceed?", options=["go", "stop"]))
        await until(pilot, lambda: isinstance(app.panel, QuestionPanel), "the question waits")
        await pilot.press("tab")
        assert isinstance(app.screen, QuestionPanel)
        await pilot.press("tab")  # back to the editor: still waiting
        await until(pilot, lambda: not isinstance(app.screen, QuestionPanel), "back")
        assert isinstance(app.panel, QuestionPanel)
        await pilot.press("tab")
        await pilot.press("2")
        await until(pilot, lambda: any(t.status == "completed" for t in app.tasks.values()), "done")
        (task,) = app.tasks.values()
        assert "stop" in task.preview
