"""The facts cache: warm runs read no source, edits invalidate, the pool agrees with one process."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lemon_quality import run_checks
from lemon_quality._cache import CACHE_DIR, PARALLEL_THRESHOLD

VALID = Path(__file__).resolve().parent / "fixtures" / "valid"


def _age_tree(root: Path) -> None:
    """Backdate every file so that no mtime falls in the racy window of the cache."""
    old = time.time() - 60
    for path in root.rglob("*.py"):
        os.utime(path, (old, old))


def test_a_warm_run_takes_every_file_from_the_stat_index(
    workspace: Callable[[str | None], Path],
) -> None:
    root = workspace(None)
    _age_tree(root)
    cold = run_checks(root)
    assert cold.statistics["parsed"] == cold.statistics["source_files"] > 0
    assert (root / CACHE_DIR).is_dir()
    warm = run_checks(root)
    assert warm.statistics["parsed"] == 0
    assert warm.statistics["hash_hits"] == 0
    assert warm.statistics["stat_hits"] == warm.statistics["source_files"]
    assert warm.findings == cold.findings == ()


def test_an_edit_is_seen_on_the_next_run(workspace: Callable[[str | None], Path]) -> None:
    root = workspace(None)
    _age_tree(root)
    run_checks(root)
    target = root / "apps/extra/src/extra/__init__.py"
    target.write_text(target.read_text() + "from mid import lazy\n")
    report = run_checks(root)
    assert report.statistics["parsed"] == 1
    assert [f.code for f in report.findings] == ["undeclared_reference"]


def test_a_touched_but_unchanged_file_is_recognised_by_its_hash(
    workspace: Callable[[str | None], Path],
) -> None:
    root = workspace(None)
    _age_tree(root)
    run_checks(root)
    target = root / "apps/mid/src/mid/lazy.py"
    os.utime(target, (time.time() - 30, time.time() - 30))
    report = run_checks(root)
    assert report.statistics["parsed"] == 0
    assert report.statistics["hash_hits"] == 1


def test_files_modified_just_now_are_rehashed_rather_than_trusted(
    workspace: Callable[[str | None], Path],
) -> None:
    root = workspace(None)
    for path in root.rglob("*.py"):
        os.utime(path)  # now: inside the racy window of the save that follows
    run_checks(root)
    report = run_checks(root)
    assert report.statistics["stat_hits"] == 0
    assert report.statistics["parsed"] == 0
    assert report.statistics["hash_hits"] == report.statistics["source_files"]


def test_a_corrupt_cache_is_ignored(workspace: Callable[[str | None], Path]) -> None:
    root = workspace(None)
    run_checks(root)
    for path in (root / CACHE_DIR).iterdir():
        path.write_bytes(b"\x00garbage")
    report = run_checks(root)
    assert report.findings == ()
    assert report.statistics["parsed"] == report.statistics["source_files"]


def test_no_cache_leaves_no_cache_directory(workspace: Callable[[str | None], Path]) -> None:
    root = workspace(None)
    run_checks(root, use_cache=False)
    assert not (root / CACHE_DIR).exists()


def test_many_files_are_parsed_by_a_process_pool_with_the_same_result(
    workspace: Callable[[str | None], Path],
) -> None:
    root = workspace(None)
    pkg = root / "apps/top/src/top/many"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for i in range(PARALLEL_THRESHOLD + 20):
        (pkg / f"m{i}.py").write_text(f"from mid import lazy\n\nVALUE = {i}\n")
    (pkg / "bad.py").write_text("from base._impl import value\n")
    report = run_checks(root, use_cache=False)
    assert report.statistics["workers"] == (os.cpu_count() or 1)
    assert [(f.code, f.path) for f in report.findings] == [
        ("private_reference", "apps/top/src/top/many/bad.py")
    ]


_EDITS = st.lists(
    st.tuples(
        st.sampled_from(["apps/mid/src/mid/lazy.py", "apps/extra/src/extra/probe.py"]),
        st.sampled_from(
            [
                "from top import probe\n",
                "import msgspec\n",
                "from base import _impl\n",
                "x = 1\n",
                "def f(:\n",
            ]
        ),
        st.booleans(),  # backdate the file (stat index used) or leave it fresh (hash path)
    ),
    min_size=1,
    max_size=4,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(edits=_EDITS)
def test_a_cached_run_always_equals_an_uncached_one(
    tmp_path_factory: pytest.TempPathFactory, edits: list[tuple[str, str, bool]]
) -> None:
    root = tmp_path_factory.mktemp("ws")
    shutil.rmtree(root)
    shutil.copytree(VALID, root)
    _age_tree(root)
    run_checks(root)
    for rel, line, backdate in edits:
        path = root / rel
        path.write_text(path.read_text() + line)
        if backdate:
            old = time.time() - 10
            os.utime(path, (old, old))
        assert run_checks(root).findings == run_checks(root, use_cache=False).findings
