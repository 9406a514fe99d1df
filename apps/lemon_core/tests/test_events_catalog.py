"""The committed catalog's generated tables match the registry, and the entry point works."""

from __future__ import annotations

from pathlib import Path

import pytest

from lemon_core.events.catalog import check_catalog, default_catalog_path, main, regenerate

CATALOG = default_catalog_path(Path(__file__).resolve().parent)


def test_committed_catalog_tables_are_current() -> None:
    drift = check_catalog(CATALOG)
    assert drift.current, (
        f"docs/bus_events.md is stale ({drift}); run `python -m lemon_core.events.catalog`"
    )


def test_check_mode_fails_on_a_stale_table_and_regeneration_fixes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "bus_events.md"
    text = CATALOG.read_text(encoding="utf-8")
    copy.write_text(text.replace("`RunStarted`", "`RunBegan`", 1), encoding="utf-8")
    assert main(["--check", "--path", str(copy)]) == 1
    assert "stale" in capsys.readouterr().err
    assert main(["--path", str(copy)]) == 0
    assert copy.read_text(encoding="utf-8") == text
    assert main(["--check", "--path", str(copy)]) == 0


def test_missing_markers_are_reported_not_invented(tmp_path: Path) -> None:
    copy = tmp_path / "bus_events.md"
    copy.write_text("# nothing generated here\n", encoding="utf-8")
    fresh, missing = regenerate(copy.read_text(encoding="utf-8"))
    assert fresh == "# nothing generated here\n"
    assert set(missing) == {"registered-types", "nested-payloads", "enums"}
    assert main(["--check", "--path", str(copy)]) == 1


def test_a_missing_file_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--check", "--path", str(tmp_path / "absent.md")]) == 2
    assert "absent.md" in capsys.readouterr().err
