"""The repository this gate lives in passes its own gate."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lemon_quality import main, run_checks


def test_the_repository_passes_the_gate(repo_root: Path) -> None:
    report = run_checks(repo_root, use_cache=False)
    assert report.failures == (), "\n".join(
        f"{f.code} {f.path}: {f.message}" for f in report.failures
    )
    assert report.statistics["apps"] >= 7
    # The export walker (rule export_list) replaced the per-app `__all__` tests: it must have
    # read the import surfaces of every app (lemon_core alone has several).
    assert report.statistics["export_lists"] >= 15


def test_the_generated_table_is_fresh(repo_root: Path) -> None:
    assert main(["docs", "--check", "--root", str(repo_root)]) == 0


def test_python_dash_m_runs_the_check_by_default(repo_root: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "lemon_quality", "--root", str(repo_root), "--no-cache"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().splitlines()[-1].startswith("lemon quality passed")
