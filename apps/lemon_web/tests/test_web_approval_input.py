"""Approval cards never take keys meant for the message box (issue 25, items 2 and 4): a card
that appears while the person types leaves the focus in the composer; its decisions need a
deliberate click, or a key while the card itself has focus (Tab, or Alt+A from anywhere);
"Always allow" asks for a confirmation; the card says what each grant covers before the choice.
Real daemon (offline scripted model), Debian's Chromium."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lemon_control_plane import ControlPlane
from lemon_control_plane.testing import ClientFactory

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAIT_MS = 10_000


async def open_chat(page: Any, daemon: ControlPlane) -> str:
    await page.goto(daemon.url + "/")
    await page.wait_for_selector("body[data-ready]", timeout=WAIT_MS)
    key = await page.evaluate("window.lemon.sessionKey")
    assert isinstance(key, str)
    return key


async def send_bash(page: Any, command: str) -> Any:
    """Send a message that makes the offline model call bash; the approval card's locator."""
    await page.fill("#composer-input", "/tool bash " + json.dumps({"command": command}))
    await page.keyboard.press("Enter")
    return page.locator(".approval")


async def pending_approvals(client: ClientFactory, key: str) -> list[dict[str, Any]]:
    async with client() as other:
        snap = await other.call("sessions.snapshot", {"sessionKey": key})
    pending = snap.get("pendingApprovals") or []
    assert isinstance(pending, list)
    return pending


async def composer_value(page: Any) -> str:
    value = await page.input_value("#composer-input")
    assert isinstance(value, str)
    return value


async def test_typing_through_an_approval_cards_arrival_decides_nothing(
    page: Any, daemon: ControlPlane, client: ClientFactory
) -> None:
    key = await open_chat(page, daemon)
    card = await send_bash(page, "echo typed-through")
    await page.keyboard.type("next I will ")
    await card.wait_for(timeout=WAIT_MS)
    # Typed after the card arrived: spaces and a digit that would each decide in the card.
    await page.keyboard.type("ask about item 3 ")
    assert await composer_value(page) == "next I will ask about item 3 "
    assert await page.evaluate("document.activeElement.id") == "composer-input"
    pending = await pending_approvals(client, key)
    assert [p["tool"] for p in pending] == ["bash"]
    assert await card.count() == 1
    assert await card.locator("button:disabled").count() == 0  # nothing was sent
    assert "allowed" not in await page.inner_text("#transcript")
    await card.locator("button[data-decision=deny]").click()
    await page.locator(".tool[data-state=failed]").wait_for(timeout=WAIT_MS)
    assert await composer_value(page) == "next I will ask about item 3 "


async def test_alt_a_or_tab_reaches_the_card_and_1_then_allows_once(
    page: Any, daemon: ControlPlane, shot: Any
) -> None:
    await open_chat(page, daemon)
    card = await send_bash(page, "echo by-shortcut")
    await card.wait_for(timeout=WAIT_MS)
    assert await page.evaluate("document.activeElement.id") == "composer-input"
    await page.keyboard.press("Alt+a")  # the documented shortcut: focus the waiting card
    assert await page.evaluate("document.activeElement.classList.contains('approval')")
    await page.screenshot(path=shot("approval-focused"))
    await page.keyboard.press("1")
    await page.locator(".tool[data-state=done]").wait_for(timeout=WAIT_MS)
    assert "✓ bash allowed once" in await page.inner_text("#transcript")
    assert await page.evaluate("document.activeElement.id") == "composer-input"
    assert await composer_value(page) == ""
    # Tab reaches a card as well: the card itself is a Tab stop, before its buttons.
    card = await send_bash(page, "echo by-tab")
    await card.wait_for(timeout=WAIT_MS)
    assert await page.evaluate("document.activeElement.id") == "composer-input"
    for _ in range(40):
        if await page.evaluate("document.activeElement.classList.contains('approval')"):
            break
        await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.classList.contains('approval')")
    await page.keyboard.press("1")
    await page.locator(".approval-note", has_text="allowed once").nth(1).wait_for(timeout=WAIT_MS)


async def test_always_allow_needs_a_confirmation(
    page: Any, daemon: ControlPlane, client: ClientFactory, shot: Any
) -> None:
    key = await open_chat(page, daemon)
    card = await send_bash(page, "echo always-confirmed")
    await card.wait_for(timeout=WAIT_MS)
    await page.keyboard.press("Alt+a")
    await page.keyboard.press("3")  # arms "Always allow", sends nothing
    always = card.locator("button[data-decision=approve_global]")
    assert await always.get_attribute("data-armed") == "1"
    assert "Confirm" in await always.inner_text()
    await page.screenshot(path=shot("approval-always-armed"))
    assert len(await pending_approvals(client, key)) == 1
    assert await card.locator("button:disabled").count() == 0
    await page.keyboard.press("ArrowRight")  # moving away disarms it
    assert await always.get_attribute("data-armed") is None
    await always.click()  # a click arms it too ...
    assert await always.get_attribute("data-armed") == "1"
    assert len(await pending_approvals(client, key)) == 1
    await always.click()  # ... and the second click sends it
    await page.locator(".tool[data-state=done]").wait_for(timeout=WAIT_MS)
    assert "✓ bash always allowed" in await page.inner_text("#transcript")
    # The grant is this module's daemon's own (a fresh home), gone with it.


async def test_the_card_names_the_command_and_what_each_grant_covers(
    page: Any, daemon: ControlPlane, shot: Any
) -> None:
    await open_chat(page, daemon)
    card = await send_bash(page, "echo scoped-grant")
    await card.wait_for(timeout=WAIT_MS)
    text = await card.inner_text()
    await page.screenshot(path=shot("approval-scopes"))
    scopes = {
        decision: await card.locator(f"[data-scope-for={decision}]").inner_text()
        for decision in ("approve_once", "approve_session", "approve_global", "deny")
    }
    assert "echo scoped-grant" in text
    assert "this call only" in scopes["approve_once"].lower()
    assert "bash" in scopes["approve_session"]
    assert "echo scoped-grant" in scopes["approve_session"]
    assert "exactly" in scopes["approve_session"]
    assert "this session" in scopes["approve_session"]
    assert "exact command" in scopes["approve_global"]
    assert "every session" in scopes["approve_global"]
    assert "nothing is remembered" in scopes["deny"]
    await card.locator("button[data-decision=deny]").click()
    await page.locator(".tool[data-state=failed]").wait_for(timeout=WAIT_MS)


async def test_a_compound_command_is_named_as_its_exact_text(
    page: Any, daemon: ControlPlane
) -> None:
    await open_chat(page, daemon)
    card = await send_bash(page, "echo one | tr o 0")
    await card.wait_for(timeout=WAIT_MS)
    session = await card.locator("[data-scope-for=approve_session]").inner_text()
    assert "bash echo one | tr o 0 exactly (this exact text)" in session
    assert await card.locator("[data-scope-for=approve_session] code").inner_text() == (
        "echo one | tr o 0"
    )
    await card.locator("button[data-decision=deny]").click()
    await page.locator(".tool[data-state=failed]").wait_for(timeout=WAIT_MS)
