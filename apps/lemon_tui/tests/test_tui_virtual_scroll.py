"""Scrolling the virtual transcript of a 2,000-message session with the keys a person uses:
Home, End, Page Up / Page Down and a jump to the middle each show the right messages; the
scroll bar spans the whole session; output streamed into the last answer while scrolled up
leaves the view where it is, at the end it keeps the newest line in view; the widgets given
from one entry to another as the window moves show their own entry (tool cards included)."""

from __future__ import annotations

import bisect

from textual.pilot import Pilot
from textual.widget import Widget

from lemon_core.sessions import TextDelta
from lemon_tui import LemonTUI
from lemon_tui._widgets import (
    AnswerBlock,
    AnswerEntry,
    CardEntry,
    Entry,
    EntryView,
    ToolCardView,
    UserBlock,
    UserEntry,
)

from .conftest import until
from .test_tui_transcript_order import ScriptedPort

MESSAGES = 2000
ANSWER = "\n".join(f"{i}. a line of the answer with `code` and **bold** words" for i in range(1, 9))


def session() -> list[Entry]:
    """1,000 questions and answers, a tool card after every tenth answer."""
    entries: list[Entry] = []
    for i in range(MESSAGES // 2):
        entries.append(UserEntry(f"question {i}"))
        entries.append(AnswerEntry(f"answer {i}\n\n{ANSWER}"))
        if i % 10 == 9:
            card = CardEntry(f"tool-{i}", f"bash: step {i}")
            card.complete(True, f"line one of {i}\nline two of {i}")
            entries.append(card)
    return entries


def views(app: LemonTUI) -> list[EntryView]:
    return [w for w in app.transcript.children if isinstance(w, EntryView)]


def top_shown(app: LemonTUI) -> Widget:
    """The widget on the transcript's first line."""
    view = app.transcript.region
    shown = [w for w in views(app) if w.region.overlaps(view) and w.region.height > 0]
    assert shown, "nothing in view"
    return min(shown, key=lambda w: w.region.y)


def questions_in_view(app: LemonTUI) -> list[int]:
    view = app.transcript.region
    return [
        int(w.text.split()[1])
        for w in views(app)
        if isinstance(w, UserBlock) and w.region.overlaps(view) and w.region.height > 0
    ]


def drawn(widget: Widget) -> str:
    """The text the widget draws (its lines as they go to the screen)."""
    return "\n".join(strip.text for strip in widget.render_lines(widget.size.region))


def consistent(app: LemonTUI) -> None:
    """Every widget draws its own entry, in the entries' order, bound both ways."""
    view = app.transcript
    shown = views(app)
    assert [w.entry for w in shown] == view.mounted
    for w in shown:
        entry = w.entry
        assert entry.view is w
        if not w.size.height:
            continue  # not laid out yet
        if isinstance(entry, UserEntry | AnswerEntry):
            assert entry.text.split("\n")[0] in drawn(w)
        if isinstance(entry, CardEntry):
            assert isinstance(w, ToolCardView)
            assert w.has_class("-open") == entry.expanded
            assert entry.title in drawn(w)
            assert ("line two of" in drawn(w)) == entry.expanded


async def settle(pilot: Pilot[object], app: LemonTUI) -> None:
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    await until(pilot, lambda: app.transcript.settled, "the window settled")
    await pilot.pause()


async def test_keys_scroll_a_long_session_to_the_right_messages() -> None:
    port = ScriptedPort([])

    async def connect() -> ScriptedPort:
        return port

    app = LemonTUI(connect, where="a scripted daemon")  # type: ignore[arg-type]
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: port.stream is not None, "watching")
        view = app.transcript
        entries = session()
        view.add_all(entries)
        view.follow(force=True)
        await settle(pilot, app)
        view.focus()

        # The scroll bar spans the whole session (every entry at least its line and margin).
        assert view.virtual_size.height >= 2 * len(entries)
        assert view.vertical_scrollbar.window_virtual_size == view.virtual_size.height
        assert view.scroll_y == view.max_scroll_y
        assert isinstance(top_shown(app), AnswerBlock | ToolCardView)

        await pilot.press("home")
        await settle(pilot, app)
        assert view.scroll_y == 0
        assert questions_in_view(app)[0] == 0
        top = top_shown(app)
        assert isinstance(top, UserBlock)
        assert top.text == "question 0"
        consistent(app)

        # Page Down a screen at a time: the questions come in order, none skipped.
        seen: list[int] = []
        for _ in range(30):
            await pilot.press("pagedown")
            await settle(pilot, app)
            shown = questions_in_view(app)
            assert shown == sorted(shown)
            seen += [q for q in shown if not seen or q > seen[-1]]
            consistent(app)
        assert seen == list(range(seen[0], seen[-1] + 1))
        assert seen[-1] >= 10

        # The middle: a jump to half the height shows the entry whose lines are there.
        view.scroll_to(y=view.max_scroll_y // 2, animate=False)
        await settle(pilot, app)
        y = int(view.scroll_y)
        tops = view._tops(view._width())
        expected = view.entries[bisect.bisect_right(tops, y) - 1]
        assert top_shown(app).entry is expected  # type: ignore[attr-defined]
        middle = questions_in_view(app) or [-1]
        assert 400 < max(middle) < 600
        consistent(app)

        # Page Up from there and back down: the same view as before. A first round trip draws
        # the pages around (their real heights replace the estimates, which may move the view
        # by a few lines while it happens); once they are known a round trip is exact.
        for key in ("pageup", "pageup", "pagedown", "pagedown"):
            await pilot.press(key)
            await settle(pilot, app)
            consistent(app)
        y = int(view.scroll_y)
        tops = view._tops(view._width())
        expected = top_shown(app).entry  # type: ignore[attr-defined]
        before = [w.entry for w in views(app) if w.region.overlaps(view.region)]
        for key in ("pageup", "pageup", "pagedown", "pagedown"):
            await pilot.press(key)
            await settle(pilot, app)
            consistent(app)
        # The same message at the top, at the same offset into it.
        index = view.entries.index(expected)
        now = view._tops(view._width())
        assert int(view.scroll_y) - now[index] == y - tops[index]
        assert top_shown(app).entry is expected  # type: ignore[attr-defined]
        assert [w.entry for w in views(app) if w.region.overlaps(view.region)] == before

        await pilot.press("end")
        await settle(pilot, app)
        assert view.scroll_y == view.max_scroll_y
        assert view.following
        last = view.last
        assert last is not None
        assert last.view is not None
        assert last.view.region.overlaps(view.region)
        consistent(app)


async def test_a_recycled_tool_card_unfolds_its_own_entry() -> None:
    port = ScriptedPort([])

    async def connect() -> ScriptedPort:
        return port

    app = LemonTUI(connect, where="a scripted daemon")  # type: ignore[arg-type]
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: port.stream is not None, "watching")
        view = app.transcript
        entries = session()
        view.add_all(entries)
        view.follow(force=True)
        await settle(pilot, app)
        cards = [e for e in entries if isinstance(e, CardEntry)]
        for card in (cards[3], cards[60]):  # far apart: the window moved between them
            view.reveal(card)
            await settle(pilot, app)
            widget = card.view
            assert isinstance(widget, ToolCardView)
            assert widget.entry is card
            await pilot.click(widget)
            await settle(pilot, app)
            assert card.expanded
            assert widget.has_class("-open")
            assert [c for c in cards if c.expanded] == [card]
            card.toggle()
            await settle(pilot, app)
            consistent(app)


async def test_the_last_answer_streams_without_moving_a_scrolled_view_and_follows_at_the_end() -> (
    None
):
    port = ScriptedPort([])

    async def connect() -> ScriptedPort:
        return port

    app = LemonTUI(connect, where="a scripted daemon")  # type: ignore[arg-type]
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: port.stream is not None, "watching")
        view = app.transcript
        view.add_all(session())
        view.follow(force=True)
        await settle(pilot, app)
        stream = port.stream
        assert stream is not None

        # Scrolled to the middle: the last answer grows by many lines, the view stays.
        view.scroll_to(y=view.max_scroll_y // 2, animate=False)
        await settle(pilot, app)
        y, top = view.scroll_y, top_shown(app).entry  # type: ignore[attr-defined]
        height = view.virtual_size.height
        for seq in range(1, 40):
            stream.push(
                TextDelta(session_key=app.session, run_id="r1", seq=seq, text=f"l{seq}\n\n")
            )
        await until(pilot, stream.drained.is_set, "handled")
        await settle(pilot, app)
        assert view.scroll_y == y
        assert top_shown(app).entry is top  # type: ignore[attr-defined]
        assert not view.following
        last = view.last
        assert isinstance(last, AnswerEntry)
        assert last.text.startswith("l1")
        assert view.virtual_size.height > height  # the scroll bar took the new lines

        # At the end: each delta keeps the newest line in view.
        view.scroll_end(animate=False)
        await settle(pilot, app)
        assert view.following
        for seq in range(40, 70):
            stream.push(
                TextDelta(session_key=app.session, run_id="r1", seq=seq, text=f"m{seq}\n\n")
            )
            await until(pilot, stream.drained.is_set, "handled")
            await settle(pilot, app)
            assert view.scroll_y == view.max_scroll_y
            shown = last.view
            assert isinstance(shown, AnswerBlock)
            assert shown.text.endswith(f"m{seq}\n\n")
            assert shown.region.bottom >= view.region.bottom - 1  # its end is on screen
        consistent(app)
