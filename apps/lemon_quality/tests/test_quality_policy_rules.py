"""The rules added for 001: roles on references, deny lists, exports, boot names and entry
points, stale forbidden references, the ``__all__`` walker, the import->distribution map,
the baseline and ``init``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from lemon_quality import Finding, main, run_checks

Factory = Callable[[str | None], Path]


def _findings(root: Path) -> list[Finding]:
    return list(run_checks(root, use_cache=False).findings)


def _edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text, (rel, old)
    path.write_text(text.replace(old, new, 1))


def _append(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.write_text(path.read_text() + text)


def test_a_denied_import_under_type_checking_is_still_denied(workspace: Factory) -> None:
    root = workspace(None)
    _edit(
        root,
        "architecture.toml",
        '[apps.base]\nrole = "core"\nallow = []',
        '[apps.base]\nrole = "core"\nallow = []\ndeny_third_party = ["rich"]',
    )
    (root / "apps/base/src/base/show.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from rich.console import Console\n"
    )
    assert [(f.code, f.line) for f in _findings(root)] == [("denied_third_party", 4)]


def test_exports_accept_listed_modules_and_subtrees(workspace: Factory) -> None:
    root = workspace("unexported_reference")
    [finding] = _findings(root)
    assert finding.message.startswith("`from mid import lazy` uses mid.lazy, which mid does not")
    _edit(root, "architecture.toml", 'exports = ["mid"]', 'exports = ["mid", "mid.lazy"]')
    assert _findings(root) == []
    _edit(root, "architecture.toml", 'exports = ["mid", "mid.lazy"]', 'exports = ["mid.*"]')
    assert _findings(root) == []


def test_an_entry_point_into_another_app_is_a_boot_reference(workspace: Factory) -> None:
    root = workspace(None)
    _append(
        root,
        "apps/extra/pyproject.toml",
        '\n[project.entry-points."lemon.apps"]\nextra = "mid.lazy:later"\n',
    )
    [finding] = _findings(root)
    assert finding.code == "boot_reference"
    assert "points into mid" in finding.message


def test_an_entry_point_to_a_missing_own_module_is_a_boot_reference(workspace: Factory) -> None:
    root = workspace(None)
    _append(
        root,
        "apps/extra/pyproject.toml",
        '\n[project.entry-points."lemon.executor"]\nextra = "extra.gone:Executor"\n',
    )
    [finding] = _findings(root)
    assert (finding.code, finding.line) == ("boot_reference", 7)
    assert "names module extra.gone, which extra does not have" in finding.message


def test_a_boot_exception_permits_the_name_and_goes_stale_without_it(workspace: Factory) -> None:
    root = workspace("boot_reference")
    _append(
        root,
        "architecture.toml",
        '\n[[apps.base.boot_exceptions]]\ntarget = "top"\nreason = "boots after the product"\n',
    )
    assert _findings(root) == []
    (root / "apps/base/src/base/boot.py").unlink()
    [finding] = _findings(root)
    assert finding.code == "boot_reference"
    assert "matches no AppSpec name" in finding.message


def test_an_appspec_name_that_is_no_app_is_a_boot_reference(workspace: Factory) -> None:
    root = workspace("boot_reference")
    _edit(root, "apps/base/src/base/boot.py", 'requires=("top",)', 'before=("ghost",)')
    [finding] = _findings(root)
    assert "AppSpec before names 'ghost', which is no workspace app" in finding.message


@pytest.mark.parametrize(
    ("init", "message"),
    [
        (
            'from base._impl import value\n\n__all__ = ["value", "Value"]\n\n\nclass Value:\n'
            "    pass\n",
            "__all__ is not sorted",
        ),
        (
            'from base._impl import value\n\n__all__ = ["ghost", "value"]\n',
            "__all__ lists names the module does not define: ghost",
        ),
        (
            'from base._impl import value\n\n__all__ = ["value"] + []\n',
            "__all__ is not one literal list of strings",
        ),
        (
            'from base._impl import value\n\nLIMIT = 3\n__all__ = ["value"]\n',
            "public names missing from __all__: LIMIT",
        ),
    ],
)
def test_the_export_walker_wants_literal_sorted_exact_complete(
    workspace: Factory, init: str, message: str
) -> None:
    root = workspace(None)
    (root / "apps/base/src/base/__init__.py").write_text(init)
    [finding] = _findings(root)
    assert finding.code == "export_list"
    assert finding.message.startswith(message), finding.message


@pytest.mark.parametrize(
    "loader",
    [
        "def __getattr__(name: str) -> object:\n    return name\n",
        "__getattr__, __dir__ = make_loader()\n",
    ],
)
def test_a_lazy_facade_may_list_names_its_loader_binds(workspace: Factory, loader: str) -> None:
    # A module __getattr__ (defined, or bound from a helper as lemon_core.facade does) binds
    # names on first use: __all__ may list them.
    root = workspace(None)
    (root / "apps/base/src/base/__init__.py").write_text(
        "def make_loader() -> tuple[object, object]:\n    return (None, None)\n\n\n"
        + loader
        + '\n__all__ = ["Lazy", "make_loader"]\n'
    )
    assert _findings(root) == []


def test_the_export_walker_ignores_private_modules_and_internal_imports(
    workspace: Factory,
) -> None:
    root = workspace(None)
    (root / "apps/base/src/base/_impl.py").write_text(
        "import logging\n\nlog = logging.getLogger()\n__all__ = ['value']\n\n\n"
        "def value() -> int:\n    return 1\n\n\ndef helper() -> int:\n    return 2\n"
    )
    assert _findings(root) == []


def test_a_many_to_many_import_map_in_the_policy_names_its_source(workspace: Factory) -> None:
    root = workspace(None)
    (root / "apps/extra/src/extra/otel.py").write_text("import opentelemetry.trace\n")
    [finding] = _findings(root)
    assert "(mapping from its own name)" in finding.message
    _append(
        root,
        "architecture.toml",
        '\n[apps.extra.import_names]\nopentelemetry = ["opentelemetry-api", "opentelemetry-sdk"]\n',
    )
    [finding] = _findings(root)
    assert "declares none of opentelemetry_api, opentelemetry_sdk" in finding.message
    assert "[apps.extra.import_names]" in finding.message
    _edit(root, "apps/extra/pyproject.toml", '["base"]', '["base", "opentelemetry-sdk"]')
    assert _findings(root) == []


def test_the_workspace_environment_maps_import_names_not_the_running_python(
    workspace: Factory,
) -> None:
    root = workspace(None)
    info = root / ".venv/lib/python3.11/site-packages/Acme_Widgets-2.0.dist-info"
    info.mkdir(parents=True)
    (info / "top_level.txt").write_text("widgets\n")
    (root / "apps/extra/src/extra/conf.py").write_text("import widgets\n")
    [finding] = _findings(root)
    assert "declares none of acme_widgets, widgets (mapping from the workspace environment" in (
        finding.message
    )
    _edit(root, "apps/extra/pyproject.toml", '["base"]', '["base", "acme-widgets"]')
    assert _findings(root) == []
    # With a lock file, only locked distributions map: a stray install maps nothing.
    (root / "uv.lock").write_text('version = 1\n\n[[package]]\nname = "msgspec"\n')
    unused, undeclared = _findings(root)  # sorted by path: pyproject.toml first
    assert "declares none of widgets (mapping from its own name)" in undeclared.message
    assert unused.code == "unused_dependency"
    (root / "uv.lock").write_text('version = 1\n\n[[package]]\nname = "acme-widgets"\n')
    assert _findings(root) == []


def test_well_known_import_names_map_without_an_environment(workspace: Factory) -> None:
    root = workspace(None)
    (root / "apps/extra/src/extra/conf.py").write_text("import yaml\n")
    [finding] = _findings(root)
    assert "declares none of pyyaml (mapping from the built-in table" in finding.message
    _edit(root, "apps/extra/pyproject.toml", '["base"]', '["base", "PyYAML>=6"]')
    assert _findings(root) == []


def test_the_baseline_admits_known_findings_and_fails_new_and_stale_ones(
    workspace: Factory, capsys: pytest.CaptureFixture[str]
) -> None:
    root = workspace("undeclared_reference")
    assert main(["check", "--root", str(root), "--no-cache", "--baseline", "write"]) == 0
    assert "recorded 1 findings in quality_baseline.json" in capsys.readouterr().err
    doc = json.loads((root / "quality_baseline.json").read_text())
    [entry] = doc["entries"]
    assert (entry["code"], entry["app"]) == ("undeclared_reference", "extra")
    assert entry["reason"]
    capsys.readouterr()
    assert main(["check", "--root", str(root), "--no-cache", "--baseline", "check"]) == 0
    assert "0 failing, 0 warnings, 1 baselined" in capsys.readouterr().out
    report = run_checks(root, use_cache=False)
    assert report.ok
    assert report.statistics["baselined"] == 1
    # A new finding fails; the old one stays admitted.
    _append(root, "apps/extra/src/extra/probe.py", "\nimport zz_new_dependency\n")
    assert [f.code for f in run_checks(root, use_cache=False).failures] == [
        "undeclared_third_party"
    ]
    # Fixing the baselined finding makes its entry stale.
    _edit(root, "apps/extra/src/extra/__init__.py", "from mid import lazy\n", "")
    _edit(root, "apps/extra/src/extra/probe.py", "\nimport zz_new_dependency\n", "")
    [stale] = run_checks(root, use_cache=False).findings
    assert stale.code == "stale_baseline"


def test_baseline_check_without_a_file_is_exit_2(
    workspace: Factory, capsys: pytest.CaptureFixture[str]
) -> None:
    root = workspace(None)
    assert main(["check", "--root", str(root), "--baseline", "check"]) == 2
    assert "--baseline write" in capsys.readouterr().err


def test_init_writes_a_policy_with_the_exact_current_edges(
    workspace: Factory, capsys: pytest.CaptureFixture[str]
) -> None:
    root = workspace(None)
    (root / "architecture.toml").unlink()
    assert main(["init", "--root", str(root)]) == 0
    text = (root / "architecture.toml").read_text()
    assert '[apps.top]\nrole = "product"  # review\nallow = ["base", "kit", "mid"]' in text
    assert '[apps.base]\nrole = "core"  # review\nallow = []' in text
    report = run_checks(root, use_cache=False)
    # Edges pass at once; what is left is in source (top's reference to extra).
    assert {f.code for f in report.failures} == {"undeclared_reference"}
    assert main(["check", "init", "--root", str(root)]) == 2  # exists: refuses to overwrite
    assert "--force" in capsys.readouterr().err


def test_an_export_that_names_no_module_is_a_finding(workspace: Factory) -> None:
    root = workspace("unexported_reference")
    _edit(root, "architecture.toml", 'exports = ["mid"]', 'exports = ["mid.*", "mid.gone"]')
    [finding] = _findings(root)
    assert (finding.code, finding.path) == ("unexported_reference", "architecture.toml")
    assert "lists mid.gone, but mid has no such module" in finding.message


def test_a_policy_package_that_is_not_found_is_a_finding(workspace: Factory) -> None:
    root = workspace(None)
    _edit(
        root,
        "architecture.toml",
        '[apps.extra]\nrole = "product"\nallow = ["base"]',
        '[apps.extra]\nrole = "product"\nallow = ["base"]\npackages = ["extra", "extras"]',
    )
    [finding] = _findings(root)
    assert finding.code == "no_source_files"
    assert "lists extras, which is in none of its source roots (src, .)" in finding.message


def test_a_lemon_apps_entry_point_under_another_apps_name_is_a_boot_reference(
    workspace: Factory,
) -> None:
    root = workspace(None)
    _append(
        root,
        "apps/extra/pyproject.toml",
        '\n[project.entry-points."lemon.apps"]\nmid = "extra:value"\n',
    )
    [finding] = _findings(root)
    assert finding.code == "boot_reference"
    assert "registers another app's name" in finding.message
