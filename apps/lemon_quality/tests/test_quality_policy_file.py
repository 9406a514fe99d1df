"""architecture.toml is read strictly: a malformed policy stops the gate with exit code 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from lemon_quality import PolicyError, load_policy, main


def _replace(root: Path, old: str, new: str) -> None:
    path = root / "architecture.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("schema = 1", "schema = 7", "`schema = 1` is required"),
        ('role = "core"', 'role = "kernel"', "apps.base.role is 'kernel', which is not defined"),
        ("allow = []", "allow = []\nalow = []", "unknown key apps.base.alow"),
        (
            'reason = "a runtime probe loads extra when it is installed"',
            'reason = " "',
            "must say why",
        ),
        ('may_depend_on = ["core"]', 'may_depend_on = ["nope"]', "undefined role 'nope'"),
        ('module = "mid.registry"', 'module = "mid/registry"', "dotted module name"),
        ("test_only = true", 'test_only = "yes"', "test_only must be true or false"),
        ("schema = 1", "schema = 1\n[[[", "cannot read it"),
    ],
)
def test_a_malformed_policy_is_a_policy_error_that_says_what_to_fix(
    workspace: Callable[[str | None], Path],
    capsys: pytest.CaptureFixture[str],
    old: str,
    new: str,
    expected: str,
) -> None:
    root = workspace(None)
    _replace(root, old, new)
    with pytest.raises(PolicyError, match=r"architecture\.toml"):
        load_policy(root)
    assert main(["check", "--root", str(root)]) == 2
    assert expected in capsys.readouterr().err


def test_a_missing_policy_file_is_exit_2_with_json_error(
    workspace: Callable[[str | None], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = workspace(None)
    (root / "architecture.toml").unlink()
    assert main(["check", "--root", str(root), "--format", "json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "lemon_quality.report"
    assert doc["version"] == 1
    assert doc["ok"] is False
    assert "architecture.toml not found" in doc["error"]


def test_a_root_without_pyproject_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--root", str(tmp_path)]) == 2
    assert "no pyproject.toml" in capsys.readouterr().err


def test_the_real_policy_loads_with_roles_targets_and_forbidden_references(
    repo_root: Path,
) -> None:
    policy = load_policy(repo_root)
    assert policy.apps["lemon_core"].allow == ()
    assert policy.roles["test_support"].test_only
    assert "lemon_web" in policy.target
    assert any(r.module == "coding_agent" for r in policy.forbidden_references)
    assert "apps/lemon_quality/tests/fixtures" in policy.scan_exclude
