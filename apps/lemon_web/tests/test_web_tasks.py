"""Subagent tasks on the page (issue 29): a run's children as cards with their live status and
usage, and a child's question to the person as its own prompt, in Debian's Chromium against a
real daemon (the offline scripted model: the parent's ``/tool task {...}`` starts a child whose
prompt is again scripted; ``/tool ask_parent {...}`` makes the child ask).

What a child wrote (its description, answer, question) is untrusted: it shows as text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lemon_control_plane import ControlPlane
from lemon_control_plane.testing import ClientFactory

from .test_web_chat import WAIT_MS, open_chat, send, wait_idle

pytestmark = pytest.mark.asyncio(loop_scope="module")

HOSTILE = '<img src=x onerror="document.body.dataset.pwned=1"><b>bold</b>'

# Every status a task card took, in order (a MutationObserver on the cards' data-status).
RECORD_STATUSES = """() => {
  window.taskStatuses = [];
  new MutationObserver((records) => {
    for (const r of records) {
      const card = r.target.closest && r.target.closest('.task-card');
      if (card && r.attributeName === 'data-status') window.taskStatuses.push(card.dataset.status);
    }
  }).observe(document.getElementById('transcript'),
             {subtree: true, attributes: true, attributeFilter: ['data-status']});
}"""


def task_line(**arguments: Any) -> str:
    return "/tool task " + json.dumps(arguments)


def ask_line(**arguments: Any) -> str:
    return "/tool ask_parent " + json.dumps(arguments)


async def test_a_childs_card_shows_its_progress_then_its_answer_as_text(
    page: Any, daemon: ControlPlane, shot: Any
) -> None:
    await open_chat(page, daemon)
    await page.evaluate(RECORD_STATUSES)
    await send(page, task_line(description=f"list {HOSTILE}", prompt="/tool ls {}"))
    card = page.locator(".task-card")
    await card.and_(page.locator(".task-card[data-status=completed]")).wait_for(timeout=WAIT_MS)
    await wait_idle(page)
    # Under its parent run, after the task tool's own card.
    run = page.locator("article.msg.assistant", has=card)
    assert await run.locator(".tool .tool-name", has_text="task").count() == 1
    # Live: queued, then running (with a progress event per model and tool call), then done.
    statuses = await page.evaluate("window.taskStatuses")
    assert statuses[-1] == "completed"
    assert "running" in statuses
    assert statuses.index("running") < statuses.index("completed")
    assert await card.locator(".task-what").inner_text() == f"list {HOSTILE}"  # text, not HTML
    assert await card.locator(".task-agent").inner_text() == "general"
    state = await card.locator(".task-state").inner_text()
    assert state.startswith("completed in ")
    facts = await card.locator(".task-facts").inner_text()
    assert facts.startswith("2 turns · ")  # the ls call, then the report
    assert " tokens" in facts
    assert "Offline: tool `ls` returned" in await card.locator(".task-result").inner_text()
    assert await card.locator("img, b").count() == 0
    # Expanded: the child's transcript, read from its own session.
    await card.locator("summary").click()
    entries = card.locator(".task-entry")
    await entries.first.wait_for(timeout=WAIT_MS)
    assert await entries.first.locator(".task-entry-text").inner_text() == "/tool ls {}"
    href = await card.locator(".task-open").get_attribute("href")
    assert href is not None
    assert href.startswith("/chat/")
    assert "%3Asub%3Atask_" in href
    # The child's session is listed in the sidebar right under its parent's.
    child = page.locator(".session.child-session")
    await child.wait_for(timeout=WAIT_MS)
    names = await page.locator(".session .session-name").all_inner_texts()
    mine = names.index(
        await page.locator('.session[aria-current="page"] .session-name').inner_text()
    )
    assert names[mine + 1].startswith("↳ task ")
    await card.scroll_into_view_if_needed()
    await page.screenshot(path=shot("task-card-completed"))
    assert await page.evaluate("document.body.dataset.pwned") is None
    assert page.page_errors == []


async def test_a_childs_hostile_answer_stays_text_on_its_card(
    page: Any, daemon: ControlPlane
) -> None:
    await open_chat(page, daemon)
    answer = f"{HOSTILE} [x](javascript:alert(1))"
    await send(page, task_line(description="echo", prompt=f"/echo {answer}"))
    card = page.locator(".task-card[data-status=completed]")
    await card.wait_for(timeout=WAIT_MS)
    await wait_idle(page)
    result = await card.locator(".task-result").inner_text()
    assert result == answer
    markup = page.locator(".task-card img, .task-card b, .task-card a[href^=javascript]")
    assert await markup.count() == 0
    assert await page.evaluate("document.body.dataset.pwned") is None
    assert page.page_errors == []


async def test_a_child_asks_the_person_who_answers_in_free_text_on_the_page(
    page: Any, daemon: ControlPlane, client: ClientFactory, shot: Any
) -> None:
    key = await open_chat(page, daemon)
    question = f"Which branch should I use? {HOSTILE}"
    # Detached: the child outlives the parent's run and asks while nobody waits for it; its
    # parent is the person's run, so the person gets the question.
    await send(
        page,
        task_line(
            description="pick a branch", prompt=ask_line(question=question, timeout_s=60),
            detached=True, **{"async": True},
        ),
    )  # fmt: skip
    prompt = page.locator(".question")
    await prompt.wait_for(timeout=WAIT_MS)
    card = page.locator(".task-card[data-status=waiting_for_parent]")
    await card.wait_for(timeout=WAIT_MS)
    assert await card.locator(".task-state").inner_text() == "waiting for you"
    assert await prompt.locator(".question-text").inner_text() == question
    assert "pick a branch" in await prompt.locator(".question-title").inner_text()
    assert await prompt.locator("img, b").count() == 0
    assert await page.locator(".approval").count() == 0  # a question, not an approval card
    # The focus stays in the composer; Alt+A reaches the answer box.
    assert await page.evaluate("document.activeElement.id") == "composer-input"
    await page.keyboard.press("Alt+a")
    assert await page.evaluate("document.activeElement.classList.contains('question-input')")
    await page.keyboard.type("use main, not dev")
    await prompt.scroll_into_view_if_needed()
    await page.screenshot(path=shot("task-question-prompt"))
    await page.keyboard.press("Enter")
    # The child gets the person's words and finishes; the prompt leaves its note.
    done = page.locator(".task-card[data-status=completed]")
    await done.wait_for(timeout=WAIT_MS)
    assert "use main, not dev" in await done.locator(".task-result").inner_text()
    note = page.locator(".approval-note", has_text="answered: use main, not dev")
    await note.wait_for(timeout=WAIT_MS)
    assert await page.locator(".question").count() == 0
    async with client() as other:
        listed = await other.call("tasks.list", {"sessionKey": key})
    assert listed["tasks"] == []  # nothing left waiting
    await page.screenshot(path=shot("task-question-answered"))
    assert await page.evaluate("document.body.dataset.pwned") is None
    assert page.page_errors == []


async def test_a_question_with_options_is_answered_by_a_button_and_survives_a_reload(
    page: Any, daemon: ControlPlane
) -> None:
    await open_chat(page, daemon)
    await send(
        page,
        task_line(
            description="choose", prompt=ask_line(question="Proceed?", options=["go", "stop"]),
            detached=True, **{"async": True},
        ),
    )  # fmt: skip
    prompt = page.locator(".question")
    await prompt.wait_for(timeout=WAIT_MS)
    await wait_idle(page)
    # A reload recovers the question (the snapshot's pending approval) and the card
    # (tasks.list: the detached child outlived its run).
    await page.reload()
    await page.wait_for_selector("body[data-ready]", timeout=WAIT_MS)
    await prompt.wait_for(timeout=WAIT_MS)
    card = page.locator(".task-card[data-status=waiting_for_parent]")
    await card.wait_for(timeout=WAIT_MS)
    assert await prompt.locator("textarea").count() == 0
    assert await prompt.locator("button").all_inner_texts() == ["go", "stop"]
    await prompt.locator("button[data-option=stop]").click()
    done = page.locator(".task-card[data-status=completed]")
    await done.wait_for(timeout=WAIT_MS)
    assert "stop" in await done.locator(".task-result").inner_text()
    assert page.page_errors == []


async def test_a_question_answered_elsewhere_leaves_the_page(
    page: Any, daemon: ControlPlane, client: ClientFactory
) -> None:
    await open_chat(page, daemon)
    await send(
        page,
        task_line(description="elsewhere", prompt=ask_line(question="Name?"), detached=True,
                  **{"async": True}),
    )  # fmt: skip
    prompt = page.locator(".question")
    await prompt.wait_for(timeout=WAIT_MS)
    question_id = await prompt.get_attribute("data-question-id")
    async with client() as other:
        answered = await other.call("tasks.answer", {"questionId": question_id, "answer": "Ada"})
    assert answered["question"]["status"] == "answered"
    # The daemon's task.question says who answered and what.
    await page.locator(".approval-note", has_text="answered elsewhere: Ada").wait_for(
        timeout=WAIT_MS
    )
    assert await page.locator(".question").count() == 0
    await page.locator(".task-card[data-status=completed]").wait_for(timeout=WAIT_MS)
    assert page.page_errors == []


async def test_a_childs_approval_is_shown_on_the_page_and_decided_there(
    page: Any, daemon: ControlPlane
) -> None:
    await open_chat(page, daemon)
    command = "echo from-the-child"
    await send(
        page,
        task_line(description="run it", prompt="/tool bash " + json.dumps({"command": command})),
    )
    card = page.locator(".approval")
    await card.wait_for(timeout=WAIT_MS)
    text = await card.inner_text()
    assert command in text
    assert "child task task_" in text  # the rationale names the task
    # The child's card shows what it waits for while the person decides.
    waiting = page.locator(".task-card[data-status=running] .task-last")
    await waiting.wait_for(timeout=WAIT_MS)
    assert "approval" in await waiting.inner_text()
    await card.locator("button[data-decision=approve_once]").click()
    done = page.locator(".task-card[data-status=completed]")
    await done.wait_for(timeout=WAIT_MS)
    assert "from-the-child" in await done.locator(".task-result").inner_text()
    await wait_idle(page)
    # The relayed copy ended too (a stream following every session used to drop it: the
    # child's copy, with the same id, had ended first), so no card is left waiting.
    await page.locator(".approval-note", has_text="bash allowed once").wait_for(timeout=WAIT_MS)
    assert await page.locator(".approval").count() == 0
    assert page.page_errors == []
