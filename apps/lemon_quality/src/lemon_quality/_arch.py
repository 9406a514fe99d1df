"""The architecture checks: declared edges, references, third-party imports, graph rules.

Input is data (the workspace, the policy, the import facts of every ``src`` file); output is a
list of findings. Nothing here reads files except through what it is given.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lemon_quality._distributions import DistributionMap
from lemon_quality._facts import Facts
from lemon_quality._graph import elementary_cycles
from lemon_quality.findings import Finding
from lemon_quality.policy import POLICY_FILE, ForbiddenReference, Policy, canonical
from lemon_quality.workspace import App, Workspace


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceFile:
    """One ``.py`` file under an app's ``src/``: its path and import facts."""

    app: str
    path: str  # relative to the workspace root
    facts: Facts
    module: str = ""  # dotted module name ("" when unknown)


def _statement(module: str, names: tuple[str, ...], kind: str) -> str:
    if kind == "from":
        return f"from {module} import {', '.join(names)}"
    if kind == "dynamic":
        return f'import_module("{module}")'
    return f"import {module}"


def _candidates(module: str, names: tuple[str, ...]) -> tuple[str, ...]:
    return (*(f"{module}.{n}" for n in names if n != "*"), module)


def _join(names: Iterable[str]) -> str:
    items = sorted(names)
    return ", ".join(items) if items else "(none)"


def _isort_key(name: str) -> tuple[int, str]:
    """ruff's isort-style ``__all__`` order (RUF022): CONSTANTS, then Classes, then the rest."""
    if name.isupper() and len(name) > 1:
        return (0, name)
    return (1 if name[:1].isupper() else 2, name)


def _exported(module: str, exports: tuple[str, ...]) -> bool:
    for e in exports:
        if e.endswith(".*"):
            base = e[:-2]
            if module == base or module.startswith(base + "."):
                return True
        elif module == e:
            return True
    return False


def _private_segment(module: str) -> str | None:
    for seg in module.split(".")[1:]:
        if seg.startswith("_") and not (seg.startswith("__") and seg.endswith("__")):
            return seg
    return None


class ArchitectureCheck:
    """All architecture rules over one workspace; call :meth:`run` once."""

    def __init__(
        self,
        ws: Workspace,
        policy: Policy,
        sources: Mapping[str, list[SourceFile]],
        pth_files: Mapping[str, list[str]],
    ) -> None:
        self.ws = ws
        self.policy = policy
        self.sources = sources
        self.pth_files = pth_files
        self.apps = {a.name: a for a in ws.apps if a.pyproject_error is None}
        self.owner: dict[str, str] = {}
        for a in self.apps.values():
            for dotted in a.packages or {a.import_name: ""}:
                self.owner.setdefault(dotted, a.name)
        # Top-level names of every workspace package (a shared namespace like ``livekit``
        # included): never third-party.
        self.workspace_tops = {d.partition(".")[0] for d in self.owner}
        self.namespaces = {
            d.rsplit(".", i)[0] for d in self.owner for i in range(1, d.count(".") + 1)
        }
        self._owner_cache: dict[str, str | None] = {}
        self._flat = all("." not in d for d in self.owner)
        self.modules: dict[str, set[str]] = defaultdict(set)
        for app_name, files in sources.items():
            for src in files:
                if src.module:
                    self.modules[app_name].add(src.module)
        self.out: list[Finding] = []
        self.dists = DistributionMap(ws.root, policy)
        self.source_graph: dict[str, set[str]] = defaultdict(set)
        self.export_lists = 0

    def add(
        self,
        code: str,
        app: str | None,
        path: str | None,
        line: int | None,
        message: str,
        hint: str,
    ) -> None:
        self.out.append(
            Finding(code=code, app=app, path=path, line=line, message=message, hint=hint)
        )

    def owner_of(self, module: str) -> str | None:
        """The app whose package holds ``module`` (longest dotted prefix), or None."""
        if self._flat:  # no dotted package anywhere (the common case): the top name decides
            return self.owner.get(module.partition(".")[0])
        cached = self._owner_cache.get(module, "")
        if cached != "":
            return cached
        owner = None
        name = module
        while name:
            owner = self.owner.get(name)
            if owner is not None:
                break
            name = name.rpartition(".")[0]
        self._owner_cache[module] = owner
        return owner

    def run(self) -> list[Finding]:
        """Run every architecture rule; return the findings."""
        self._layout_and_names()
        self._membership()
        self._dynamic()
        self._edges()
        self._references()
        self._stale_forbidden()
        self._stale_exports()
        self._third_party()
        self._cycles()
        self._roles()
        self._boot()
        self._export_lists()
        self._path_hacks()
        self._drift()
        return self.out

    # -- workspace shape -----------------------------------------------------------------
    def _layout_and_names(self) -> None:
        by_name: dict[str, list[App]] = defaultdict(list)
        for app in self.ws.apps:
            pyproject = app.path("pyproject.toml")
            if app.pyproject_error is not None:
                self.add(
                    "invalid_pyproject",
                    app.name,
                    pyproject,
                    None,
                    f"cannot read {pyproject}: {app.pyproject_error}",
                    "fix the TOML and give it a [project] name",
                )
                continue
            by_name[app.name].append(app)
            dirname = app.directory.rsplit("/", 1)[-1]
            if (
                app.directory != "."
                and app.name != dirname.replace("-", "_").replace(".", "_").lower()
            ):
                self.add(
                    "app_layout",
                    app.name,
                    pyproject,
                    None,
                    f"project name {app.project_name!r} does not match its directory "
                    f"{app.directory!r}",
                    f"rename the directory to {app.name} or the project",
                )
            for missing in app.missing_packages:
                self.add(
                    "no_source_files",
                    app.name,
                    POLICY_FILE,
                    None,
                    f"apps.{app.name}.packages lists {missing}, which is in none of its source "
                    f"roots ({', '.join(app.source_roots)})",
                    "correct the package name or source_roots, or remove the entry",
                )
            if not app.packages or not self.sources.get(app.name):
                how = {
                    "policy": f"[apps.{app.name}] packages/source_roots in {POLICY_FILE}",
                    "discovery": "discovery (src/<name>/, <name>/, a namespace path)",
                }.get(app.layout_how, f"the {app.layout_how} build configuration")
                what = "no import package" if not app.packages else "packages with no .py file"
                self.add(
                    "no_source_files",
                    app.name,
                    pyproject,
                    None,
                    f"app {app.name} has {what} (found by {how}), so no rule sees its source",
                    f"set the build backend's package config, or add packages = [...] / "
                    f"source_roots = [...] under [apps.{app.name}] in {POLICY_FILE}",
                )
                continue
            if app.layout_how != "discovery" or app.source_roots != ("src",):
                continue
            src = self.ws.root / app.directory / "src"
            if src.is_dir():
                for entry in sorted(src.iterdir()):
                    name = entry.name
                    if (
                        name.startswith(".")
                        or name == "__pycache__"
                        or name.endswith(".egg-info")
                        or name == app.import_name
                    ):
                        continue
                    if entry.is_dir() or name.endswith(".py"):
                        self.add(
                            "app_layout",
                            app.name,
                            app.path(f"src/{name}"),
                            None,
                            f"src/ of {app.name} also provides top-level {name!r}: an "
                            "alias import name hides ownership",
                            f"move it under src/{app.import_name}/ (one import name per app)",
                        )
        for name, apps in sorted(by_name.items()):
            if len(apps) > 1:
                dirs = ", ".join(a.directory for a in apps)
                self.add(
                    "duplicate_name",
                    name,
                    apps[1].path("pyproject.toml"),
                    None,
                    f"distribution and import name {name!r} is used by {dirs}",
                    "give each app its own name",
                )

    def _membership(self) -> None:
        for name in sorted(self.apps):
            if name not in self.policy.apps:
                self.add(
                    "unknown_app",
                    name,
                    self.apps[name].path("pyproject.toml"),
                    None,
                    f"app {name} has no entry in {POLICY_FILE}",
                    f"add [apps.{name}] with its role and allowed dependencies",
                )
        for name in sorted(self.policy.apps):
            if name not in self.apps:
                self.add(
                    "missing_app",
                    name,
                    POLICY_FILE,
                    None,
                    f"{POLICY_FILE} has [apps.{name}] but the workspace has no such app",
                    "remove the entry (or move it to [target.*] if the app is planned)",
                )

    def _dynamic(self) -> None:
        for name, app in sorted(self.apps.items()):
            for why in app.unresolved_dynamic:
                self.add(
                    "unresolved_dynamic_metadata",
                    name,
                    app.path("pyproject.toml"),
                    None,
                    f"{name}: {why}; its edges and third-party declarations cannot be checked",
                    "declare the field statically, or point setuptools `file = [...]` / "
                    "hatch's requirements_txt hook at a requirements file",
                )

    def _internal(self, app: App) -> list[tuple[str, str, int, str]]:
        """(dep, kind, line, description) for each declared dependency on another app."""
        return [
            (d.name, d.kind, d.line, d.describe()) for d in app.dependencies if d.name in self.apps
        ]

    # -- declared edges ------------------------------------------------------------------
    def _edges(self) -> None:
        for name, app in sorted(self.apps.items()):
            pyproject = app.path("pyproject.toml")
            pol = self.policy.apps.get(name)
            declared: set[str] = set()
            for dep, _, line, where in self._internal(app):
                if dep in declared:
                    continue
                declared.add(dep)
                if dep in app.other_sources:
                    # uv takes a member's own [tool.uv.sources] entry over the root's.
                    self.add(
                        "workspace_source",
                        name,
                        pyproject,
                        line,
                        f"{name} depends on workspace app {dep} ({where}) but its own "
                        f"[tool.uv.sources] gives {dep} a non-workspace source, which "
                        "overrides the root's",
                        f"replace it with `{dep} = {{ workspace = true }}` in {pyproject} "
                        "(or delete it to inherit the root's)",
                    )
                elif dep not in app.workspace_sources and dep not in self.ws.workspace_sources:
                    self.add(
                        "workspace_source",
                        name,
                        pyproject,
                        line,
                        f"{name} depends on workspace app {dep} ({where}) but {dep} has "
                        "no `workspace = true` source",
                        f"add `{dep} = {{ workspace = true }}` under [tool.uv.sources] in "
                        "the root pyproject.toml",
                    )
                if pol is None or dep in pol.allow:
                    continue
                excepted = any(e.target == dep for e in pol.reference_only)
                extra = (
                    " (a reference-only exception permits imports, never a pyproject edge)"
                    if excepted
                    else ""
                )
                self.add(
                    "forbidden_dependency",
                    name,
                    pyproject,
                    line,
                    f"{name} declares a dependency on {dep} ({where}) that the policy does "
                    f"not allow{extra}; allowed: {_join(pol.allow)}",
                    f"remove the dependency, or add {dep} to apps.{name}.allow in "
                    f"{POLICY_FILE} if the architecture should change",
                )
            if pol is None:
                continue
            for dep in pol.allow:
                if dep not in declared:
                    self.add(
                        "stale_permission",
                        name,
                        POLICY_FILE,
                        None,
                        f"apps.{name}.allow permits {dep} but {pyproject} declares no "
                        "such dependency",
                        f"remove {dep} from apps.{name}.allow (permissions only shrink "
                        "with the code)",
                    )

    # -- source references ---------------------------------------------------------------
    def _references(self) -> None:
        for name, app in sorted(self.apps.items()):
            pol = self.policy.apps.get(name)
            runtime = {d for d, kind, _, _ in self._internal(app) if kind != "group"}
            groups = {d for d, kind, _, _ in self._internal(app) if kind == "group"}
            exceptions = {}
            if pol is not None:
                for exc in pol.reference_only:
                    for f in exc.files:
                        exceptions[(exc.target, app.path(f.lstrip("/")))] = False
            rules: dict[str, list[ForbiddenReference]] = defaultdict(list)
            for rule in self.policy.forbidden_references:
                top = rule.module.partition(".")[0]
                if rule.from_modules:
                    if any(self.owner_of(m) == name for m in rule.from_modules):
                        rules[top].append(rule)
                elif name not in rule.allowed_apps and self.owner_of(rule.module) != name:
                    rules[top].append(rule)
            graph = self.source_graph[name]
            tops, flat, direct = self.workspace_tops, self._flat, self.owner.get
            for src in self.sources.get(name, []):
                for line, module, names, tc, kind in src.facts[0]:
                    top = module.partition(".")[0]
                    if top not in tops:
                        continue
                    owner = direct(top) if flat else self.owner_of(module)
                    if owner is None or owner == name:
                        continue
                    if not tc:  # the source graph is the run-time one
                        graph.add(owner)
                    # Fast path: most references touch no private name and no reserved module.
                    if "._" in module or any(n[:1] == "_" for n in names) or top in rules:
                        self._reference_rules(
                            name,
                            src,
                            line,
                            _statement(module, names, kind),
                            _candidates(module, names),
                            owner,
                            rules.get(top, []),
                        )
                    exports = self.policy.apps[owner].exports if owner in self.policy.apps else None
                    if exports is not None:
                        self._exports_rule(name, src, line, module, names, kind, owner, exports)
                    if owner in runtime:
                        continue
                    statement = _statement(module, names, kind)
                    key = (owner, src.path)
                    if key in exceptions:
                        exceptions[key] = True
                        continue
                    note = (
                        f"; {owner} is only in a dependency group, which src/ may not use"
                        if owner in groups
                        else ""
                    )
                    self.add(
                        "undeclared_reference",
                        name,
                        src.path,
                        line,
                        f"`{statement}` imports {owner} without a declared runtime "
                        f"dependency{note}",
                        f"declare {owner} in {app.path('pyproject.toml')} (and allow it "
                        f"in {POLICY_FILE}), or add a reference-only exception for this "
                        "file with a reason",
                    )
            for (target, path), used in sorted(exceptions.items()):
                if used:
                    continue
                why = (
                    "the file does not exist"
                    if not (self.ws.root / path).is_file()
                    else f"{target} is a declared dependency"
                    if target in runtime
                    else f"the file does not import {target}"
                )
                self.add(
                    "stale_exception",
                    name,
                    POLICY_FILE,
                    None,
                    f"reference-only exception of {name} for {target} in {path} matches "
                    f"no import ({why})",
                    f"remove {path} from the exception (the list only shrinks)",
                )

    def _exports_rule(
        self,
        name: str,
        src: SourceFile,
        line: int,
        module: str,
        names: tuple[str, ...],
        kind: str,
        owner: str,
        exports: tuple[str, ...],
    ) -> None:
        known = self.modules.get(owner, set())
        targets = [f"{module}.{n}" for n in names if f"{module}.{n}" in known] or [module]
        for target in targets:
            if _exported(target, exports):
                continue
            self.add(
                "unexported_reference",
                name,
                src.path,
                line,
                f"`{_statement(module, names, kind)}` uses {target}, which {owner} does not "
                f"export (exports: {_join(exports)})",
                f"import it from one of {owner}'s exported modules, or add it to "
                f"apps.{owner}.exports in {POLICY_FILE}",
            )
            return

    def _stale_exports(self) -> None:
        for name, pol in sorted(self.policy.apps.items()):
            if pol.exports is None or name not in self.apps:
                continue
            known = self.modules.get(name, set())
            for export in pol.exports:
                base = export.removesuffix(".*")
                if base in known or any(m.startswith(base + ".") for m in known):
                    continue
                self.add(
                    "unexported_reference",
                    name,
                    POLICY_FILE,
                    None,
                    f"apps.{name}.exports lists {export}, but {name} has no such module",
                    "remove or correct the entry (an export list only names real modules)",
                )

    def _stale_forbidden(self) -> None:
        for i, rule in enumerate(self.policy.forbidden_references):
            owner = self.owner_of(rule.module)
            problem = None
            if owner is None:
                problem = "no workspace app provides it"
            else:
                known = self.modules.get(owner, set())
                prefix = rule.module + "."
                if rule.module not in known and not any(m.startswith(prefix) for m in known):
                    problem = f"{owner} has no such module"
            unknown = sorted(a for a in rule.allowed_apps if a not in self.apps)
            if problem is None and unknown:
                problem = f"allowed_apps names no app: {', '.join(unknown)}"
            for scope in rule.from_modules:
                scope_owner = self.owner_of(scope)
                scoped = self.modules.get(scope_owner, set()) if scope_owner else set()
                if problem is None and not any(
                    m == scope or m.startswith(scope + ".") for m in scoped
                ):
                    problem = f"from_modules names {scope}, which no app has"
            if problem is None:
                continue
            self.add(
                "stale_forbidden_reference",
                owner,
                POLICY_FILE,
                None,
                f"forbidden_references[{i}] reserves {rule.module}, but {problem}",
                "remove or correct the entry (a rule that matches nothing protects nothing)",
            )

    def _reference_rules(
        self,
        name: str,
        src: SourceFile,
        line: int,
        statement: str,
        candidates: tuple[str, ...],
        owner: str,
        rules: list[ForbiddenReference],
    ) -> None:
        for cand in candidates:
            seg = _private_segment(cand)
            if seg is not None:
                self.add(
                    "private_reference",
                    name,
                    src.path,
                    line,
                    f"`{statement}` reaches {owner}'s private {seg!r}",
                    f"import the public name from {owner} (its __init__ re-exports), or "
                    f"ask {owner} to make it public",
                )
                break
        for rule in rules:
            if not rule.scoped_to(src.module):
                continue
            if any(c == rule.module or c.startswith(rule.module + ".") for c in candidates):
                if rule.from_modules:
                    self.add(
                        "forbidden_reference",
                        name,
                        src.path,
                        line,
                        f"`{statement}` references {rule.module}, which "
                        f"{_join(rule.from_modules)} may not import: {rule.reason}",
                        "go through the public seam instead",
                    )
                    continue
                allowed = _join(rule.allowed_apps)
                self.add(
                    "forbidden_reference",
                    name,
                    src.path,
                    line,
                    f"`{statement}` references {rule.module}, reserved to {allowed}: {rule.reason}",
                    f"go through the public seam instead of {rule.module}",
                )

    # -- third-party imports -------------------------------------------------------------
    def _third_party(self) -> None:
        roles = self.policy.roles
        for name, app in sorted(self.apps.items()):
            pol = self.policy.apps.get(name)
            deny = set(pol.deny_third_party) if pol is not None else set()
            if pol is not None and pol.role in roles:
                deny.update(roles[pol.role].deny_third_party)
            declared = {
                d.name: d for d in app.dependencies if d.kind != "group" and d.name not in self.apps
            }
            pyproject = app.path("pyproject.toml")
            for dep in app.dependencies:
                if dep.name in deny:
                    self.add(
                        "denied_third_party",
                        name,
                        pyproject,
                        dep.line,
                        f"{name} declares {dep.name!r} ({dep.describe()}), which its role "
                        f"{pol.role if pol else '?'} may not use",
                        f"remove it; the deny list is in {POLICY_FILE} (deny_third_party)",
                    )
            used: set[str] = set()
            for src in self.sources.get(name, []):
                for line, module, _, tc, _ in src.facts[0]:
                    top = module.partition(".")[0]
                    if top in self.workspace_tops and (
                        self.owner_of(module) is not None or module in self.namespaces
                    ):
                        continue  # a workspace package, or a namespace workspace apps share
                    dists, how = self.dists.providers(name, top)
                    if deny and (canonical(top) in deny or dists & deny):
                        self.add(
                            "denied_third_party",
                            name,
                            src.path,
                            line,
                            f"{name} imports {top!r}, which its role "
                            f"{pol.role if pol else '?'} may not use",
                            f"move the code to an app whose role allows it; the deny list is "
                            f"in {POLICY_FILE} (deny_third_party)",
                        )
                    if tc:
                        used.update(dists)
                        continue
                    used.update(dists)
                    if dists & declared.keys():
                        continue
                    self.add(
                        "undeclared_third_party",
                        name,
                        src.path,
                        line,
                        f"{name} imports third-party {top!r} at run time but declares none "
                        f"of {_join(dists)} (mapping from {how})",
                        f"add the distribution to [project] dependencies of "
                        f"{app.path('pyproject.toml')} (or move the import under "
                        "`if TYPE_CHECKING:` if it is only for types, or map the import name "
                        f"in [apps.{name}.import_names])",
                    )
            for dist, dep in sorted(declared.items()):
                if dist in used or dist in deny:
                    continue
                self.add(
                    "unused_dependency",
                    name,
                    pyproject,
                    dep.line,
                    f"{name} declares third-party {dist!r} ({dep.describe()}) but no file "
                    "of its packages imports it",
                    "remove it, or map its import name in [third_party.import_names]",
                )

    # -- graph rules ---------------------------------------------------------------------
    def _cycles(self) -> None:
        declared = {n: {d for d, _, _, _ in self._internal(a)} for n, a in self.apps.items()}
        allowed = {n: set(p.allow) for n, p in self.policy.apps.items()}
        source = {n: set(self.source_graph.get(n, ())) for n in self.apps}
        seen: set[tuple[str, ...]] = set()
        for label, graph in (
            ("declared in pyproject files", declared),
            (f"allowed by {POLICY_FILE}", allowed),
            ("in source imports, reference-only exceptions included", source),
        ):
            found, truncated = elementary_cycles(graph)
            for cycle in found:
                key = tuple(cycle)
                if key in seen:
                    continue
                seen.add(key)
                path = " -> ".join([*cycle, cycle[0]])
                self.add(
                    "dependency_cycle",
                    cycle[0],
                    POLICY_FILE,
                    None,
                    f"dependency cycle {path} ({label})",
                    "break the cycle: move the shared part down, or invert one edge "
                    "through a seam (a Protocol) in a lower app",
                )
            if truncated:
                self.add(
                    "dependency_cycle",
                    None,
                    POLICY_FILE,
                    None,
                    f"more cycles exist in the graph {label} than the search bound reports",
                    "break the cycles listed first; the rest are reported as they remain",
                )

    def _roles(self) -> None:
        roles = self.policy.roles
        for name, pol in sorted(self.policy.apps.items()):
            role = roles[pol.role]
            for dep in pol.allow:
                other = self.policy.apps.get(dep)
                if other is None:
                    continue
                if other.role not in role.may_depend_on:
                    self.add(
                        "role_violation",
                        name,
                        POLICY_FILE,
                        None,
                        f"{name} ({pol.role}) is allowed to depend on {dep} "
                        f"({other.role}); role {pol.role} may depend on: "
                        f"{_join(role.may_depend_on)}",
                        f"remove the edge, or change roles.{pol.role}.may_depend_on if "
                        "the layering should change",
                    )
            for exc in pol.reference_only:
                other = self.policy.apps.get(exc.target)
                if other is not None and other.role not in role.may_depend_on:
                    self.add(
                        "role_violation",
                        name,
                        POLICY_FILE,
                        None,
                        f"a reference-only exception lets {name} ({pol.role}) import "
                        f"{exc.target} ({other.role}); role {pol.role} may depend on: "
                        f"{_join(role.may_depend_on)}",
                        "remove the exception and invert the reference through a seam (a "
                        "Protocol the higher app registers at boot)",
                    )
            app = self.apps.get(name)
            if app is None:
                continue
            for dep, kind, line, where in self._internal(app):
                other = self.policy.apps.get(dep)
                if other is not None and kind != "group" and roles[other.role].test_only:
                    self.add(
                        "role_violation",
                        name,
                        app.path("pyproject.toml"),
                        line,
                        f"{name} depends on {dep} ({other.role}) in {where}; apps of role "
                        f"{other.role} are test-only",
                        f'move it to a dependency group, e.g. [dependency-groups] test = ["{dep}"]',
                    )

    def _boot(self) -> None:
        roles = self.policy.roles
        for name, app in sorted(self.apps.items()):
            pol = self.policy.apps.get(name)
            pyproject = app.path("pyproject.toml")
            for ep in app.entry_points:
                if ep.group == "lemon.apps" and canonical(ep.name) != name:
                    self.add(
                        "boot_reference",
                        name,
                        pyproject,
                        ep.line,
                        f"entry point lemon.apps:{ep.name} of {name} registers another app's "
                        "name (AppSpec requires/before names resolve to it)",
                        f"name the entry point {name}",
                    )
                owner = self.owner_of(ep.module)
                if owner is not None and owner != name:
                    self.add(
                        "boot_reference",
                        name,
                        pyproject,
                        ep.line,
                        f"entry point {ep.group}:{ep.name} of {name} points into {owner} "
                        f"({ep.module})",
                        "an app's entry points name its own modules; let the other app "
                        "declare its own entry point",
                    )
                elif (
                    owner == name
                    and ep.group in ("lemon.apps", "lemon.executor")
                    and ep.module not in self.modules.get(name, set())
                ):
                    self.add(
                        "boot_reference",
                        name,
                        pyproject,
                        ep.line,
                        f"entry point {ep.group}:{ep.name} names module {ep.module}, which "
                        f"{name} does not have",
                        "point it at an existing module",
                    )
            if pol is None:
                continue
            used: set[str] = set()
            excepted = {e.target: e for e in pol.boot_exceptions}
            role = roles[pol.role]
            for src in self.sources.get(name, []):
                for line, field, names, spec in src.facts[4]:
                    for target in names:
                        t = canonical(target)
                        if t == name or t == canonical(spec):
                            continue
                        other = self.policy.apps.get(t)
                        if t not in self.apps or other is None:
                            self.add(
                                "boot_reference",
                                name,
                                src.path,
                                line,
                                f"AppSpec {field} names {target!r}, which is no workspace app",
                                "name an existing app (AppSpec names are app names)",
                            )
                            continue
                        if other.role in role.may_depend_on:
                            continue
                        if t in excepted:
                            used.add(t)
                            continue
                        self.add(
                            "boot_reference",
                            name,
                            src.path,
                            line,
                            f"AppSpec {field} of {name} ({pol.role}) names {t} "
                            f"({other.role}); role {pol.role} may depend on: "
                            f"{_join(role.may_depend_on)}",
                            f"reach {t} through a seam, or add a [[apps.{name}.boot_exceptions]] "
                            "entry with a reason",
                        )
            for t in sorted(set(excepted) - used):
                self.add(
                    "boot_reference",
                    name,
                    POLICY_FILE,
                    None,
                    f"boot exception of {name} for {t} matches no AppSpec name that breaks "
                    "the role rules",
                    f"remove it from apps.{name}.boot_exceptions (the list only shrinks)",
                )

    def _export_lists(self) -> None:
        for name in sorted(self.apps):
            known = self.modules.get(name, set())
            for src in self.sources.get(name, []):
                fact = src.facts[3]
                if not fact:
                    continue
                line, listed, literal, bound, dynamic = fact
                self.export_lists += 1
                problems = self._all_problems(src, listed, literal, bound, dynamic, known)
                for problem, hint in problems:
                    self.add("export_list", name, src.path, line, problem, hint)

    @staticmethod
    def _all_problems(
        src: SourceFile,
        listed: tuple[str, ...],
        literal: bool,
        bound: tuple[tuple[str, str], ...],
        dynamic: bool,
        known: set[str],
    ) -> list[tuple[str, str]]:
        if not literal:
            return [
                (
                    "__all__ is not one literal list of strings",
                    "write __all__ = [...] with string literals only",
                )
            ]
        out = []
        want = sorted(listed, key=_isort_key)
        if list(listed) != want:
            out.append(
                (
                    "__all__ is not sorted (isort-style: CONSTANTS, Classes, functions)",
                    f"sort it: {want!r}"[:300],
                )
            )
        dups = sorted({n for n in listed if listed.count(n) > 1})
        if dups:
            out.append((f"__all__ lists {', '.join(dups)} twice", "list each name once"))
        names = {n for n, _ in bound}
        if not dynamic:
            is_pkg = src.path.endswith("/__init__.py")  # a submodule name needs no binding
            missing = sorted(
                n for n in set(listed) - names if not (is_pkg and f"{src.module}.{n}" in known)
            )
            if missing:
                out.append(
                    (
                        f"__all__ lists names the module does not define: {', '.join(missing)}",
                        "define or import them, or remove them from __all__",
                    )
                )

        # Complete: checked on the import surfaces, the __init__ of every public package.
        # There, public means functions and classes, UPPER_CASE constants, and re-exports from
        # the package's own subtree; loggers, type variables and names imported for internal
        # use (annotations, a sibling's class) are not API.
        if not src.path.endswith("/__init__.py") or _private_segment("x." + src.module):
            return out
        subtree = src.module + "."

        def public(name: str, origin: str) -> bool:
            if name.startswith("_") or name in listed:
                return False
            if origin == "def":
                return True
            if origin == "assign":
                return name.isupper() and len(name) > 1
            return origin == "." or origin.startswith(subtree)

        absent = sorted({n for n, o in bound if public(n, o)})
        if absent:
            out.append(
                (
                    f"public names missing from __all__: {', '.join(absent)}",
                    "add them to __all__, or rename them with a leading underscore",
                )
            )
        return out

    def _path_hacks(self) -> None:
        for name in sorted(self.apps):
            for src in self.sources.get(name, []):
                for line, what in src.facts[1]:
                    self.add(
                        "sys_path_manipulation",
                        name,
                        src.path,
                        line,
                        f"{what} in app source changes how imports resolve",
                        "declare the dependency in pyproject.toml instead of patching "
                        "the import path",
                    )
            for path in self.pth_files.get(name, []):
                self.add(
                    "sys_path_manipulation",
                    name,
                    path,
                    None,
                    "a .pth file in app source changes how imports resolve",
                    "delete it and declare the dependency in pyproject.toml",
                )

    def _drift(self) -> None:
        for name, target in sorted(self.policy.target.items()):
            app = self.apps.get(name)
            if app is None:
                self.add(
                    "target_drift",
                    name,
                    POLICY_FILE,
                    None,
                    f"planned app {name} ({target.role}) does not exist yet; target "
                    f"dependencies: {_join(target.allow)}",
                    f"create apps/{name} when its work starts",
                )
                continue
            pyproject = app.path("pyproject.toml")
            actual = {d for d, _, _, _ in self._internal(app)}
            for dep in sorted(actual - set(target.allow)):
                self.add(
                    "target_drift",
                    name,
                    pyproject,
                    None,
                    f"{name} still depends on {dep}; target policy allows: {_join(target.allow)}",
                    f"migrate {name} off {dep}",
                )
            for dep in sorted(set(target.allow) - actual):
                self.add(
                    "target_drift",
                    name,
                    pyproject,
                    None,
                    f"target policy adds {dep} to {name}, not declared yet",
                    f"add the edge when {name} needs {dep}",
                )
            pol = self.policy.apps.get(name)
            if pol is not None and pol.role != target.role:
                self.add(
                    "target_drift",
                    name,
                    POLICY_FILE,
                    None,
                    f"{name} has role {pol.role}; target role is {target.role}",
                    "move the app when the migration happens",
                )
