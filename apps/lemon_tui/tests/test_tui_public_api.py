"""The import surface: ``__all__`` is sorted and defined, and importing it does not load the
control plane's server stack (that waits for the first connection, after the first paint)."""

from __future__ import annotations

import subprocess
import sys

import lemon_tui


def test_all_names_are_defined_and_sorted() -> None:
    for name in lemon_tui.__all__:
        assert hasattr(lemon_tui, name)
    names = lemon_tui.__all__

    def kind(name: str) -> tuple[int, str]:  # constants, classes, functions (ruff's order)
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert sorted(names, key=kind) == names


def test_importing_the_app_does_not_load_the_control_plane() -> None:
    code = "import sys, lemon_tui; print('lemon_control_plane' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
