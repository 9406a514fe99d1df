"""``lemon quality init``: a first ``architecture.toml`` for a tree that has none.

The file allows exactly the app-to-app edges the member ``pyproject.toml`` files declare today
(so the edge rules pass at once) and guesses each app's role from the graph, marked ``# review``:
``core`` (depends on no app), ``product`` (no app depends on it), ``library`` (the rest). The
roles are layered so the guess breaks no role rule: core <- library <- product. The generated
policy table is written too. Findings in source (undeclared references, third-party imports)
remain: record them with ``--baseline write`` and burn them down.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from lemon_quality import boundaries_doc
from lemon_quality.errors import UsageError
from lemon_quality.policy import POLICY_FILE, load_policy
from lemon_quality.workspace import load_workspace

_ROLES = """\
[roles.core]
description = "Depends on no app. (guessed by `lemon quality init`: review)"
may_depend_on = []

[roles.library]
description = "Used by other apps. (guessed by `lemon quality init`: review)"
may_depend_on = ["core", "library"]

[roles.product]
description = "No app depends on it. (guessed by `lemon quality init`: review)"
may_depend_on = ["core", "library", "product"]
"""


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def render_init(root: Path) -> str:
    """The text of a first policy for the workspace at ``root``."""
    ws = load_workspace(root)
    apps = {a.name: a for a in ws.apps if a.pyproject_error is None}
    edges = {
        name: sorted({d.name for d in app.dependencies if d.name in apps and d.name != name})
        for name, app in apps.items()
    }
    used_by = {name for deps in edges.values() for name in deps}
    lines = [
        "# The architecture policy, written by `lemon quality init`: the exact current edges.",
        "# Every role is a guess from the graph: review each line marked `# review`.",
        "schema = 1",
        "",
        "[scan]",
        "exclude = []",
        "",
        _ROLES,
    ]
    for name in sorted(apps):
        role = "core" if not edges[name] else "library" if name in used_by else "product"
        lines += [
            f"[apps.{name}]",
            f'role = "{role}"  # review',
            f"allow = {_toml_list(edges[name])}",
            "",
        ]
    return "\n".join(lines)


def write_init(root: Path, *, force: bool = False) -> Path:
    """Write ``architecture.toml`` (refusing to overwrite one unless ``force``) and the table."""
    path = root / POLICY_FILE
    if path.exists() and not force:
        raise UsageError(f"{POLICY_FILE} already exists at {root}; pass --force to replace it")
    text = render_init(root)
    tmp = path.with_name(f"{POLICY_FILE}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    policy = load_policy(root)
    boundaries_doc.write(load_workspace(root, policy), policy)
    return path
