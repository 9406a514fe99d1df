"""``lemon agents list|show|approve|revoke`` on definition files in a home and a project."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lemon_cli.main import app

PROJECT_DEF = "---\nname: fixer\ndescription: fixes things\ntools: [read, edit]\n---\nFix.\x1b[2J\n"


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    home = tmp_path / "home"
    (home / "agents").mkdir(parents=True)
    (home / "agents" / "reviewer.md").write_text(
        "---\nname: reviewer\ndescription: reviews\nmax_turns: 3\n---\nReview.\n"
    )
    project = tmp_path / "repo"
    (project / ".lemon" / "agents").mkdir(parents=True)
    (project / ".lemon" / "agents" / "fixer.md").write_text(PROJECT_DEF)
    (project / ".lemon" / "agents" / "bad.md").write_text("---\nname: bad\n---\n")
    monkeypatch.setenv("LEMON_HOME", str(home))
    monkeypatch.chdir(project)
    return home, project


def test_list_shows_sources_pending_project_definitions_and_broken_files(
    places: tuple[Path, Path],
) -> None:
    runner = CliRunner()
    listed = runner.invoke(app, ["agents", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    data = json.loads(listed.output)
    status = {a["name"]: (a["source"], a["status"]) for a in data["agents"]}
    assert status == {
        "general": ("builtin", "active"),
        "explore": ("builtin", "active"),
        "reviewer": ("home", "active"),
        "fixer": ("project", "needs approval"),
    }
    assert [Path(p["path"]).name for p in data["problems"]] == ["bad.md"]
    text = runner.invoke(app, ["agents", "list"]).output
    assert "approve it with: lemon agents approve fixer" in text
    assert "skipped:" in text


def test_approve_activates_a_project_definition_until_revoked(places: tuple[Path, Path]) -> None:
    home, _project = places
    runner = CliRunner()
    assert runner.invoke(app, ["agents", "approve", "reviewer"]).exit_code == 2  # not the project's
    done = runner.invoke(app, ["agents", "approve", "fixer"])
    assert done.exit_code == 0, done.output
    assert "tools at most: edit, read" in done.output
    assert (home / "agents" / "approvals.json").is_file()
    shown = runner.invoke(app, ["agents", "show", "fixer", "--json"])
    assert json.loads(shown.output)["status"] == "active"
    plain = runner.invoke(app, ["agents", "show", "fixer"]).output
    assert "\x1b" not in plain  # a repository's escape sequence is not sent to the terminal
    assert "Fix.?[2J" in plain
    assert runner.invoke(app, ["agents", "revoke", "fixer"]).exit_code == 0
    again = runner.invoke(app, ["agents", "show", "fixer", "--json"])
    assert json.loads(again.output)["status"] == "needs approval"
    assert runner.invoke(app, ["agents", "revoke", "fixer"]).exit_code == 1


def test_an_unknown_or_broken_definition_is_a_clear_error(places: tuple[Path, Path]) -> None:
    runner = CliRunner()
    unknown = runner.invoke(app, ["agents", "show", "nope"])
    assert unknown.exit_code == 2
    assert "no agent definition named 'nope'" in unknown.output
    broken = runner.invoke(app, ["agents", "show", "bad"])
    assert broken.exit_code == 2
    assert "'description' must be a non-empty string" in broken.output
