"""ErrorTreeContract catches every way an app's error tree or its drawing can go wrong."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from lemon_platform_test.errors_kit import (
    DrawnError,
    ErrorTreeContract,
    ErrorTreeDrawingError,
    parse_error_tree,
)

_GOOD_ERRORS = '''\
"""Errors of the fixture app::

    FixError
    ├── FixUsageError (ValueError)    misuse
    │   └── FixKeyError (KeyError)
    ├── FixRuntimeError
    └── FixSubError                   fixapp.sub.errors
"""


class FixError(Exception):
    pass


class FixUsageError(FixError, ValueError):
    pass


class FixKeyError(FixUsageError, KeyError):
    pass


class FixRuntimeError(FixError):
    pass
'''


@pytest.fixture
def fixture_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A throwaway package ``fixapp`` (``errors.py`` + ``sub/errors.py``) on ``sys.path``."""
    package = tmp_path / "fixapp"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "errors.py").write_text(_GOOD_ERRORS)
    (package / "sub" / "errors.py").write_text(
        textwrap.dedent('''\
            """Sub errors::

                FixError
                └── FixSubError
            """
            from fixapp.errors import FixError


            class FixSubError(FixError):
                pass
            ''')
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield package
    for name in [m for m in sys.modules if m == "fixapp" or m.startswith("fixapp.")]:
        del sys.modules[name]


def _contract() -> ErrorTreeContract:
    from fixapp.errors import FixError  # type: ignore[import-not-found]  # made by the fixture

    class Contract(ErrorTreeContract):
        package = "fixapp"
        root = FixError

    return Contract()


def _all_checks(contract: ErrorTreeContract) -> None:
    contract.test_the_root_lives_in_the_apps_errors_module()
    contract.test_every_error_derives_from_the_root()
    contract.test_the_root_module_draws_every_error()
    contract.test_each_errors_module_draws_its_own_errors()


def test_a_drawing_parses_into_parents_and_mixins() -> None:
    nodes = parse_error_tree(_GOOD_ERRORS.split('"""')[1])
    assert nodes == {
        "FixError": DrawnError(name="FixError", parent=None, mixins=frozenset()),
        "FixUsageError": DrawnError(
            name="FixUsageError", parent="FixError", mixins=frozenset({"ValueError"})
        ),
        "FixKeyError": DrawnError(
            name="FixKeyError", parent="FixUsageError", mixins=frozenset({"KeyError"})
        ),
        "FixRuntimeError": DrawnError(
            name="FixRuntimeError", parent="FixError", mixins=frozenset()
        ),
        "FixSubError": DrawnError(name="FixSubError", parent="FixError", mixins=frozenset()),
    }


def test_a_correct_app_passes(fixture_app: Path) -> None:
    _all_checks(_contract())


def test_a_stray_error_outside_the_root_fails(fixture_app: Path) -> None:
    (fixture_app / "stray.py").write_text("class StrayError(RuntimeError):\n    pass\n")
    with pytest.raises(AssertionError, match=r"fixapp\.stray\.StrayError"):
        _contract().test_every_error_derives_from_the_root()


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("    └── FixSubError", "    └── Unrelated", "misses FixSubError"),
        ("    │   └── FixKeyError (KeyError)\n", "", "misses FixKeyError"),
        (" (KeyError)", "", r"FixKeyError must be drawn with \(KeyError\)"),
        ("(ValueError)", "(TypeError)", r"must be drawn with \(ValueError\)"),
        ("    │   └── FixKeyError", "    ├── FixKeyError", "FixKeyError under FixError"),
        ("FixError\n    ├", "FixBase\n    ├", "starts at FixBase"),
    ],
    ids=["undefined", "missing", "mixin-left-out", "wrong-mixin", "wrong-parent", "wrong-top"],
)
def test_a_stale_drawing_fails(fixture_app: Path, old: str, new: str, message: str) -> None:
    errors = fixture_app / "errors.py"
    text = errors.read_text()
    assert old in text
    errors.write_text(text.replace(old, new, 1))
    with pytest.raises(AssertionError, match=message):
        _all_checks(_contract())


def test_a_sub_errors_module_must_draw_its_own_classes(fixture_app: Path) -> None:
    sub = fixture_app / "sub" / "errors.py"
    sub.write_text(sub.read_text().replace("└── FixSubError", "└── FixRuntimeError"))
    with pytest.raises(
        AssertionError, match=r"fixapp\.sub\.errors: the drawing misses FixSubError"
    ):
        _contract().test_each_errors_module_draws_its_own_errors()


def test_a_drawing_that_does_not_parse_says_which_line() -> None:
    with pytest.raises(ErrorTreeDrawingError, match="not a tree line"):
        parse_error_tree("Errors::\n\n    FixError\n    ├── Fix Error\n")
    with pytest.raises(ErrorTreeDrawingError, match="draws no error tree"):
        parse_error_tree("No drawing here.")
    with pytest.raises(ErrorTreeDrawingError, match="deeper"):
        parse_error_tree("Errors::\n\n    FixError\n    │   ├── FixSubError\n")


def test_two_errors_with_one_name_cannot_be_drawn(fixture_app: Path) -> None:
    (fixture_app / "other.py").write_text(
        "from fixapp.errors import FixError\n\n\nclass FixRuntimeError(FixError):\n    pass\n"
    )
    with pytest.raises(AssertionError, match="defined more than once"):
        _contract().test_the_root_module_draws_every_error()
