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


def test_the_cwd_is_the_daemons_workspace_for_every_ingress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`lemon serve --cwd D` gives the runtime D as the daemon's workspace (the router starts
    every session without a workspace of its own there: channels and webhooks too), not only
    the control plane's cwd."""
    import lemon_runtime
    from lemon_control_plane import ControlPlaneOptions
    from lemon_core.runtime_errors import RuntimeBootError

    work = tmp_path / "work"
    work.mkdir()
    seen: list[object] = []

    class Refused:
        def __init__(self, **kwargs: object) -> None:
            seen.extend(kwargs["options"])  # type: ignore[call-overload]  # an options list
            raise RuntimeBootError("stop here")

    monkeypatch.setattr(lemon_runtime, "Runtime", Refused)
    result = CliRunner().invoke(
        app, ["serve", "--port", "0", "--cwd", str(work)], env={"LEMON_HOME": str(tmp_path)}
    )
    assert result.exit_code == 2, result.output
    assert lemon_runtime.DaemonWorkspace(path=str(work.resolve())) in seen
    [plane] = [o for o in seen if isinstance(o, ControlPlaneOptions)]
    assert plane.cwd == str(work.resolve())
