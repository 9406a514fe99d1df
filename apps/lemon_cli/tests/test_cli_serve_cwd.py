"""``lemon serve --cwd``: resolved by lemon_core's one cwd rule; a path that is missing or not a
directory is refused before anything starts, with the same message as ever."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lemon_cli.main import app


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_cwd_that_is_not_a_directory_is_refused(tmp_path: Path, kind: str) -> None:
    work = tmp_path / kind
    if kind == "file":
        work.write_text("not a directory")
    result = CliRunner().invoke(
        app, ["serve", "--port", "0", "--cwd", str(work)], env={"LEMON_HOME": str(tmp_path)}
    )
    assert result.exit_code == 2, result.output
    assert f"lemon serve: --cwd {work} is not a directory" in result.output
