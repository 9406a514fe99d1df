"""One error tree: every lemon_core error derives from LemonCoreError, and the drawings of the
tree in the ``errors.py`` docstrings list every class with its real parent and mixins.

lemon_core cannot use lemon_platform_test's ``ErrorTreeContract`` (the kit depends on
lemon_core), so this is the same check, kept small.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from types import ModuleType

import pytest

from lemon_core.errors import LemonCoreError

PACKAGE = "lemon_core"
ROOT = LemonCoreError
_NODE = re.compile(
    r"^(?P<rails>(?:[│ ]   )*)(?:(?P<branch>[├└]── ))?(?P<name>[A-Za-z_]\w*)"
    r"(?:\s+\((?P<mixins>[\w., ]+)\))?(?:\s{2,}.*)?$"
)


def _modules() -> list[ModuleType]:
    top = importlib.import_module(PACKAGE)
    infos = pkgutil.walk_packages(top.__path__, f"{PACKAGE}.")
    return [top, *(importlib.import_module(i.name) for i in infos)]


def _errors() -> dict[str, type[BaseException]]:
    found = {
        obj
        for module in _modules()
        for obj in vars(module).values()
        if inspect.isclass(obj)
        and issubclass(obj, BaseException)
        and obj.__module__ == module.__name__
    }
    by_name = {cls.__name__: cls for cls in found}
    assert len(by_name) == len(found), "two errors share a name: the drawing cannot tell them apart"
    return by_name


def _drawn(doc: str | None) -> dict[str, tuple[str | None, frozenset[str]]]:
    """name -> (drawn parent, drawn mixins) of the one tree drawn in ``doc``."""
    lines = (doc or "").split("::\n", 1)[-1].splitlines()
    body = [line for line in lines if line.strip()]
    body = body[: next((i for i, ln in enumerate(body) if not ln[:1].isspace()), len(body))]
    assert body, "no tree drawn (an indented `::` block)"
    indent = len(body[0]) - len(body[0].lstrip())
    nodes: dict[str, tuple[str | None, frozenset[str]]] = {}
    stack: list[str] = []
    for line in body:
        match = _NODE.match(line[indent:].rstrip())
        assert match, f"not a tree line: {line!r}"
        depth = len(match["rails"]) // 4 + 1 if match["branch"] else 0
        assert depth <= len(stack), f"drawn deeper than its parent allows: {line!r}"
        assert depth or not stack, f"a second top node: {line!r}"
        assert match["name"] not in nodes, f"drawn twice: {match['name']}"
        del stack[depth:]
        mixins = frozenset(m.strip() for m in (match["mixins"] or "").split(",") if m.strip())
        nodes[match["name"]] = (stack[-1] if stack else None, mixins)
        stack.append(match["name"])
    return nodes


def _check(module: ModuleType, errors: dict[str, type[BaseException]]) -> set[str]:
    drawn = _drawn(module.__doc__)
    for name, (parent, mixins) in drawn.items():
        assert name in errors, f"{module.__name__} draws {name}, which is not defined"
        if parent is not None:
            bases = {b.__name__ for b in errors[name].__bases__} - {"Exception"}
            assert parent in bases, f"{module.__name__}: {name} is not a {parent}"
            assert mixins == bases - {parent}, f"{module.__name__}: mixins of {name}"
    return set(drawn)


def test_every_core_error_derives_from_lemon_core_error() -> None:
    strays = [name for name, cls in _errors().items() if not issubclass(cls, ROOT)]
    assert not strays


def test_the_core_errors_module_draws_every_error() -> None:
    errors = _errors()
    module = importlib.import_module(ROOT.__module__)
    drawn = _check(module, errors)
    assert next(iter(_drawn(module.__doc__))) == ROOT.__name__
    assert sorted(set(errors) - drawn) == []


@pytest.mark.parametrize(
    "module",
    [m for m in _modules() if m.__name__.endswith(".errors")],
    ids=lambda m: m.__name__,
)
def test_each_errors_module_draws_its_own_errors(module: ModuleType) -> None:
    errors = _errors()
    own = {name for name, cls in errors.items() if cls.__module__ == module.__name__}
    assert sorted(own - _check(module, errors)) == []


def test_the_stdlib_mixins_still_catch_core_errors() -> None:
    from lemon_core.config import ConfigError
    from lemon_core.execution import (
        CapabilityConflictError,
        CapabilityMissingError,
        ExecutionContractError,
        RouterUnavailableError,
    )
    from lemon_core.store import StoreValueError

    assert issubclass(ConfigError, ValueError)
    assert issubclass(ExecutionContractError, ValueError)
    assert issubclass(StoreValueError, ValueError)
    assert issubclass(CapabilityMissingError, LookupError)
    assert issubclass(CapabilityConflictError, RuntimeError)
    assert issubclass(RouterUnavailableError, RuntimeError)
