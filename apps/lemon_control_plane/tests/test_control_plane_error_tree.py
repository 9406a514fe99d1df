"""One error tree: every lemon_control_plane error derives from ControlPlaneError, and the
drawing in ``errors.py`` lists every class with its real parent and mixins."""

from __future__ import annotations

from lemon_control_plane.errors import ControlPlaneError
from lemon_platform_test.errors_kit import ErrorTreeContract


class TestControlPlaneErrorTree(ErrorTreeContract):
    package = "lemon_control_plane"
    root = ControlPlaneError
