"""Fetching a skill from a git repository: a shallow clone in which nothing runs.

The clone runs with hooks pointed at ``/dev/null``, no submodules, the LFS filters disabled
(so no filter program runs on checkout), ``protocol.ext`` forbidden, no terminal prompts, and
a deadline. The checkout is then *copied* (links as links, ``.git`` left out) into the
destination: only bytes of the repository reach it, and nothing of it is executed.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Final

from lemon_skills.bundle import BundleLimits, copy_bundle
from lemon_skills.errors import SkillSourceError

__all__ = ["git_fetch"]

_SAFE_CONFIG: Final = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "protocol.ext.allow=never",
    "-c", "filter.lfs.smudge=",
    "-c", "filter.lfs.process=",
    "-c", "filter.lfs.required=false",
    "-c", "submodule.recurse=false",
    "-c", "advice.detachedHead=false",
)  # fmt: skip
_MAX_STDERR: Final = 800


def _git(args: list[str], *, timeout: float, cwd: Path | None = None) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_LFS_SKIP_SMUDGE": "1", "LC_ALL": "C"}
    try:
        done = subprocess.run(
            ["git", *_SAFE_CONFIG, *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        raise SkillSourceError("git is not installed; install git to fetch git sources") from None
    except subprocess.TimeoutExpired:
        raise SkillSourceError(f"git {args[0]} took longer than {timeout:g}s; gave up") from None
    if done.returncode != 0:
        detail = done.stderr.strip()[-_MAX_STDERR:] or f"exit code {done.returncode}"
        raise SkillSourceError(f"git {args[0]} failed: {detail}")
    return done.stdout


def git_fetch(
    url: str,
    dest: Path,
    *,
    ref: str | None = None,
    subdir: str | None = None,
    timeout: float = 120.0,
    limits: BundleLimits | None = None,
) -> str:
    """Copy the skill at ``subdir`` (default: the top) of ``url`` (branch or tag ``ref``,
    default the remote's HEAD) into the new directory ``dest``; returns the commit."""
    with tempfile.TemporaryDirectory(prefix="clone-", dir=dest.parent) as scratch:
        repo = Path(scratch) / "repo"
        branch = ["--branch", ref] if ref else []
        _git(
            [
                "clone",
                "--depth",
                "1",
                "--no-recurse-submodules",
                "--quiet",
                *branch,
                "--",
                url,
                str(repo),
            ],
            timeout=timeout,
        )
        commit = _git(["rev-parse", "HEAD"], cwd=repo, timeout=timeout).strip()
        source = repo
        if subdir:
            source = repo / subdir
            resolved = source.resolve()
            if repo.resolve() not in resolved.parents or source.is_symlink():
                raise SkillSourceError(f"{url}: {subdir!r} is not a directory of the repository")
            if not source.is_dir():
                raise SkillSourceError(f"{url} (commit {commit[:12]}) has no directory {subdir}")
        copy_bundle(source, dest, limits)
        return commit
