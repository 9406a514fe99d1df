"""The import surface, the error tree, the runtime hook and the gateway-free imports."""

from __future__ import annotations

import ast
from pathlib import Path

import lemon_webhooks
from lemon_platform_test.errors_kit import ErrorTreeContract
from lemon_runtime import discover_apps, resolve_profile
from lemon_webhooks.errors import WebhooksError

SRC = Path(lemon_webhooks.__file__).parent


def _kind(name: str) -> tuple[int, str]:  # constants, classes, functions (ruff's order)
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_every_exported_name_is_defined_and_sorted() -> None:
    names = lemon_webhooks.__all__
    assert all(hasattr(lemon_webhooks, name) for name in names)
    assert sorted(names, key=_kind) == names


class TestWebhooksErrorTree(ErrorTreeContract):
    package = "lemon_webhooks"
    root = WebhooksError


def test_the_app_boots_before_the_gateway_wherever_the_gateway_boots() -> None:
    apps = discover_apps()
    assert apps["lemon_webhooks"] is lemon_webhooks.lemon_webhooks_app
    for profile in ("daemon", "full", "execution-only"):
        order = [a.name for a in resolve_profile(profile, apps)]
        assert order.index("lemon_webhooks") < order.index("lemon_gateway"), profile


def test_no_module_imports_the_gateway_or_the_router_or_reads_the_environment_for_faults() -> None:
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(("lemon_gateway", "lemon_router")), path
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith(("lemon_gateway", "lemon_router")), path
        assert "LEMON_WEBHOOK_FAULT" not in path.read_text(encoding="utf-8"), path


def test_the_production_app_has_no_fault_points() -> None:
    # the entry point's app is webhooks_app() with no faults; a test passes its own
    assert lemon_webhooks.lemon_webhooks_app.name == "lemon_webhooks"
    assert lemon_webhooks.lemon_webhooks_app.before == ("lemon_gateway",)
