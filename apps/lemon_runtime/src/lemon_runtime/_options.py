"""Per-process options every app of a daemon may read (``runtime.option(DaemonWorkspace)``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DaemonWorkspace"]


@dataclass(frozen=True, kw_only=True, slots=True)
class DaemonWorkspace:
    """The directory the daemon serves (``lemon serve --cwd``, default the current one): the
    workspace of every session that has none of its own, whatever its ingress (control plane,
    channels, webhooks, cron). ``path`` is a real path (``lemon_core.cwd.resolve_cwd``)."""

    path: str
