"""The error-tree contract kit: one root per app, and a drawing of the tree that cannot go stale.

Each app has one root error class in its ``errors.py``; every exception class the app defines
(private ones too) derives from it, and every ``errors.py`` module of the app draws its tree in
its docstring, as an indented literal block::

    GatewayError
    ├── InvalidSubmissionError (TypeError)      what it means (free text)
    └── GatewayNotRunningError

A node's parent in the drawing is one of its direct bases; the names in parentheses are its
other direct bases (``Exception`` is never drawn). The drawing in the root's own module lists
every exception class of the app; the drawing of any other ``errors.py`` lists at least the
classes that module defines (its top node may be any ancestor, e.g. the app root).

Use it by subclassing :class:`ErrorTreeContract` in a test module named ``Test...``::

    class TestGatewayErrorTree(ErrorTreeContract):
        package = "lemon_gateway"
        root = GatewayError

:func:`error_classes` and :func:`parse_error_tree` are the two halves, usable on their own.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass
from types import ModuleType
from typing import ClassVar

from lemon_platform_test.errors import PlatformTestError

__all__ = [
    "DrawnError",
    "ErrorTreeContract",
    "ErrorTreeDrawingError",
    "error_classes",
    "error_modules",
    "parse_error_tree",
    "tree_problems",
]

_NODE = re.compile(
    r"^(?P<rails>(?:[│ ]   )*)(?:(?P<branch>[├└]── ))?(?P<name>[A-Za-z_]\w*)"
    r"(?:\s+\((?P<mixins>[\w., ]+)\))?(?:\s{2,}.*)?$"
)


class ErrorTreeDrawingError(PlatformTestError, AssertionError):
    """A docstring's tree drawing cannot be parsed (the message says which line and why)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class DrawnError:
    """One node of a drawn tree: its name, its drawn parent (None at the top), its mixins."""

    name: str
    parent: str | None
    mixins: frozenset[str]


def _modules(package: str) -> list[ModuleType]:
    top = importlib.import_module(package)
    modules = [top]
    for info in pkgutil.walk_packages(top.__path__, f"{package}."):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue  # importing it would run the program
        modules.append(importlib.import_module(info.name))
    return modules


def error_classes(package: str) -> dict[str, type[BaseException]]:
    """Every exception class defined (not re-exported) in ``package`` and its submodules, by
    qualified name (``module.Class``)."""
    found: dict[str, type[BaseException]] = {}
    for module in _modules(package):
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == module.__name__
            ):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def error_modules(package: str) -> list[ModuleType]:
    """The modules of ``package`` named ``errors`` (``pkg.errors``, ``pkg.store.errors``...)."""
    return [m for m in _modules(package) if m.__name__.rsplit(".", 1)[-1] == "errors"]


def _literal_blocks(doc: str) -> list[list[str]]:
    lines = doc.splitlines()
    blocks: list[list[str]] = []
    i = 0
    while i < len(lines):
        if not lines[i].rstrip().endswith("::"):
            i += 1
            continue
        i += 1
        block: list[str] = []
        while i < len(lines) and (not lines[i].strip() or lines[i][:1].isspace()):
            block.append(lines[i])
            i += 1
        blocks.append(block)
    return blocks


def parse_error_tree(doc: str | None) -> dict[str, DrawnError]:
    """The nodes of the tree drawn in ``doc`` (the first literal block whose lines draw one)."""
    for block in _literal_blocks(doc or ""):
        body = [line for line in block if line.strip()]
        if not body or not any("── " in line for line in body):
            continue
        indent = len(body[0]) - len(body[0].lstrip())
        nodes: dict[str, DrawnError] = {}
        stack: list[str] = []
        for line in body:
            match = _NODE.match(line[indent:].rstrip())
            if match is None:
                raise ErrorTreeDrawingError(f"not a tree line: {line.strip()!r}")
            name = match["name"]
            depth = len(match["rails"]) // 4 + 1 if match["branch"] else 0
            if depth > len(stack) or (depth == 0 and stack):
                raise ErrorTreeDrawingError(f"{name}: drawn deeper than its parent line allows")
            del stack[depth:]
            if name in nodes:
                raise ErrorTreeDrawingError(f"{name} is drawn twice")
            mixins = match["mixins"] or ""
            nodes[name] = DrawnError(
                name=name,
                parent=stack[-1] if stack else None,
                mixins=frozenset(m.strip() for m in mixins.split(",") if m.strip()),
            )
            stack.append(name)
        return nodes
    raise ErrorTreeDrawingError("the docstring draws no error tree (an indented `::` block)")


def tree_problems(
    drawn: dict[str, DrawnError], classes: dict[str, type[BaseException]], *, where: str
) -> list[str]:
    """What is wrong in ``drawn`` against the real ``classes`` (by simple name)."""
    by_name = {cls.__name__: cls for cls in classes.values()}
    problems: list[str] = []
    if len(by_name) < len(classes):
        twice = sorted(n for n in by_name if sum(c.__name__ == n for c in classes.values()) > 1)
        problems.append(f"{where}: defined more than once, cannot be drawn apart: {twice}")
    for node in drawn.values():
        cls = by_name.get(node.name)
        if cls is None:
            problems.append(f"{where}: draws {node.name}, which the package does not define")
            continue
        bases = {b.__name__ for b in cls.__bases__} - {"Exception"}
        if node.parent is not None and node.parent not in bases:
            problems.append(f"{where}: draws {node.name} under {node.parent}, not a direct base")
            continue
        expected = bases - {node.parent} if node.parent is not None else set()
        if node.parent is not None and expected != node.mixins:
            problems.append(
                f"{where}: {node.name} must be drawn with ({', '.join(sorted(expected))}), "
                f"drawn with ({', '.join(sorted(node.mixins))})"
            )
    return problems


class ErrorTreeContract:
    """Subclass with ``package`` (the import name) and ``root`` (the app's root error)."""

    package: ClassVar[str]
    root: ClassVar[type[BaseException]]

    def test_the_root_lives_in_the_apps_errors_module(self) -> None:
        assert self.root.__module__ == f"{self.package}.errors"

    def test_every_error_derives_from_the_root(self) -> None:
        strays = [
            name
            for name, cls in error_classes(self.package).items()
            if not issubclass(cls, self.root)
        ]
        assert not strays, f"not under {self.root.__name__}: {strays}"

    def test_the_root_module_draws_every_error(self) -> None:
        classes = error_classes(self.package)
        module = importlib.import_module(self.root.__module__)
        drawn = parse_error_tree(module.__doc__)
        where = module.__name__
        problems = tree_problems(drawn, classes, where=where)
        top = next(iter(drawn))
        if top != self.root.__name__:
            problems.append(f"{where}: the drawing starts at {top}, not {self.root.__name__}")
        missing = sorted({cls.__name__ for cls in classes.values()} - set(drawn))
        if missing:
            problems.append(f"{where}: the drawing misses {', '.join(missing)}")
        assert not problems, "\n".join(problems)

    def test_each_errors_module_draws_its_own_errors(self) -> None:
        classes = error_classes(self.package)
        problems: list[str] = []
        for module in error_modules(self.package):
            drawn = parse_error_tree(module.__doc__)
            where = module.__name__
            problems += tree_problems(drawn, classes, where=where)
            own = {c.__name__ for c in classes.values() if c.__module__ == module.__name__}
            missing = sorted(own - set(drawn))
            if missing:
                problems.append(f"{where}: the drawing misses {', '.join(missing)}")
        assert not problems, "\n".join(problems)
