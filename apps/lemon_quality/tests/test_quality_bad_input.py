"""Bad input is a finding or a usage error (exit 2, and a JSON document under --format json),
never a traceback: pathological files, symlink loops, member globs outside the root, a cache
of the wrong shape, bad flags, oversized files, templates and heading attributes."""

from __future__ import annotations

import json
import marshal
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from lemon_quality import _cache, main, run_checks
from lemon_quality._facts import extract

Factory = Callable[[str | None], Path]
DEEP = ("x = " + " + ".join(["1"] * 20_000) + "\n").encode()


def test_a_20000_term_expression_is_a_finding_not_a_recursion_error() -> None:
    imports, hacks, error = extract(DEEP)[:3]
    assert (imports, hacks) == ((), ())
    assert error == ("too deeply nested to parse (RecursionError)", 1)


def test_a_deep_expression_is_a_syntax_finding_in_the_serial_path(workspace: Factory) -> None:
    root = workspace(None)
    (root / "apps/extra/src/extra/deep.py").write_bytes(DEEP)
    [finding] = run_checks(root, use_cache=False).findings
    assert (finding.code, finding.path) == ("syntax_error", "apps/extra/src/extra/deep.py")
    assert "RecursionError" in finding.message


def test_a_deep_expression_is_a_syntax_finding_in_the_pool_path(
    workspace: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = workspace(None)
    (root / "apps/extra/src/extra/deep.py").write_bytes(DEEP)
    monkeypatch.setattr(_cache, "PARALLEL_THRESHOLD", 1)
    report = run_checks(root, use_cache=False)
    assert report.statistics["workers"] >= 1
    assert [f.code for f in report.findings] == ["syntax_error"]


def test_a_link_to_a_symlink_loop_is_a_broken_link(workspace: Factory) -> None:
    root = workspace(None)
    os.symlink("loop_b", root / "docs/loop_a")
    os.symlink("loop_a", root / "docs/loop_b")
    with (root / "docs/guide.md").open("a") as fh:
        fh.write("\nSee [the loop](loop_a).\n")
    [finding] = run_checks(root, use_cache=False).findings
    assert finding.code == "broken_link"
    assert "symlink loop" in finding.message


@pytest.mark.parametrize(
    ("members", "word"), [('["/srv/*"]', "absolute"), ('["../*"]', "leaves the workspace root")]
)
def test_member_globs_outside_the_root_are_refused_with_exit_2_and_json(
    members: str, word: str, workspace: Factory, capsys: pytest.CaptureFixture[str]
) -> None:
    root = workspace(None)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace('members = ["apps/*"]', f"members = {members}")
    )
    assert main(["check", "--root", str(root), "--no-cache", "--format", "json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False
    assert word in doc["error"]


def _cache_file(root: Path) -> Path:
    path = Path(_cache.FactsCache(str(root), enabled=False)._file)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _entry_for(root: Path, rel: str) -> tuple[int, int, str]:
    st = (root / rel).stat()
    return (st.st_size, st.st_mtime_ns, "h")


@pytest.mark.parametrize("digest", [False, True])
@pytest.mark.parametrize(
    "shape",
    [
        "not marshal",
        "empty",
        "index is a list",
        "facts are an int",
        "stat entry is an int",
        "a later entry is wrong",
    ],
)
def test_a_cache_file_of_the_wrong_shape_is_dropped(
    workspace: Factory, shape: str, digest: bool
) -> None:
    import hashlib

    root = workspace(None)
    rel = "apps/base/src/base/__init__.py"
    body = {
        "not marshal": b"not marshal at all",
        "empty": b"",
        "index is a list": marshal.dumps((_cache._KEY, [], {})),
        "facts are an int": marshal.dumps((_cache._KEY, {rel: _entry_for(root, rel)}, {"h": 5})),
        "stat entry is an int": marshal.dumps((_cache._KEY, {rel: 7}, {})),
        # The first entries are well formed, a later one is not (only a sample is checked
        # on load; every lookup checks its own entry).
        "a later entry is wrong": marshal.dumps(
            (
                _cache._KEY,
                {"apps/a.py": (1, 2, "ok"), rel: _entry_for(root, rel), "apps/z.py": 3},
                {"ok": ((), (), ("", 0), (), ()), "h": ("short",)},
            )
        ),
    }[shape]
    head = hashlib.blake2b(body, digest_size=16).digest() if digest else b""
    _cache_file(root).write_bytes(head + body)
    report = run_checks(root)
    assert report.findings == ()
    assert report.statistics["stat_hits"] == 0
    assert run_checks(root).statistics["parsed"] == 0  # and a good cache replaces it


def test_json_with_a_bad_flag_still_prints_a_json_document(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["check", "--format", "json", "--bogus"]) == 2
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["ok"] is False
    assert "--bogus" in doc["error"]
    assert "unrecognized arguments" in captured.err


def test_an_oversized_file_is_a_finding_and_is_never_read(
    workspace: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = workspace("oversized_file")
    read: list[str] = []
    real = _cache._read

    def spy(path: str) -> bytes | str:
        read.append(path)
        return real(path)

    monkeypatch.setattr(_cache, "_read", spy)
    [finding] = run_checks(root, use_cache=False).findings
    assert finding.code == "oversized_file"
    assert not any(p.endswith("big.py") for p in read)


def test_heading_attribute_anchors_resolve(workspace: Factory) -> None:
    root = workspace(None)
    (root / "docs/attrs.md").write_text(
        '# Attrs\n\n## Install it {#setup}\n\n## Use {#use .wide}\n\n<span id="here"></span>\n\n'
        "[a](#setup) [b](#install-it) [c](#use) [d](#here)\n"
    )
    assert run_checks(root, use_cache=False).findings == ()


def test_templates_under_src_are_not_syntax_errors(workspace: Factory) -> None:
    root = workspace(None)
    pkg = root / "apps/extra/src/extra"
    (pkg / "settings.py").write_text('NAME = "x"\n{% if debug %}\nDEBUG = True\n{% endif %}\n')
    (pkg / "model.py.jinja").write_text("class {{ name }}:\n    pass\n")
    cookie = pkg / "{{cookiecutter.slug}}"
    cookie.mkdir()
    (cookie / "main.py").write_text("def {{ cookiecutter.func }}():\n    pass\n")
    (pkg / "broken.py").write_text('s = "{{ fine }}"\ndef broken(:\n')
    report = run_checks(root, use_cache=False)
    assert [(f.code, f.path) for f in report.findings] == [
        ("syntax_error", "apps/extra/src/extra/broken.py")
    ]
    assert report.statistics["templates_skipped"] == 2


@pytest.mark.parametrize(
    "text",
    [
        'tool = "x"\n',
        "[tool]\nuv = 3\n",
        '[tool.uv]\nworkspace = "apps/*"\n',
        "[tool.uv.workspace]\nmembers = [1]\n",
        '[tool.uv.workspace]\nmembers = ["apps/*"]\nexclude = "x"\n',
    ],
)
def test_a_root_pyproject_of_the_wrong_shape_is_exit_2_with_json(
    workspace: Factory, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = workspace(None)
    (root / "pyproject.toml").write_text(text)
    assert main(["check", "--root", str(root), "--no-cache", "--format", "json"]) == 2
    assert "pyproject.toml" in json.loads(capsys.readouterr().out)["error"]


@pytest.mark.parametrize(
    "text",
    [
        '[project]\nname = "extra"\ndependencies = "base"\n',
        '[project]\nname = "extra"\ndependencies = ["base"]\noptional-dependencies = 3\n',
        '[project]\nname = "extra"\ndependencies = ["base"]\ndynamic = "dependencies"\n',
        '[project]\nname = "extra"\ndependencies = ["base"]\nentry-points = 1\n',
        '[project]\nname = "extra"\ndependencies = ["base"]\n[tool]\nuv = "x"\n',
        '[project]\nname = "extra"\ndependencies = ["base"]\n[tool.uv.sources]\nbase = 1\n',
        '[project]\nname = "extra"\ndependencies = ["base"]\n[tool.hatch]\nbuild = 2\n'
        '[build-system]\nbuild-backend = "hatchling.build"\n',
        '[project]\nname = "extra"\ndependencies = ["base"]\n[tool.setuptools]\npackages = 5\n'
        '[build-system]\nbuild-backend = "setuptools.build_meta"\n',
        '[project]\nname = "extra"\ndynamic = ["dependencies"]\n[tool.setuptools.dynamic]\n'
        'dependencies = { file = ["../../../../etc/passwd"] }\n',
    ],
)
def test_a_member_pyproject_of_an_odd_shape_is_never_a_traceback(
    workspace: Factory, text: str
) -> None:
    root = workspace(None)
    (root / "apps/extra/pyproject.toml").write_text(text)
    report = run_checks(root, use_cache=False)
    assert report.statistics["apps"] == 5


def test_a_requirements_file_outside_the_workspace_is_refused_not_read(
    workspace: Factory, tmp_path: Path
) -> None:
    root = workspace(None)
    outside = tmp_path / "secret.txt"
    outside.write_text("not-a-dependency\n")
    (root / "apps/base/pyproject.toml").write_text(
        '[project]\nname = "base"\ndynamic = ["dependencies"]\n\n[tool.setuptools.dynamic]\n'
        f'dependencies = {{ file = ["{outside}"] }}\n'
    )
    [finding] = run_checks(root, use_cache=False).findings
    assert finding.code == "unresolved_dynamic_metadata"
    assert "is outside the workspace" in finding.message


def test_a_shared_requirements_file_at_the_root_is_read(workspace: Factory) -> None:
    root = workspace(None)
    (root / "requirements").mkdir()
    (root / "requirements/extra.txt").write_text("base\n")
    (root / "apps/extra/pyproject.toml").write_text(
        '[project]\nname = "extra"\ndynamic = ["dependencies"]\n\n[tool.setuptools.dynamic]\n'
        'dependencies = { file = ["../../requirements/extra.txt"] }\n'
    )
    assert run_checks(root, use_cache=False).findings == ()
