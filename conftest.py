"""Workspace-wide test settings (pytest finds this file above every app's tests).

Hypothesis: no per-example deadline anywhere (a shared 2-core CI machine makes wall-clock
deadlines flaky, and our races are tested with barriers, not timing). Under CI (``CI`` set) the
search is derandomized so a landing gate is reproducible; locally every run explores new examples.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "lemon", deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("lemon-ci", parent=settings.get_profile("lemon"), derandomize=True)
settings.load_profile("lemon-ci" if os.environ.get("CI") else "lemon")
