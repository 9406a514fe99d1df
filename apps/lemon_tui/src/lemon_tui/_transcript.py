"""The virtual transcript: every message is kept as an entry, only those near the view are
mounted as widgets.

A long session (thousands of messages, tens of thousands of lines) as one widget per message
made every frame walk them all (layout, Textual's idle wait, the garbage collector). Here the
``Transcript`` keeps the entries (``_widgets``: ``UserEntry``, ``AnswerEntry``, ``CardEntry``,
``NoteEntry``: the state the app changes) in order, and mounts a widget only for the entries
within a few screens of the view; the rest are two spacers of their known height (measured
once shown at this width, else estimated from the text). A widget removed when the view
moves away is dropped; the entry stays, and a new widget is made from it when it comes back.

- Following: while the view is at the end, new output keeps it there; once the person
  scrolled up, output (a delta, a card) does not move the view until they scroll back down
  (or send something: ``follow(force=True)``).
- Heights that turn out other than estimated above the view shift nothing on screen: the
  scroll offset is corrected by the difference (the entry at the top of the view stays put).
- Drawn ahead: once a frame is out, the answers within a few screens beyond the window are
  drawn (their Markdown parsed and rendered at the width their widget will have), one per
  idle turn, nearest first; the frame that brings one into the window then only lays out
  lines drawn before. What a widget draws is kept on its entry (``_widgets``), so coming
  back to an answer drawn lately draws nothing either.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from itertools import accumulate, zip_longest
from typing import TYPE_CHECKING, Final

from textual.containers import VerticalScroll
from textual.layout import DockArrangeResult
from textual.widget import Widget

from lemon_tui._widgets import Entry, EntryView

if TYPE_CHECKING:
    from rich.console import ConsoleOptions
    from textual.geometry import Size

__all__ = ["Transcript"]

_AHEAD: Final = 1.0  # screens mounted beyond each edge of the view
_KEEP: Final = 2.0  # screens beyond which mounted widgets are dropped (hysteresis)
_DRAW: Final = 3.0  # screens beyond the mounted window whose answers are drawn ahead


class _Spacer(Widget):
    """Marks an edge of the window: always 0 lines tall, it is placed (``Transcript.arrange``)
    where the entries not mounted above (or below) the window end, so the layout is as tall as
    the whole transcript without a widget as tall as it (a widget tens of thousands of lines
    tall costs Textual a spatial-map cell per 20 lines and a dirty line per line, on every
    layout)."""

    DEFAULT_CSS = "_Spacer { height: 0; }"


class Transcript(VerticalScroll):
    """See the module docstring. ``entries`` in order; ``[lo, hi)`` of them are mounted."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.entries: list[Entry] = []
        self._lo = 0
        self._hi = 0
        self._top = _Spacer()
        self._bottom = _Spacer()
        self._at_end = True  # following the newest output
        self._pending = False
        self._syncing = False
        # The entry at the view's top, the view's offset into it and the entry's top then.
        self._anchor: tuple[Entry | None, int, int] = (None, 0, 0)
        self._ahead: list[Entry] = []  # to draw while idle, nearest first
        self._tops_at: tuple[int, list[int]] | None = None  # (width, tops) until one changes
        self._drawing = False
        self._above = 0  # lines of the entries not mounted above the window
        self._below = 0  # ... and below it
        self._arranged: tuple[object, int, int, DockArrangeResult] | None = None
        self._fresh: set[EntryView] = set()  # bound to another entry, not laid out since
        self._unfresh = False

    def compose(self) -> Iterable[Widget]:
        yield self._top
        yield self._bottom

    # -- what the app calls --------------------------------------------------------------------

    @property
    def mounted(self) -> list[Entry]:
        """The entries shown by a widget now (the window)."""
        return self.entries[self._lo : self._hi]

    @property
    def following(self) -> bool:
        """Whether new output keeps the view at the end (the person did not scroll up)."""
        return self._at_end

    @property
    def last(self) -> Entry | None:
        return self.entries[-1] if self.entries else None

    @property
    def settled(self) -> bool:
        """No window change waits (the bench waits for it as well as for idle)."""
        return not self._pending

    def holds(self, entry: Entry | None) -> bool:
        return entry is not None and entry.owner is self

    def add(self, item: Entry | EntryView, *, after: Entry | None = None) -> Entry:
        """Add an entry (or a widget's entry) at the end, or right after ``after``."""
        entry = item.entry if isinstance(item, EntryView) else item
        view = item if isinstance(item, EntryView) else None
        at = len(self.entries)
        if after is not None and after.owner is self:
            at = self.entries.index(after, max(0, self._lo - 1) if after.view else 0) + 1
        self.entries.insert(at, entry)
        entry.owner = self
        self._tops_at = None
        if at < self._lo:
            self._lo += 1
            self._hi += 1
        elif at <= self._hi and self.is_attached:
            self._hi += 1
            self._mount(entry, at, view)
        self.schedule()
        return entry

    def add_all(self, items: Iterable[Entry | EntryView]) -> None:
        """Add many at the end (a history): the window is mounted at the next sync."""
        for item in items:
            entry = item.entry if isinstance(item, EntryView) else item
            entry.owner = self
            self.entries.append(entry)
        self._tops_at = None
        self.schedule()

    def clear(self) -> None:
        for entry in self.entries:
            entry.owner = None
            entry.view = None
        self.entries.clear()
        self._tops_at = None
        views = [c for c in self.children if not isinstance(c, _Spacer)]
        if views and self.is_attached:
            self.remove_children(views)
        self._lo = self._hi = 0
        self._anchor = (None, 0, 0)
        self._place(0, 0)
        self._at_end = True

    def follow(self, *, force: bool = False) -> None:
        """New output: keep the end in view while following (``force``: follow again)."""
        if force:
            self._at_end = True
        self.schedule()

    def reveal(self, entry: Entry) -> None:
        """Scroll so that ``entry`` is in view (mounted first if it is not)."""
        if entry.owner is not self:
            return
        if entry.view is None:  # far from the view: go there (the window follows)
            tops = self._tops(self._width())
            self.scroll_to(y=tops[self._index(entry)], animate=False, immediate=True)
        self.call_after_refresh(self._reveal_view, entry)

    def _reveal_view(self, entry: Entry) -> None:
        if entry.view is not None and entry.view.is_mounted:
            self.scroll_to_widget(entry.view, animate=False)

    def entry_changed(self, entry: Entry) -> None:
        """An entry's content changed (its widget, if any, redrew itself)."""
        if entry.view is None:
            entry.height = None  # estimated again until shown
        self._tops_at = None
        self.schedule()

    def schedule(self) -> None:
        """Sync the window once the layout caught up (one per frame, however many calls)."""
        if not self._pending and self.is_attached:
            self._pending = True
            self.call_after_refresh(self._sync)

    # -- the window ----------------------------------------------------------------------------

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self._syncing:
            return
        self._at_end = new_value >= self.max_scroll_y
        if round(old_value) != round(new_value):
            self._sync(scrolled=True)

    def on_resize(self) -> None:
        self.schedule()

    def _width(self) -> int:
        return max(10, self.scrollable_content_region.width or self.app.size.width - 2)

    def _tops(self, width: int) -> list[int]:
        """The offset of each entry's top (and the total at the end); summed again only
        when an entry, a height or the width changed (not on every page)."""
        if self._tops_at is not None and self._tops_at[0] == width:
            return self._tops_at[1]
        heights = [
            e.height if e.height_at == width and e.height is not None else e.estimate(width)
            for e in self.entries
        ]
        tops = [0, *accumulate(heights)]
        self._tops_at = (width, tops)
        return tops

    def _measure(self, width: int) -> None:
        for entry in self.entries[self._lo : self._hi]:
            view = entry.view
            if view is not None and view.is_mounted and view.size.width and view not in self._fresh:
                height = view.outer_size.height + view.styles.margin.top
                if (entry.height, entry.height_at) != (height, width):
                    entry.height, entry.height_at = height, width
                    self._tops_at = None

    def _sync(self, *, scrolled: bool = False) -> None:
        """Measure what is mounted, keep the view where it was (or at the end), and mount
        the entries near it (dropping those far from it); ``scrolled``: the view was moved."""
        self._pending = False
        if not self.is_attached:
            return
        width = self._width()
        view_h = self.scrollable_content_region.height or self.app.size.height
        self._measure(width)
        tops = self._tops(width)  # what the layout shows, the spacers standing in
        total = tops[-1]
        y = int(self.scroll_y)
        anchor, off, was = self._anchor
        if self._at_end:
            y = max(0, total - view_h)
        elif anchor is not None and anchor.owner is self:
            # Heights above the view became known (drawn ahead, measured): the entry at its
            # top stays put; a page moves from where that entry is now.
            at = self._index(anchor)
            if scrolled:
                y = max(0, min(y + tops[at] - was, total - view_h))
            else:
                y = max(0, min(tops[at] + off, total - view_h))
            if y != int(self.scroll_y):
                self._syncing = True
                try:
                    self.scroll_to(y=y, animate=False, immediate=True)
                finally:
                    self._syncing = False
        n = len(self.entries)
        lo_need = max(0, bisect.bisect_right(tops, y - _AHEAD * view_h) - 1)
        hi_need = min(n, max(bisect.bisect_left(tops, y + view_h + _AHEAD * view_h), lo_need))
        lo_keep = max(0, bisect.bisect_right(tops, y - _KEEP * view_h) - 1)
        hi_keep = min(n, bisect.bisect_left(tops, y + view_h + _KEEP * view_h))
        lo, hi = self._lo, self._hi
        if lo_need < lo or hi_need > hi or lo < lo_keep or hi > hi_keep or lo >= hi:
            if hi <= lo or hi_need <= lo or lo_need >= hi:  # no overlap: a fresh window
                new_lo, new_hi = lo_need, hi_need
            else:
                new_lo = min(max(lo, lo_keep), lo_need)
                new_hi = max(min(hi, hi_keep), hi_need)
                # Extending one side trims the other to what it needs: the widgets leaving
                # there are the ones the entries coming in take (``_rewindow``).
                if lo_need < lo:
                    new_hi = hi_need
                if hi_need > hi:
                    new_lo = lo_need
            self._rewindow(new_lo, new_hi)
        self._place(tops[self._lo], total - tops[self._hi])
        if n:
            at = max(0, min(n - 1, bisect.bisect_right(tops, y) - 1))
            self._anchor = (self.entries[at], y - tops[at], tops[at])
        else:
            self._anchor = (None, 0, 0)
        if self._at_end:
            self._syncing = True
            try:
                self.scroll_end(animate=False)
            finally:
                self._syncing = False
        if self._fresh or any(e.view is not None and not e.view.size.width for e in self.mounted):
            self.schedule()  # measure what was just mounted once it is laid out
        self._plan_ahead(tops, y, view_h)

    def _place(self, above: int, below: int) -> None:
        """The lines the entries not mounted take above and below the window (laid out again
        only when they change)."""
        if (above, below) != (self._above, self._below):
            self._above, self._below = above, below
            self.refresh(layout=True)

    def arrange(self, size: Size, optimal: bool = False) -> DockArrangeResult:
        """Textual's arrangement of the window (the two 0-line spacers and the widgets between
        them), moved down by the lines above it, the bottom spacer placed at the end of the
        lines below it: the layout's height is the transcript's, the spatial map holds only
        the window."""
        base = super().arrange(size, optimal)
        kept = self._arranged
        if kept is not None and kept[0] is base and kept[1:3] == (self._above, self._below):
            return kept[3]
        above, below = self._above, self._below
        placements = []
        for placement in base.placements:
            if placement.widget is self._top:
                placements.append(placement)
                continue
            shift = above + below if placement.widget is self._bottom else above
            placements.append(placement._replace(region=placement.region.translate((0, shift))))
        result = DockArrangeResult(placements, base.widgets, base.scroll_spacing)
        self._arranged = (base, above, below, result)
        return result

    def _size_updated(
        self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True
    ) -> bool:
        """Textual lays the transcript out again whenever its virtual height changed in a
        layout (a height learnt off screen changes it on most pages): the layout that found
        the new height already placed everything at it, so only when the scroll bar comes or
        goes (the height crosses the view's) is another one needed."""
        old = self.virtual_size.height
        view = container_size.height
        if (
            layout
            and size == self.size
            and container_size == self.container_size
            and virtual_size.width == self.virtual_size.width
            and old > view
            and virtual_size.height > view
        ):
            layout = False
        return super()._size_updated(size, virtual_size, container_size, layout=layout)

    def _plan_ahead(self, tops: list[int], y: int, view_h: int) -> None:
        """The entries beyond the window, within ``_DRAW`` screens of it, nearest first."""
        reach = (_AHEAD + _DRAW) * view_h
        n = len(self.entries)
        first = max(0, bisect.bisect_right(tops, y - reach) - 1)
        last = min(n, bisect.bisect_left(tops, y + view_h + reach))
        above = self.entries[first : self._lo][::-1]
        below = self.entries[self._hi : last]
        ahead = [e for pair in zip_longest(below, above) for e in pair if e is not None]
        self._ahead = ahead
        if ahead and not self._drawing:
            self._drawing = True
            self.call_after_refresh(self._draw_next)

    def _draw_options(self) -> tuple[ConsoleOptions, bool]:
        """The options an answer's widget draws at (its content: the width less its padding)."""
        app = self.app
        width = self._width() - 2
        return app.console_options.update_width(width).update(
            highlight=False
        ), app.current_theme.dark

    def _draw_next(self) -> None:
        """Draw the nearest entry not drawn yet (one per turn: a key pressed meanwhile waits
        for one answer at most), then give the loop back."""
        self._drawing = False
        if not self.is_attached:
            return
        options, dark = self._draw_options()
        width = self._width()
        while self._ahead:
            entry = self._ahead.pop(0)
            if entry.owner is self and entry.view is None and not entry.drawn(options, dark):
                height = entry.draw_ahead(self.app.console, options, dark)
                if height is not None and (entry.height, entry.height_at) != (height, width):
                    # Its height is known now, not estimated: the spacers take it at the next
                    # sync (the next page, or anything else that moves the window; the view
                    # kept where it is), before its widget comes; not laid out again now.
                    entry.height, entry.height_at = height, width
                    self._tops_at = None
                break
        if self._ahead:
            self._drawing = True
            self.call_after_refresh(self._draw_next)

    def _index(self, entry: Entry) -> int:
        lo = self._lo
        if lo < len(self.entries) and entry.view is not None:
            return self.entries.index(entry, lo)
        return self.entries.index(entry)

    def _rewindow(self, lo: int, hi: int) -> None:
        """Show entries ``[lo, hi)``. The widgets of the entries leaving the window are given
        to the entries coming into it (``EntryView.bind``, the same kind of entry), moved
        into place: the page lays out once, in the turn it scrolled, instead of again when
        new widgets finish mounting and old ones finish being removed. Only what is left
        over is mounted or removed."""
        spare: dict[type[Entry], list[EntryView]] = {}
        for i in range(self._lo, self._hi):
            if i < lo or i >= hi:
                e = self.entries[i]
                if e.view is not None:
                    spare.setdefault(type(e), []).append(e.view)
                e.view = None
        old_lo, old_hi = self._lo, self._hi
        if old_hi <= lo or hi <= old_lo or old_lo >= old_hi:
            self._lo = self._hi = lo
            self._show(self.entries[lo:hi], self._top, spare)
        else:  # overlapping: extend above, then below
            keep_lo, keep_hi = max(lo, old_lo), min(hi, old_hi)
            self._show(self.entries[lo:keep_lo], self._top, spare)
            last = self.entries[keep_hi - 1].view
            self._show(self.entries[keep_hi:hi], last if last is not None else self._top, spare)
        left = [v for views in spare.values() for v in views]
        if left:
            self.remove_children(left)
        self._lo, self._hi = lo, hi

    def _show(
        self, entries: list[Entry], after: Widget, spare: dict[type[Entry], list[EntryView]]
    ) -> None:
        """Give each of ``entries`` a widget (a spare one bound to it, else a new one), in
        order, right after ``after``."""
        prev = after
        batch: list[EntryView] = []
        for e in entries:
            views = spare.get(type(e))
            if views:
                view = views.pop()
                view.bind(e)
                e.view = view
                self._fresh.add(view)
                if batch:
                    self.mount_all(batch, after=prev)
                    prev, batch = batch[-1], []
                self.move_child(view, after=prev)
                prev = view
            else:
                e.view = e.make_view()
                batch.append(e.view)
        if batch:
            self.mount_all(batch, after=prev)
        if self._fresh and not self._unfresh:
            self._unfresh = True
            self.call_after_refresh(self._laid_out)

    def _laid_out(self) -> None:
        """The widgets bound to other entries have been laid out since: measured from now."""
        self._unfresh = False
        self._fresh.clear()

    def _mount(self, entry: Entry, at: int, view: EntryView | None) -> None:
        made = view if view is not None and not view.is_attached else entry.make_view()
        entry.view = made
        prev = self.entries[at - 1].view if at - 1 >= self._lo else None
        if prev is not None and prev.parent is self:
            self.mount(made, after=prev)
        else:
            self.mount(made, after=self._top)
