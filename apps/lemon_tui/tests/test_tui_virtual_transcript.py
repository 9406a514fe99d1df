"""The virtual transcript: a 2,000-message session mounts only the widgets near the view;
scrolling to the top shows the first message, to the bottom the last; output streamed while
the person scrolled up does not move the view, and at the end the view follows it."""

from __future__ import annotations

from textual.pilot import Pilot
from textual.widget import Widget

from lemon_core.sessions import TextDelta
from lemon_tui import LemonTUI
from lemon_tui._transcript import Transcript
from lemon_tui._widgets import AnswerBlock, AnswerEntry, Entry, UserBlock, UserEntry, _Drawn

from .conftest import until
from .test_tui_transcript_order import ScriptedPort

MESSAGES = 2000
BOUND = 60  # widgets mounted at most, whatever the length of the session
ANSWER = "\n".join(f"{i}. a line of the answer with `code` and **bold** words" for i in range(1, 9))


def mounted(app: LemonTUI) -> list[Widget]:
    return [w for w in app.transcript.children if isinstance(w, UserBlock | AnswerBlock)]


def in_view(app: LemonTUI, text: str) -> bool:
    view = app.transcript.region
    return any(
        w.text == text and w.region.overlaps(view) and w.region.height > 0 for w in mounted(app)
    )


async def settle(pilot: Pilot[object], app: LemonTUI) -> None:
    await pilot.pause()
    await until(pilot, lambda: app.transcript.settled, "the window settled")
    await pilot.pause()


async def test_a_long_session_mounts_only_what_is_near_the_view() -> None:
    port = ScriptedPort([])

    async def connect() -> ScriptedPort:
        return port

    app = LemonTUI(connect, where="a scripted daemon")  # type: ignore[arg-type]
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: port.stream is not None, "watching")
        entries: list[Entry] = []
        for i in range(MESSAGES // 2):
            entries.append(UserEntry(f"question {i}"))
            entries.append(AnswerEntry(f"answer {i}\n\n{ANSWER}"))
        view = app.transcript
        view.add_all(entries)
        view.follow(force=True)
        await settle(pilot, app)
        assert len(view.entries) >= MESSAGES
        assert 0 < len(mounted(app)) <= BOUND
        assert in_view(app, "answer 999\n\n" + ANSWER)  # the end is shown

        view.scroll_home(animate=False)
        await settle(pilot, app)
        assert in_view(app, "question 0")
        assert 0 < len(mounted(app)) <= BOUND

        # A page at a time from the top: every message comes into view in order, the window
        # stays bounded.
        seen = 0
        for _ in range(40):
            view.scroll_page_down(animate=False)
            await settle(pilot, app)
            assert len(mounted(app)) <= BOUND
            shown = [w.text for w in mounted(app) if isinstance(w, UserBlock)]
            numbers = [int(t.split()[1]) for t in shown]
            assert numbers == sorted(numbers)
            seen = max(seen, *numbers)
        assert seen > 10

        # Scrolled up: a delta streams into a new answer at the end, the view does not move.
        view.scroll_home(animate=False)
        await settle(pilot, app)
        y = view.scroll_y
        stream = port.stream
        assert stream is not None
        for seq in range(1, 30):
            stream.push(
                TextDelta(session_key=app.session, run_id="r1", seq=seq, text=f"l{seq}\n\n")
            )
        await until(pilot, stream.drained.is_set, "handled")
        await settle(pilot, app)
        assert view.scroll_y == y
        assert not view.following
        assert in_view(app, "question 0")
        assert isinstance(view.last, AnswerEntry)
        assert view.last.text.startswith("l1")

        # At the end again: the view follows what streams in.
        view.scroll_end(animate=False)
        await settle(pilot, app)
        assert view.following
        stream.push(TextDelta(session_key=app.session, run_id="r1", seq=30, text="the newest"))
        await until(pilot, stream.drained.is_set, "handled")
        await settle(pilot, app)
        assert view.scroll_y == view.max_scroll_y
        newest = view.last
        assert isinstance(newest, AnswerEntry)
        assert newest.text.endswith("the newest")
        assert in_view(app, newest.text)
        assert len(mounted(app)) <= BOUND


def test_only_the_most_recently_drawn_answers_keep_their_lines() -> None:
    from lemon_tui._widgets import _DRAWN, _DRAWN_KEPT

    answers = [AnswerEntry(f"answer {i} with `code`") for i in range(_DRAWN_KEPT + 10)]
    drawn = [a.renderable(dark=True) for a in answers]
    assert len(_DRAWN) <= _DRAWN_KEPT
    assert answers[-1].renderable(dark=True) is drawn[-1]  # kept: not parsed again
    assert answers[0].renderable(dark=True) is not drawn[0]  # dropped, drawn again when shown


async def test_answers_beyond_the_window_are_drawn_ahead_at_their_widgets_width() -> None:
    port = ScriptedPort([])

    async def connect() -> ScriptedPort:
        return port

    app = LemonTUI(connect, where="a scripted daemon")  # type: ignore[arg-type]
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: port.stream is not None, "watching")
        entries: list[Entry] = []
        for i in range(200):
            entries.append(UserEntry(f"question {i}"))
            entries.append(AnswerEntry(f"answer {i}\n\n{ANSWER}"))
        view = app.transcript
        view.add_all(entries)
        view.follow(force=True)
        await settle(pilot, app)
        options, dark = view._draw_options()
        above = [e for e in view.entries[: view._lo] if isinstance(e, AnswerEntry)]
        await until(pilot, lambda: above[-1].drawn(options, dark), "the nearest drawn ahead")
        nearest = above[-1]
        assert nearest.view is None
        drawn = nearest.renderable(dark)
        assert isinstance(drawn, _Drawn)
        lines = drawn._lines
        assert not above[0].drawn(options, dark)  # far from the view: not drawn

        view.reveal(nearest)  # its widget comes: it lays out the lines drawn ahead
        await settle(pilot, app)
        assert nearest.view is not None
        assert nearest.view.is_mounted
        assert nearest.renderable(dark) is drawn
        assert drawn._lines is lines
        assert in_view(app, nearest.text)


async def test_the_kept_offsets_are_the_sum_of_the_heights_after_every_change() -> None:
    port = ScriptedPort([])

    async def connect() -> ScriptedPort:
        return port

    def fresh(view: Transcript, width: int) -> list[int]:
        total, tops = 0, [0]
        for e in view.entries:
            known = e.height_at == width and e.height is not None
            total += e.height if known and e.height is not None else e.estimate(width)
            tops.append(total)
        return tops

    app = LemonTUI(connect, where="a scripted daemon")  # type: ignore[arg-type]
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: port.stream is not None, "watching")
        view = app.transcript
        users = [UserEntry(f"question {i}") for i in range(100)]
        for user in users:
            view.add(user)
            view.add(AnswerEntry(f"answer\n\n{ANSWER}"))
        await settle(pilot, app)
        width = view._width()
        assert view._tops(width) == fresh(view, width)
        users[0].set_note("a long note " * 40)  # far above the view: estimated again
        assert view._tops(width) == fresh(view, width)
        view.add(UserEntry("in the middle " * 30), after=users[1])
        assert view._tops(width) == fresh(view, width)
        await settle(pilot, app)  # measured, drawn ahead
        assert view._tops(width) == fresh(view, width)
        view.scroll_home(animate=False)
        await settle(pilot, app)
        assert view._tops(width) == fresh(view, width)
