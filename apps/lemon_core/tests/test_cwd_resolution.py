"""lemon_core.cwd: one rule for a run's working directory (explicit, else the configured
default, else the daemon's workspace; real paths; a clear error for a missing or non-directory
path), and containment on real paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lemon_core.cwd import CwdError, default_cwd, is_within, real_path, resolve_cwd
from lemon_core.errors import LemonCoreError

_SEGMENT = st.sampled_from(["a", "b", "c", ".", "..", "link"])


def test_explicit_then_default_then_workspace(tmp_path: Path) -> None:
    explicit, default, workspace = (tmp_path / n for n in ("explicit", "default", "workspace"))
    for d in (explicit, default, workspace):
        d.mkdir()
    assert resolve_cwd(str(explicit), default=str(default), workspace=str(workspace)) == str(
        explicit
    )
    assert resolve_cwd("  ", default=str(default), workspace=str(workspace)) == str(default)
    assert resolve_cwd(None, default="", workspace=str(workspace)) == str(workspace)
    assert resolve_cwd(None) == os.path.realpath(os.getcwd())


def test_tilde_relative_and_symlinks_become_the_real_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert resolve_cwd("~/link") == str(target)
    assert resolve_cwd("link/../target") == str(target)
    assert resolve_cwd(str(tmp_path / "link")) == str(target)


def test_a_missing_or_non_directory_cwd_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(CwdError, match=f"working directory {missing} does not exist") as info:
        resolve_cwd(str(missing))
    assert isinstance(info.value, LemonCoreError)
    assert isinstance(info.value, ValueError)
    assert (info.value.path, info.value.problem) == (str(missing), "does not exist")
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(CwdError, match="is not a directory"):
        resolve_cwd(None, default=str(file))
    # Unchecked: resolved only (the executor reports the missing directory as the run's).
    assert resolve_cwd(str(missing), check=False) == str(missing)


def test_the_engines_default_falls_back_to_home_then_the_process_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configured = tmp_path / "configured"
    configured.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert default_cwd(str(configured)) == str(configured)
    assert default_cwd(str(tmp_path / "missing")) == str(home)
    assert default_cwd(None) == str(home)
    monkeypatch.setenv("HOME", str(tmp_path / "no-home"))
    monkeypatch.chdir(configured)
    assert default_cwd(None) == str(configured)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """root/{a,b,c}/{a,b,c} with root/link -> root/b and root/a/link -> root (a cycle)."""
    root = tmp_path_factory.mktemp("tree")
    for first in "abc":
        for second in "abc":
            (root / first / second).mkdir(parents=True)
    (root / "link").symlink_to(root / "b")
    (root / "a" / "link").symlink_to(root)
    return root


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(_SEGMENT, max_size=6))
def test_resolution_is_real_idempotent_and_containment_agrees(tree: Path, parts: list[str]) -> None:
    raw = os.path.join(str(tree), *parts)
    if not os.path.isdir(os.path.realpath(raw)):  # refused, naming the real path
        with pytest.raises(CwdError) as info:
            resolve_cwd(raw)
        assert info.value.path == os.path.realpath(raw)
        return
    resolved = resolve_cwd(raw)
    # Absolute, real (no symlink, no '.' or '..' left), a directory, a fixed point.
    assert os.path.isabs(resolved)
    assert resolved == os.path.realpath(resolved) == real_path(resolved)
    assert os.path.isdir(resolved)
    assert resolve_cwd(resolved) == resolved
    assert resolve_cwd(None, default=raw) == resolved
    # Containment is decided on real paths: whatever the spelling of path and root.
    real_root = os.path.realpath(tree)
    inside = resolved == real_root or resolved.startswith(real_root + os.sep)
    assert is_within(raw, str(tree)) is inside
    assert is_within(raw, os.path.join(str(tree), "a", "link")) is inside  # root via a link
    assert is_within(resolved, resolved)


def test_containment_is_not_a_string_prefix(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "workshop").mkdir()
    assert is_within(str(tmp_path / "work" / "x"), str(tmp_path / "work"))
    assert not is_within(str(tmp_path / "workshop"), str(tmp_path / "work"))
    assert is_within(str(tmp_path / "work" / ".." / "workshop"), str(tmp_path))
