"""The architecture checks: declared edges, references, third-party imports, graph rules.

Input is data (the workspace, the policy, the import facts of every ``src`` file); output is a
list of findings. Nothing here reads files except through what it is given.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from lemon_quality._facts import Facts
from lemon_quality._graph import cycles
from lemon_quality.findings import Finding
from lemon_quality.policy import POLICY_FILE, ForbiddenReference, Policy, canonical
from lemon_quality.workspace import App, Workspace


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceFile:
    """One ``.py`` file under an app's ``src/``: its path and import facts."""

    app: str
    path: str  # relative to the workspace root
    facts: Facts


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
        self.owner = {a.import_name: a.name for a in self.apps.values()}
        self.out: list[Finding] = []
        self._pd: Mapping[str, list[str]] | None = None

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

    def run(self) -> list[Finding]:
        """Run every architecture rule; return the findings."""
        self._layout_and_names()
        self._membership()
        self._edges()
        self._references()
        self._third_party()
        self._cycles()
        self._roles()
        self._path_hacks()
        self._drift()
        return self.out

    # -- workspace shape -----------------------------------------------------------------
    def _layout_and_names(self) -> None:
        by_name: dict[str, list[App]] = defaultdict(list)
        for app in self.ws.apps:
            pyproject = f"{app.directory}/pyproject.toml"
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
            if app.name != dirname.replace("-", "_").replace(".", "_").lower():
                self.add(
                    "app_layout",
                    app.name,
                    pyproject,
                    None,
                    f"project name {app.project_name!r} does not match its directory "
                    f"{app.directory!r}",
                    f"rename the directory to {app.name} or the project",
                )
            src = self.ws.root / app.directory / "src"
            if not (src / app.import_name / "__init__.py").is_file():
                self.add(
                    "app_layout",
                    app.name,
                    f"{app.directory}/src",
                    None,
                    f"app {app.name} has no package src/{app.import_name}/__init__.py",
                    f"put the package at {app.directory}/src/{app.import_name}/",
                )
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
                            f"{app.directory}/src/{name}",
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
                    f"{apps[1].directory}/pyproject.toml",
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
                    f"{self.apps[name].directory}/pyproject.toml",
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

    def _internal(self, app: App) -> list[tuple[str, str, int, str]]:
        """(dep, kind, line, description) for each declared dependency on another app."""
        return [
            (d.name, d.kind, d.line, d.describe()) for d in app.dependencies if d.name in self.apps
        ]

    # -- declared edges ------------------------------------------------------------------
    def _edges(self) -> None:
        for name, app in sorted(self.apps.items()):
            pyproject = f"{app.directory}/pyproject.toml"
            pol = self.policy.apps.get(name)
            declared: set[str] = set()
            for dep, _, line, where in self._internal(app):
                if dep in declared:
                    continue
                declared.add(dep)
                if dep not in app.workspace_sources and dep not in self.ws.workspace_sources:
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
                        exceptions[(exc.target, f"{app.directory}/{f.lstrip('/')}")] = False
            owner_of = self.owner
            rules: dict[str, list[ForbiddenReference]] = defaultdict(list)
            for rule in self.policy.forbidden_references:
                top = rule.module.partition(".")[0]
                if name not in rule.allowed_apps and owner_of.get(top) != name:
                    rules[top].append(rule)
            for src in self.sources.get(name, []):
                for line, module, names, _, kind in src.facts[0]:
                    top = module.partition(".")[0]
                    owner = owner_of.get(top)
                    if owner is None or owner == name:
                        continue
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
                        f"declare {owner} in {app.directory}/pyproject.toml (and allow it "
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
            if any(c == rule.module or c.startswith(rule.module + ".") for c in candidates):
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
    def _dists(self) -> Mapping[str, list[str]]:
        if self._pd is None:
            # Imported here: only a run that meets an unmapped import name pays for it.
            from importlib.metadata import packages_distributions

            self._pd = {k: [canonical(d) for d in v] for k, v in packages_distributions().items()}
        return self._pd

    def _provides(self, top: str) -> Callable[[str], bool]:
        override = self.policy.import_names.get(top)

        def check(dist: str) -> bool:
            if override is not None:
                return dist == override
            return dist == canonical(top) or dist in self._dists().get(top, ())

        return check

    def _third_party(self) -> None:
        workspace_imports = set(self.owner)
        for name, app in sorted(self.apps.items()):
            declared = {
                d.name: d for d in app.dependencies if d.kind != "group" and d.name not in self.apps
            }
            tops: dict[str, tuple[str, int, bool]] = {}
            for src in self.sources.get(name, []):
                for line, module, _, tc, _ in src.facts[0]:
                    top = module.partition(".")[0]
                    if top in workspace_imports:
                        continue
                    prev = tops.get(top)
                    if prev is None or (prev[2] and not tc):
                        tops[top] = (src.path, line, tc)
                    if tc:
                        continue
                    provides = self._provides(top)
                    if any(provides(d) for d in declared):
                        continue
                    self.add(
                        "undeclared_third_party",
                        name,
                        src.path,
                        line,
                        f"{name} imports third-party {top!r} at run time but does not declare it",
                        f"add the distribution to [project] dependencies of "
                        f"{app.directory}/pyproject.toml (or move the import under "
                        "`if TYPE_CHECKING:` if it is only for types)",
                    )
            for dist, dep in sorted(declared.items()):
                if any(self._provides(top)(dist) for top in tops):
                    continue
                self.add(
                    "unused_dependency",
                    name,
                    f"{app.directory}/pyproject.toml",
                    dep.line,
                    f"{name} declares third-party {dist!r} ({dep.describe()}) but no file "
                    "under src/ imports it",
                    "remove it, or map its import name in [third_party.import_names]",
                )

    # -- graph rules ---------------------------------------------------------------------
    def _cycles(self) -> None:
        declared = {n: {d for d, _, _, _ in self._internal(a)} for n, a in self.apps.items()}
        allowed = {n: set(p.allow) for n, p in self.policy.apps.items()}
        seen: set[frozenset[str]] = set()
        for label, graph in (
            ("declared in pyproject files", declared),
            (f"allowed by {POLICY_FILE}", allowed),
        ):
            for cycle in cycles(graph):
                key = frozenset(cycle)
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
            app = self.apps.get(name)
            if app is None:
                continue
            for dep, kind, line, where in self._internal(app):
                other = self.policy.apps.get(dep)
                if other is not None and kind != "group" and roles[other.role].test_only:
                    self.add(
                        "role_violation",
                        name,
                        f"{app.directory}/pyproject.toml",
                        line,
                        f"{name} depends on {dep} ({other.role}) in {where}; apps of role "
                        f"{other.role} are test-only",
                        f'move it to a dependency group, e.g. [dependency-groups] test = ["{dep}"]',
                    )

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
            pyproject = f"{app.directory}/pyproject.toml"
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
