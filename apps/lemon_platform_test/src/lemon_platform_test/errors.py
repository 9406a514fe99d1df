"""The error hierarchy of lemon_platform_test (the errors its kits and fakes raise)::

    PlatformTestError
    ├── LaunchError (RuntimeError)                lemon_platform_test.executor: a scripted failure
    ├── ErrorTreeDrawingError (AssertionError)    lemon_platform_test.errors_kit: a bad drawing
    └── _CutConnection                            providers._server: drops the connection

A test (``test_platform_error_tree.py``) keeps this drawing equal to the classes.
"""

from __future__ import annotations

__all__ = ["PlatformTestError"]


class PlatformTestError(Exception):
    """Base class of every error raised by lemon_platform_test."""
