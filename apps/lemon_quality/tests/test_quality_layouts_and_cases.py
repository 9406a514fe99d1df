"""Layouts beyond src/ (flat, renamed distribution, namespace packages, explicit policy
packages) and behaviours proved by one overlay each: every fixture proves exactly its finding."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lemon_quality import run_checks

FIXTURES = Path(__file__).resolve().parent / "fixtures"
LAYOUTS = FIXTURES / "layouts"
CASES = FIXTURES / "cases"


def materialise(dest: Path) -> Path:
    """A fresh copy of the clean fixture workspace."""
    return shutil.copytree(FIXTURES / "valid", dest)


# layout -> (the one undeclared reference it hides: app, path, line; source files scanned)
LAYOUT_EXPECTED = {
    "flat": ("beta", "packages/beta/beta/__init__.py", 1),
    "renamed_distribution": ("clai", "clai/clai/__init__.py", 1),
    "namespace": (
        "livekit_plugins_openai",
        "plugins/livekit-plugins-openai/livekit/plugins/openai/__init__.py",
        1,
    ),
    "policy_packages": ("tool", "apps/tool/src/tool/__init__.py", 1),
    "root_member": ("rootpkg", "rootpkg/__init__.py", 1),
}

CASE_EXPECTED: dict[str, list[str]] = {
    "source_cycle_through_exception": ["dependency_cycle"],
    "role_on_reference_only": ["role_violation"],
    # top/__init__ may import mid.lazy; top.client, named by from_modules, may not.
    "scoped_client_reference": ["forbidden_reference"],
    "member_path_source": ["workspace_source"],
    "dynamic_setuptools_file": [],
    "dynamic_hatch_requirements": [],
    # base -> top directly, and through kit and mid: three cycles, and core may not depend on top.
    "dynamic_extra_cycle": [*["dependency_cycle"] * 3, "role_violation"],
}


def test_every_layout_and_case_fixture_has_an_expectation() -> None:
    assert {p.name for p in LAYOUTS.iterdir()} == set(LAYOUT_EXPECTED)
    assert {p.name for p in CASES.iterdir()} == set(CASE_EXPECTED)


@pytest.mark.parametrize("name", sorted(LAYOUT_EXPECTED))
def test_a_layout_is_scanned_and_its_one_violation_found(name: str, tmp_path: Path) -> None:
    root = shutil.copytree(LAYOUTS / name, tmp_path / name)
    report = run_checks(root, use_cache=False)
    app, path, line = LAYOUT_EXPECTED[name]
    assert [(f.code, f.app, f.path, f.line) for f in report.findings] == [
        ("undeclared_reference", app, path, line)
    ], [f.message for f in report.findings]
    assert report.statistics["source_files"] == 2


def test_the_namespace_portion_is_owned_not_the_shared_namespace(tmp_path: Path) -> None:
    root = shutil.copytree(LAYOUTS / "namespace", tmp_path / "ns")
    [finding] = run_checks(root, use_cache=False).findings
    assert "imports livekit_agents" in finding.message


def test_files_outside_the_declared_packages_are_not_source(tmp_path: Path) -> None:
    # policy_packages: apps/core/lib/scratch imports `tool` but is not in packages = [...].
    root = shutil.copytree(LAYOUTS / "policy_packages", tmp_path / "pp")
    paths = {f.path for f in run_checks(root, use_cache=False).findings}
    assert paths == {"apps/tool/src/tool/__init__.py"}


@pytest.mark.parametrize("name", sorted(CASE_EXPECTED))
def test_a_case_fixture_proves_exactly_its_findings(name: str, tmp_path: Path) -> None:
    root = materialise(tmp_path / name)
    shutil.copytree(CASES / name, root, dirs_exist_ok=True)
    report = run_checks(root, use_cache=False)
    assert sorted(f.code for f in report.findings) == CASE_EXPECTED[name], [
        f.message for f in report.findings
    ]


def test_a_cycle_through_reference_only_exceptions_is_found_on_the_source_graph(
    tmp_path: Path,
) -> None:
    root = materialise(tmp_path / "ws")
    shutil.copytree(CASES / "source_cycle_through_exception", root, dirs_exist_ok=True)
    [finding] = run_checks(root, use_cache=False).findings
    assert finding.message == (
        "dependency cycle extra -> top -> extra (in source imports, reference-only "
        "exceptions included)"
    )


def test_a_member_path_source_overrides_the_roots_workspace_source(tmp_path: Path) -> None:
    root = materialise(tmp_path / "ws")
    shutil.copytree(CASES / "member_path_source", root, dirs_exist_ok=True)
    [finding] = run_checks(root, use_cache=False).findings
    assert "its own [tool.uv.sources] gives mid a non-workspace source" in finding.message


def test_members_dot_is_the_root_and_not_a_traceback(tmp_path: Path) -> None:
    root = shutil.copytree(LAYOUTS / "root_member", tmp_path / "rm")
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('["libs/*"]', '[".", "libs/*"]'))
    [finding] = run_checks(root, use_cache=False).findings
    assert (finding.code, finding.app) == ("undeclared_reference", "rootpkg")
