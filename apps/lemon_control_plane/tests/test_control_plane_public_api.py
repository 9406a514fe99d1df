"""The import surface and the runtime hook."""

from __future__ import annotations

import pytest

import lemon_control_plane
from lemon_control_plane import ERROR_CODES, ControlPlane, ControlPlaneError, WireError
from lemon_runtime import discover_apps, resolve_profile


def test_all_names_are_defined_and_sorted() -> None:
    for name in lemon_control_plane.__all__:
        assert hasattr(lemon_control_plane, name)
    names = lemon_control_plane.__all__

    def kind(name: str) -> tuple[int, str]:  # constants, classes, functions (ruff's order)
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert sorted(names, key=kind) == names


def test_the_daemon_profile_boots_the_pipeline_then_the_control_plane() -> None:
    apps = discover_apps()
    assert "lemon_control_plane" in apps
    order = [a.name for a in resolve_profile("daemon", apps)]
    assert {"coding_agent", "lemon_gateway", "lemon_router"} <= set(order)
    # After the whole pipeline (only its own clients, such as lemon_web, come later).
    pipeline = ("coding_agent", "lemon_gateway", "lemon_router")
    assert order.index("lemon_control_plane") > max(order.index(n) for n in pipeline)
    assert "lemon_control_plane" not in [a.name for a in resolve_profile("full", apps)]


def test_the_wire_has_the_reference_error_codes() -> None:
    assert len(ERROR_CODES) == 15
    assert WireError("CONFLICT", "x").body() == {"code": "CONFLICT", "message": "x"}
    assert WireError("INTERNAL_ERROR", "y", None).body() == {
        "code": "INTERNAL_ERROR",
        "message": "y",
        "details": None,
    }


async def test_a_control_plane_starts_once(daemon: ControlPlane) -> None:
    with pytest.raises(ControlPlaneError, match="starts once"):
        await daemon.__aenter__()
