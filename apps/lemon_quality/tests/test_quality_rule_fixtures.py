"""Proof that every rule fires: one fixture workspace per rule code, violating only that rule."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from lemon_quality import RULES, main, run_checks


def test_the_valid_workspace_has_no_findings(workspace: Callable[[str | None], Path]) -> None:
    report = run_checks(workspace(None), use_cache=False)
    assert report.findings == ()
    assert report.ok


def test_every_rule_code_has_a_fixture_and_every_fixture_a_rule(rule_fixtures: Path) -> None:
    fixtures = {p.name for p in rule_fixtures.iterdir() if p.is_dir()}
    assert fixtures == set(RULES), (
        f"rules without a fixture: {sorted(set(RULES) - fixtures)}; "
        f"fixtures without a rule: {sorted(fixtures - set(RULES))}"
    )


@pytest.mark.parametrize("code", sorted(RULES))
def test_the_fixture_triggers_its_rule_and_only_it(
    code: str, workspace: Callable[[str | None], Path]
) -> None:
    report = run_checks(workspace(code), use_cache=False)
    assert {f.code for f in report.findings} == {code}, [f.message for f in report.findings]
    assert report.ok is (RULES[code].severity == "warn")


@pytest.mark.parametrize("code", sorted(RULES))
def test_the_exit_code_follows_the_rule_severity(
    code: str, workspace: Callable[[str | None], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = workspace(code)
    expected = 0 if RULES[code].severity == "warn" else 1
    assert main(["check", "--root", str(root), "--no-cache"]) == expected
    out = capsys.readouterr().out
    assert f"[{RULES[code].severity}] {code} " in out


def test_the_readme_documents_every_rule_code_with_its_severity() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for code, rule in RULES.items():
        assert f"| `{code}` | {rule.severity} |" in readme, code
