"""Finding an app's import packages the way its build backend would."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from lemon_quality._layout import discover


def _app(root: Path, pyproject: str, files: list[str]) -> tuple[Path, dict[str, Any]]:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(pyproject)
    for rel in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    return root, tomllib.loads(pyproject)


@pytest.mark.parametrize(
    ("pyproject", "files", "packages", "how"),
    [
        (
            '[project]\nname = "x"\n[build-system]\nbuild-backend = "uv_build"\n'
            '[tool.uv.build-backend]\nmodule-name = "acme.core"\nmodule-root = "lib"\n',
            ["lib/acme/core/__init__.py", "lib/acme/other/__init__.py"],
            {"acme.core": "lib/acme/core"},
            "uv_build",
        ),
        (
            '[project]\nname = "x"\n[build-system]\nbuild-backend = "setuptools.build_meta"\n'
            '[tool.setuptools.packages.find]\nwhere = ["source"]\ninclude = ["real*"]\n',
            ["source/real/__init__.py", "source/scratch/__init__.py"],
            {"real": "source/real"},
            "setuptools",
        ),
        (
            '[project]\nname = "x"\n[build-system]\nbuild-backend = "setuptools.build_meta"\n'
            '[tool.setuptools]\npackages = ["one", "one.sub"]\npy-modules = ["solo"]\n'
            '[tool.setuptools.package-dir]\n"" = "src"\n',
            ["src/one/__init__.py", "src/one/sub/__init__.py", "src/solo.py"],
            {"one": "src/one", "solo": "src/solo.py"},
            "setuptools",
        ),
        (
            '[project]\nname = "x"\n[build-system]\nbuild-backend = "pdm.backend"\n'
            '[tool.pdm.build]\npackage-dir = "src"\nincludes = ["src/tool"]\n',
            ["src/tool/__init__.py", "src/other/__init__.py"],
            {"tool": "src/tool"},
            "pdm",
        ),
        (
            '[project]\nname = "x"\n[build-system]\nbuild-backend = "flit_core.buildapi"\n'
            '[tool.flit.module]\nname = "flat_mod"\n',
            ["flat_mod.py"],
            {"flat_mod": "flat_mod.py"},
            "flit",
        ),
        (
            '[project]\nname = "livekit-plugins-openai"\n',
            ["src/livekit/plugins/openai/__init__.py"],
            {"livekit.plugins.openai": "src/livekit/plugins/openai"},
            "discovery",
        ),
        (
            '[project]\nname = "my-tool"\n',
            ["my_tool/__init__.py", "tests/__init__.py", "docs/conf.py"],
            {"my_tool": "my_tool"},
            "discovery",
        ),
        (
            '[project]\nname = "renamed-dist"\n',
            ["other_name/__init__.py", "tests/__init__.py", "{{cookiecutter.x}}/__init__.py"],
            {"other_name": "other_name"},
            "discovery",
        ),
    ],
)
def test_packages_are_found_from_the_backend_configuration_or_by_discovery(
    tmp_path: Path, pyproject: str, files: list[str], packages: dict[str, str], how: str
) -> None:
    app_dir, raw = _app(tmp_path / "app", pyproject, files)
    layout = discover(app_dir, raw, str(raw["project"]["name"]))
    assert (dict(layout.packages), layout.how) == (packages, how)


def test_a_namespace_directory_yields_its_portions_not_itself(tmp_path: Path) -> None:
    app_dir, raw = _app(
        tmp_path / "app",
        '[project]\nname = "x"\n[build-system]\nbuild-backend = "hatchling.build"\n'
        '[tool.hatch.build.targets.wheel]\npackages = ["src/ns"]\n',
        ["src/ns/a/__init__.py", "src/ns/b/mod.py"],
    )
    assert dict(discover(app_dir, raw, "x").packages) == {"ns.a": "src/ns/a", "ns.b": "src/ns/b"}


def test_policy_packages_and_roots_win_over_the_backend(tmp_path: Path) -> None:
    app_dir, raw = _app(
        tmp_path / "app",
        '[project]\nname = "x"\n[build-system]\nbuild-backend = "uv_build"\n',
        ["src/x/__init__.py", "code/engine/__init__.py"],
    )
    layout = discover(app_dir, raw, "x", packages=["engine"], roots=["code"])
    assert (dict(layout.packages), layout.how) == ({"engine": "code/engine"}, "policy")


def test_nothing_found_is_an_empty_layout(tmp_path: Path) -> None:
    app_dir, raw = _app(tmp_path / "app", '[project]\nname = "ghost"\n', ["README.md"])
    assert dict(discover(app_dir, raw, "ghost").packages) == {}
