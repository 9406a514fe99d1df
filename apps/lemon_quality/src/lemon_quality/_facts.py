"""Import facts of one Python source file, read from its AST.

The facts are path-independent, so one cache entry per content hash serves every file with
that content. Records are plain tuples so that they marshal quickly:

* import: ``(line, module, names, type_checking, kind)``; ``kind`` is ``import``
  (``import a.b``: module ``a.b``, no names), ``from`` (``from m import x, y``: names ``x, y``)
  or ``dynamic`` (a literal ``importlib.import_module("a.b")`` / ``__import__("a.b")``).
  ``type_checking`` is true inside the body of ``if TYPE_CHECKING:`` /
  ``if typing.TYPE_CHECKING:``.
  Relative imports and standard-library imports are not recorded: neither can name another
  app or a third-party package, and leaving them out keeps the cache small and warm runs fast.
  (The standard-library list is the running Python's, which is part of the cache key.)
* path hack: ``(line, description)`` for ``sys.path`` edits and ``site.addsitedir`` calls.
* error: ``(message, line)`` when the file does not parse, else ``("", 0)``.

Only statements are walked, which is what keeps this fast, and only statements whose line span
contains an interesting line: one containing ``import`` (every import statement has the keyword
within its span) or mentioning ``sys.path`` or ``addsitedir``. The expressions of a statement
(its decorators and header for a compound statement, all of it for a simple one) are walked only
when those lines include a "special" one: ``import_module``, ``__import__``, ``sys.path``,
``addsitedir``. Nested statement lists are walked as statements, so a class or function is
entered rather than walked whole. Tests check this against a full AST walk (a sample of the
standard library, and generated modules).
"""

from __future__ import annotations

import ast
import re
import sys
from bisect import bisect_left

ImportFact = tuple[int, str, tuple[str, ...], bool, str]
HackFact = tuple[int, str]
# (line of ``__all__``, its names, whether it is one literal list/tuple of strings, the
# top-level bindings as (name, origin), whether the module defines ``__getattr__`` or uses
# ``import *``); ``()`` when the module has no top-level ``__all__``. ``origin`` is ``def``
# (def, class), ``assign``, ``.`` (a relative import), ``import`` or the from-module.
ExportFact = tuple[int, tuple[str, ...], bool, tuple[tuple[str, str], ...], bool] | tuple[()]
# (line, field, names, spec name) for ``AppSpec(..., requires=(...), before=(...))``.
BootFact = tuple[int, str, tuple[str, ...], str]
Facts = tuple[
    tuple[ImportFact, ...],
    tuple[HackFact, ...],
    tuple[str, int],
    ExportFact,
    tuple[BootFact, ...],
]

# Bump when the facts format or meaning changes: it invalidates every cache entry.
FACTS_VERSION = 4

_STDLIB = frozenset(sys.stdlib_module_names) | {"__main__"}

# Path hacks are rare: this pattern only runs on files that mention ``sys`` or ``addsitedir``.
_PATH_HACK = re.compile(rb"\baddsitedir\b|\bsys\s*\.\s*path\b")
_PATH_METHODS = frozenset({"insert", "append", "extend", "remove", "clear", "pop", "__setitem__"})
_BODIES = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})


def extract(source: bytes) -> Facts:
    """The import facts of ``source`` (bytes, so encoding cookies are honoured)."""
    try:
        return _extract(source)
    except RecursionError:
        # A pathological expression (tens of thousands of terms) exhausts the parser's
        # stack; CPython cannot compile such a file either.
        return (), (), ("too deeply nested to parse (RecursionError)", 1), (), ()
    except MemoryError:
        return (), (), ("too large to parse (MemoryError)", 1), (), ()


def _extract(source: bytes) -> Facts:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 1
        msg = getattr(exc, "msg", None) or str(exc)
        return (), (), (str(msg), int(line)), (), ()
    if b"\r" in source:  # the parser also ends lines at a lone CR; count lines the same way
        source = source.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    lines, special = _interesting_lines(source)
    imports: list[ImportFact] = []
    hacks: list[HackFact] = []
    if lines:
        _Walker(tuple(lines), frozenset(special), imports, hacks).statements(tree.body, False)
    imports.sort()
    hacks.sort()
    exports = _exports(tree.body) if b"__all__" in source else ()
    boot = _boot(tree) if b"AppSpec" in source else ()
    return tuple(imports), tuple(hacks), ("", 0), exports, boot


def _bindings(body: list[ast.stmt], out: list[tuple[str, str]], flags: list[bool]) -> None:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append((node.name, "def"))
            if node.name == "__getattr__":
                flags.append(True)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name):
                        out.append((sub.id, "assign"))
                        if sub.id == "__getattr__":  # a lazy facade's loader, bound by a call
                            flags.append(True)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                out.append((alias.asname or alias.name.partition(".")[0], "import"))
        elif isinstance(node, ast.ImportFrom):
            if node.module == "__future__":
                continue
            origin = "." if node.level else node.module or ""
            for alias in node.names:
                if alias.name == "*":
                    flags.append(True)
                else:
                    out.append((alias.asname or alias.name, origin))
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                _bindings(node.body, out, flags)
            _bindings(node.orelse, out, flags)
        elif isinstance(node, (ast.Try, ast.TryStar)):
            _bindings(node.body, out, flags)
            for handler in node.handlers:
                _bindings(handler.body, out, flags)
            _bindings(node.orelse, out, flags)
            _bindings(node.finalbody, out, flags)


def _exports(body: list[ast.stmt]) -> ExportFact:
    line = 0
    names: list[str] = []
    literal = True
    for node in body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets, value = [node.target], node.value
        if not any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            continue
        if line and not isinstance(node, ast.AugAssign):
            names = []
        line = line or node.lineno
        if isinstance(node, ast.AugAssign):
            literal = False
        if isinstance(value, (ast.List, ast.Tuple)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
        ):
            names.extend(str(e.value) for e in value.elts if isinstance(e, ast.Constant))
        else:
            literal = False
    if not line:
        return ()
    bound: list[tuple[str, str]] = []
    flags: list[bool] = []
    _bindings(body, bound, flags)
    return line, tuple(names), literal, tuple(bound), bool(flags)


def _strings(node: ast.expr) -> tuple[str, ...] | None:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return tuple(str(e.value) for e in node.elts if isinstance(e, ast.Constant))
    return None


def _boot(tree: ast.Module) -> tuple[BootFact, ...]:
    out: list[BootFact] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = (
            func.id
            if isinstance(func, ast.Name)
            else func.attr
            if isinstance(func, ast.Attribute)
            else ""
        )
        if name != "AppSpec":
            continue
        spec = ""
        for kw in node.keywords:
            if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                spec = str(kw.value.value)
        for kw in node.keywords:
            if kw.arg in ("requires", "before"):
                names = _strings(kw.value)
                if names:
                    out.append((kw.value.lineno, kw.arg, names, spec))
    out.sort()
    return tuple(out)


def _interesting_lines(source: bytes) -> tuple[list[int], set[int]]:
    """Lines that can hold a fact (sorted), and the "special" ones among them.

    Interesting: every line containing ``import`` (a superset: every import statement has the
    keyword within its span, and ``import_module`` / ``__import__`` contain it too). Special:
    lines with ``import_module``, ``__import__``, ``sys.path`` or ``addsitedir``, whose
    expressions must be walked.
    """
    lines: list[int] = []
    special: set[int] = set()
    find = source.find
    count = source.count
    line, last = 1, 0
    pos = find(b"import")
    while pos >= 0:
        line += count(b"\n", last, pos)
        last = pos
        if not lines or lines[-1] != line:
            lines.append(line)
        if source.startswith(b"import_module", pos) or (
            pos >= 2 and source.startswith(b"__", pos - 2)
        ):
            special.add(line)
        pos = find(b"import", pos + 6)
    if b"addsitedir" in source or b"sys" in source:
        for m in _PATH_HACK.finditer(source):
            hack = count(b"\n", 0, m.start()) + 1
            special.add(hack)
            lines.append(hack)
        lines.sort()
    return lines, special


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _is_sys_path(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


class _Walker:
    """One pass over the statements that span an interesting line; expressions only where
    ``special`` lines are. A statement spanning no interesting line cannot hold a fact (an import
    statement always has the keyword within its span), so it is skipped whole."""

    __slots__ = ("hacks", "imports", "lines", "special")

    def __init__(
        self,
        lines: tuple[int, ...],
        special: frozenset[int],
        imports: list[ImportFact],
        hacks: list[HackFact],
    ) -> None:
        self.lines = lines
        self.special = special
        self.imports = imports
        self.hacks = hacks

    def statements(self, body: list[ast.stmt], tc: bool) -> None:
        out = self.imports
        special = self.special
        lines = self.lines
        count = len(lines)
        for node in body:
            end = node.end_lineno or node.lineno
            i = bisect_left(lines, node.lineno)
            if i == count or lines[i] > end:
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.partition(".")[0] not in _STDLIB:
                        out.append((node.lineno, alias.name, (), tc, "import"))
                continue
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level or module.partition(".")[0] in _STDLIB:
                    continue
                out.append((node.lineno, module, tuple(a.name for a in node.names), tc, "from"))
                continue
            if special and any(node.lineno <= line <= end for line in special):
                # Only the statement's own lines (decorators and header for a compound
                # statement, all of it for a simple one); nested bodies are walked below.
                first = node.lineno
                for decorator in getattr(node, "decorator_list", ()):
                    first = min(first, decorator.lineno)
                inner = getattr(node, "body", None)
                last = end  # try/match: handler types and case patterns follow the body
                if inner and not isinstance(node, (ast.Try, ast.TryStar, ast.Match)):
                    last = max(node.lineno, inner[0].lineno - 1)
                if any(first <= line <= last for line in special):
                    self._headers(node)
                    self._assignment(node)
            if isinstance(node, ast.If):
                self.statements(node.body, tc or _is_type_checking(node.test))
                self.statements(node.orelse, tc)
            elif isinstance(node, (ast.Try, ast.TryStar)):
                self.statements(node.body, tc)
                for handler in node.handlers:
                    self.statements(handler.body, tc)
                self.statements(node.orelse, tc)
                self.statements(node.finalbody, tc)
            elif isinstance(node, ast.Match):
                for case in node.cases:
                    self.statements(case.body, tc)
            else:
                inner = getattr(node, "body", None)
                if isinstance(inner, list):
                    self.statements(inner, tc)
                orelse = getattr(node, "orelse", None)
                if isinstance(orelse, list):
                    self.statements(orelse, tc)

    def _headers(self, node: ast.stmt) -> None:
        """Walk every expression of ``node`` that is not in a nested statement list."""
        for field in node._fields:
            value = getattr(node, field, None)
            if field in _BODIES:
                if field == "handlers":
                    for handler in value or ():
                        if handler.type is not None:
                            self._expressions(handler.type)
                elif field == "cases":
                    for case in value or ():
                        self._expressions(case.pattern)
                        if case.guard is not None:
                            self._expressions(case.guard)
                continue
            if isinstance(value, ast.AST):
                self._expressions(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self._expressions(item)

    def _assignment(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            return
        for target in targets:
            base = target.value if isinstance(target, ast.Subscript) else target
            if _is_sys_path(base):
                self.hacks.append((node.lineno, "assignment to sys.path"))

    def _expressions(self, root: ast.AST) -> None:
        for node in ast.walk(root):
            if isinstance(node, ast.Call):
                self._call(node)

    def _call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in _PATH_METHODS and _is_sys_path(func.value):
                self.hacks.append((node.lineno, f"sys.path.{func.attr}(...)"))
                return
            if func.attr == "addsitedir":
                self.hacks.append((node.lineno, "site.addsitedir(...)"))
                return
            name = func.attr
        elif isinstance(func, ast.Name):
            name = func.id
        else:
            return
        if name not in ("import_module", "__import__") or not node.args:
            return
        arg = node.args[0]
        if (
            isinstance(arg, ast.Constant)
            and isinstance(arg.value, str)
            and arg.value
            and not arg.value.startswith(".")
            and arg.value.partition(".")[0] not in _STDLIB
        ):
            self.imports.append((node.lineno, arg.value, (), False, "dynamic"))
