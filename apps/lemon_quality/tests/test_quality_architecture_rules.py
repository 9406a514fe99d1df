"""Semantics of the architecture rules beyond the one-fixture-per-rule proof."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lemon_quality import Finding, main, run_checks


def _edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def _findings(root: Path) -> list[Finding]:
    """Findings after regenerating the policy table (edits to edges change it)."""
    assert main(["docs", "--root", str(root)]) == 0
    return list(run_checks(root, use_cache=False).findings)


def test_a_reference_only_exception_never_authorises_a_pyproject_edge(
    workspace: Callable[[str | None], Path],
) -> None:
    root = workspace(None)
    _edit(root, "apps/top/pyproject.toml", '["base", "mid"]', '["base", "extra", "mid"]')
    codes = [f.code for f in _findings(root)]
    assert "forbidden_dependency" in codes
    message = next(f.message for f in _findings(root) if f.code == "forbidden_dependency")
    assert "reference-only exception permits imports, never a pyproject edge" in message


def test_a_dependency_group_edge_does_not_let_src_import_the_app(
    workspace: Callable[[str | None], Path],
) -> None:
    root = workspace(None)
    (root / "apps/top/src/top/uses_kit.py").write_text("import kit\n")
    [finding] = _findings(root)
    assert finding.code == "undeclared_reference"
    assert "only in a dependency group" in finding.message
    assert finding.path == "apps/top/src/top/uses_kit.py"
    assert finding.line == 1


def test_type_checking_imports_still_need_an_edge_but_are_exempt_from_third_party_rules(
    workspace: Callable[[str | None], Path],
) -> None:
    root = workspace(None)
    (root / "apps/base/src/base/typing_only.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import mid\n    import yaml\n"
    )
    assert [(f.code, f.line) for f in _findings(root)] == [("undeclared_reference", 4)]


def test_relative_and_function_local_imports_are_seen(
    workspace: Callable[[str | None], Path],
) -> None:
    root = workspace(None)
    (root / "apps/extra/src/extra/local.py").write_text(
        "from . import probe\n\n\ndef f():\n    from mid import lazy as p\n    return p\n"
    )
    [finding] = _findings(root)
    assert (finding.code, finding.line) == ("undeclared_reference", 5)


def test_the_owner_of_a_reserved_module_may_import_it(
    workspace: Callable[[str | None], Path],
) -> None:
    root = workspace(None)
    (root / "apps/mid/src/mid/uses_registry.py").write_text("from mid.registry import REGISTRY\n")
    assert _findings(root) == []


def test_importing_a_private_name_of_another_app_is_a_private_reference(
    workspace: Callable[[str | None], Path],
) -> None:
    root = workspace(None)
    (root / "apps/mid/src/mid/peek.py").write_text("from base import _impl\n")
    assert [f.code for f in _findings(root)] == ["private_reference"]


def test_every_elementary_cycle_is_reported_once_with_its_path(
    workspace: Callable[[str | None], Path],
) -> None:
    root = workspace(None)
    _edit(root, "apps/base/pyproject.toml", "dependencies = []", 'dependencies = ["top"]')
    _edit(
        root,
        "architecture.toml",
        '[apps.base]\nrole = "core"\nallow = []',
        '[apps.base]\nrole = "core"\nallow = ["top"]',
    )
    # base -> top -> base, and the longer ones through kit (a group edge) and mid inside the
    # same strongly connected component: each once (declared and allowed graphs agree).
    cycles = sorted(f.message for f in _findings(root) if f.code == "dependency_cycle")
    assert cycles == [
        "dependency cycle base -> top -> base (declared in pyproject files)",
        "dependency cycle base -> top -> kit -> base (declared in pyproject files)",
        "dependency cycle base -> top -> mid -> base (declared in pyproject files)",
    ]


def test_a_test_only_role_may_not_be_a_runtime_dependency(
    workspace: Callable[[str | None], Path],
) -> None:
    root = workspace(None)
    _edit(root, "apps/top/pyproject.toml", '["base", "mid"]', '["base", "kit", "mid"]')
    _edit(root, "apps/top/pyproject.toml", 'test = ["kit"]', "test = []")
    [finding] = _findings(root)
    assert finding.code == "role_violation"
    assert "test-only" in finding.message


def test_target_drift_reports_planned_apps_and_extra_edges_without_failing(
    workspace: Callable[[str | None], Path],
) -> None:
    root = workspace(None)
    policy = root / "architecture.toml"
    policy.write_text(
        policy.read_text()
        + '\n[target.top]\nrole = "product"\nallow = ["base", "kit"]\n'
        + '\n[target.future]\nrole = "product"\nallow = ["base"]\n'
    )
    assert main(["docs", "--root", str(root)]) == 0
    report = run_checks(root, use_cache=False)
    assert report.ok
    messages = sorted(f.message for f in report.warnings)
    assert any("planned app future" in m for m in messages)
    assert any("top still depends on mid" in m for m in messages)


def test_a_pth_file_in_app_source_is_path_manipulation(
    workspace: Callable[[str | None], Path],
) -> None:
    root = workspace(None)
    (root / "apps/mid/src/mid/hack.pth").write_text("/somewhere\n")
    [finding] = _findings(root)
    assert (finding.code, finding.path) == ("sys_path_manipulation", "apps/mid/src/mid/hack.pth")


def test_a_third_party_import_name_can_be_mapped_to_its_distribution(
    workspace: Callable[[str | None], Path],
) -> None:
    root = workspace(None)
    _edit(root, "apps/extra/pyproject.toml", '["base"]', '["base", "PyYAML>=6"]')
    (root / "apps/extra/src/extra/conf.py").write_text("import yaml\n")
    policy = root / "architecture.toml"
    policy.write_text(policy.read_text() + '\n[third_party.import_names]\nyaml = "PyYAML"\n')
    assert _findings(root) == []


def test_installed_distributions_map_import_names(
    workspace: Callable[[str | None], Path],
) -> None:
    # typing_extensions is installed in this environment; its import name equals its
    # distribution name only after normalisation, which is the first lookup.
    root = workspace(None)
    _edit(root, "apps/extra/pyproject.toml", '["base"]', '["base", "typing-extensions"]')
    (root / "apps/extra/src/extra/te.py").write_text("import typing_extensions\n")
    assert _findings(root) == []


def test_undeclared_third_party_points_at_the_import(
    workspace: Callable[[str | None], Path],
) -> None:
    root = workspace(None)
    (root / "apps/base/src/base/net.py").write_text("\n\nimport msgspec\n")
    [finding] = _findings(root)
    assert (finding.code, finding.path, finding.line) == (
        "undeclared_third_party",
        "apps/base/src/base/net.py",
        3,
    )
