"""``[router]``: the router's config section (declared here, named on its AppSpec)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Final

import msgspec

from lemon_core.config import Section

__all__ = ["RouterSection"]


class RouterSection(Section, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[router]``: sessions and queue modes (the README's "Configuration" documents it).

    ``lease_ttl_s``: with sessions shared across daemons (a PostgreSQL store), how long a
    session's owner lease outlives its last renewal (renewed every third of it): how soon
    another daemon takes a dead or paused daemon's sessions over. Unused on one machine.
    """

    lease_ttl_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 15.0


#: The config sections this app owns, by name: what the ``lemon.config`` entry point names (the
#: loader reads it without importing the rest of the app), the same as its ``AppSpec`` declares.
SECTIONS: Final[Mapping[str, type[Section]]] = {"router": RouterSection}
