"""Walking the workspace tree: one iterative ``os.scandir`` walk, no symlinks followed.

Skipped everywhere: hidden entries (``.git``, ``.venv``, caches), ``__pycache__``,
``node_modules``, ``*.egg-info`` at any depth, and the policy's
``[scan] exclude`` paths (relative to the root, a path excludes itself and everything below).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

_SKIP_DIRS = frozenset({"__pycache__", "node_modules"})


def walk_files(
    root: str, start: str, exclude: frozenset[str]
) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """Yield ``(relative posix path, entry)`` for every regular file under ``root/start``."""
    base = os.path.join(root, start) if start else root
    if not os.path.isdir(base):
        return
    stack = [(base, start)]
    while stack:
        path, rel = stack.pop()
        try:
            it = os.scandir(path)
        except OSError:
            continue
        with it:
            for entry in it:
                name = entry.name
                if name.startswith("."):
                    continue
                erel = f"{rel}/{name}" if rel else name
                if entry.is_dir(follow_symlinks=False):
                    if name in _SKIP_DIRS or name.endswith(".egg-info") or erel in exclude:
                        continue
                    stack.append((entry.path, erel))
                elif entry.is_file(follow_symlinks=False) and erel not in exclude:
                    yield erel, entry
