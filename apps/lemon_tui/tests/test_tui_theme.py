"""Light or dark: the flag, then LEMON_TUI_THEME, then COLORFGBG, else dark."""

from __future__ import annotations

import pytest

from lemon_tui._theme import pick_shade


def test_the_shade_is_asked_then_set_then_guessed() -> None:
    assert pick_shade({}) == "dark"
    assert pick_shade({"COLORFGBG": "0;15"}) == "light"
    assert pick_shade({"COLORFGBG": "15;0"}) == "dark"
    assert pick_shade({"COLORFGBG": "12;default;7"}) == "light"
    assert pick_shade({"COLORFGBG": "nonsense"}) == "dark"
    assert pick_shade({"COLORFGBG": "0;15", "LEMON_TUI_THEME": "dark"}) == "dark"
    assert pick_shade({"LEMON_TUI_THEME": "dark"}, "light") == "light"


def test_an_unknown_shade_names_the_choices() -> None:
    with pytest.raises(ValueError, match="use light or dark"):
        pick_shade({"LEMON_TUI_THEME": "sepia"})
