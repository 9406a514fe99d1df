"""The architecture policy: ``architecture.toml`` at the workspace root, read as data.

The file format is documented in the app README. Loading is strict: an unknown key, a wrong
type, a role that is not defined or an exception without a reason raises :class:`PolicyError`
naming the key and what to write instead, because a typo in a policy must not silently weaken it.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lemon_quality.errors import PolicyError

POLICY_FILE = "architecture.toml"
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
SCHEMA = 1


def canonical(name: str) -> str:
    """Normalise a distribution or app name (PEP 503, ``_``): ``Foo.Bar-baz`` -> ``foo_bar_baz``."""
    return re.sub(r"[-_.]+", "_", name).lower()


@dataclass(frozen=True, kw_only=True, slots=True)
class ReferenceException:
    """Source files of an app that may import ``target`` without a pyproject edge."""

    target: str
    files: tuple[str, ...]
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class BootException:
    """An ``AppSpec.requires`` / ``before`` name that may break the role rules, with a reason."""

    target: str
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class AppPolicy:
    """The current policy of one app."""

    name: str
    role: str
    allow: tuple[str, ...]
    reference_only: tuple[ReferenceException, ...]
    packages: tuple[str, ...] = ()
    source_roots: tuple[str, ...] = ()
    exports: tuple[str, ...] | None = None
    deny_third_party: tuple[str, ...] = ()
    import_names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    boot_exceptions: tuple[BootException, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class TargetApp:
    """Where an app (existing or planned) is headed: drift from it is reported, never failed."""

    name: str
    role: str
    allow: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Role:
    """A role and the roles its apps may depend on."""

    name: str
    description: str
    may_depend_on: tuple[str, ...]
    test_only: bool
    deny_third_party: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class ForbiddenReference:
    """Only ``allowed_apps`` (and the owner of ``module``) may import ``module`` or below it.

    With ``from_modules`` the rule is scoped the other way round: the listed modules (and
    their submodules) may not import ``module``, whatever app they belong to (``allowed_apps``
    must then be empty). It keeps a client to its seam inside an app that, as a whole, may
    depend on more (a composition root and its client in one app).
    """

    module: str
    allowed_apps: tuple[str, ...]
    reason: str
    from_modules: tuple[str, ...] = ()

    def scoped_to(self, module: str) -> bool:
        """Whether the rule applies to code in ``module`` (always, when not scoped)."""
        if not self.from_modules:
            return True
        return any(module == m or module.startswith(m + ".") for m in self.from_modules)


@dataclass(frozen=True, kw_only=True, slots=True)
class Policy:
    """The whole policy file."""

    apps: Mapping[str, AppPolicy]
    roles: Mapping[str, Role]
    target: Mapping[str, TargetApp]
    forbidden_references: tuple[ForbiddenReference, ...]
    import_names: Mapping[str, tuple[str, ...]]
    scan_exclude: tuple[str, ...]
    boundaries_doc: str
    link_roots: tuple[str, ...]
    max_file_bytes: int = 2_000_000


def load_policy(root: Path) -> Policy:
    """Read and validate ``<root>/architecture.toml``."""
    path = root / POLICY_FILE
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PolicyError(
            f"{POLICY_FILE} not found at the workspace root ({root}): create it "
            "(see the lemon_quality README for the format)"
        ) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PolicyError(f"{POLICY_FILE}: cannot read it: {exc}") from exc
    return parse_policy(raw)


def parse_policy(raw: Mapping[str, Any]) -> Policy:
    """Validate an already-decoded policy document."""
    _keys(
        raw,
        "",
        {
            "schema",
            "scan",
            "docs",
            "roles",
            "apps",
            "target",
            "forbidden_references",
            "third_party",
        },
    )
    if raw.get("schema") != SCHEMA:
        raise PolicyError(f"{POLICY_FILE}: `schema = {SCHEMA}` is required at the top")
    scan = _table(raw, "scan")
    _keys(scan, "scan", {"exclude", "max_file_bytes"})
    max_bytes = scan.get("max_file_bytes", 2_000_000)
    if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 1:
        raise PolicyError(f"{POLICY_FILE}: scan.max_file_bytes must be a positive integer")
    docs = _table(raw, "docs")
    _keys(docs, "docs", {"boundaries", "link_roots"})
    third = _table(raw, "third_party")
    _keys(third, "third_party", {"import_names"})
    import_names = _import_names(_table(third, "import_names", "third_party."), "third_party")
    roles: dict[str, Role] = {}
    for name, body in _table(raw, "roles").items():
        where = f"roles.{name}"
        body = _as_table(body, where)
        _keys(body, where, {"description", "may_depend_on", "test_only", "deny_third_party"})
        test_only = body.get("test_only", False)
        if not isinstance(test_only, bool):
            raise PolicyError(f"{POLICY_FILE}: {where}.test_only must be true or false")
        roles[name] = Role(
            name=name,
            description=_str(body, "description", where, ""),
            may_depend_on=_names(body, "may_depend_on", where),
            test_only=test_only,
            deny_third_party=tuple(canonical(n) for n in _names(body, "deny_third_party", where)),
        )
    for role in roles.values():
        for other in role.may_depend_on:
            if other not in roles:
                raise PolicyError(
                    f"{POLICY_FILE}: roles.{role.name}.may_depend_on names "
                    f"undefined role {other!r}; define [roles.{other}] or remove it"
                )
    apps: dict[str, AppPolicy] = {}
    for name, body in _table(raw, "apps").items():
        where = f"apps.{name}"
        body = _as_table(body, where)
        _keys(
            body,
            where,
            {
                "role",
                "allow",
                "reference_only",
                "packages",
                "source_roots",
                "exports",
                "deny_third_party",
                "import_names",
                "boot_exceptions",
            },
        )
        role_name = _role(body, where, roles)
        exceptions = []
        for i, exc in enumerate(_list(body, "reference_only", where)):
            ewhere = f"{where}.reference_only[{i}]"
            exc = _as_table(exc, ewhere)
            _keys(exc, ewhere, {"target", "files", "reason"})
            exc_target = _str(exc, "target", ewhere)
            files = _names(exc, "files", ewhere)
            reason = _str(exc, "reason", ewhere).strip()
            if not files:
                raise PolicyError(
                    f"{POLICY_FILE}: {ewhere}.files must list at least one file "
                    f"(relative to apps/{name}/)"
                )
            if not reason:
                raise PolicyError(
                    f"{POLICY_FILE}: {ewhere}.reason must say why the exception exists"
                )
            exceptions.append(
                ReferenceException(target=canonical(exc_target), files=files, reason=reason)
            )
        boot = []
        for i, exc in enumerate(_list(body, "boot_exceptions", where)):
            ewhere = f"{where}.boot_exceptions[{i}]"
            exc = _as_table(exc, ewhere)
            _keys(exc, ewhere, {"target", "reason"})
            reason = _str(exc, "reason", ewhere).strip()
            if not reason:
                raise PolicyError(f"{POLICY_FILE}: {ewhere}.reason must say why it exists")
            boot.append(BootException(target=canonical(_str(exc, "target", ewhere)), reason=reason))
        for key in ("packages", "exports"):
            for dotted in _names(body, key, where):
                if not _DOTTED.fullmatch(dotted.removesuffix(".*")):
                    raise PolicyError(
                        f"{POLICY_FILE}: {where}.{key} entries must be dotted module names, "
                        f"got {dotted!r}"
                    )
        for root_path in _names(body, "source_roots", where):
            if root_path.startswith("/") or ".." in root_path.split("/"):
                raise PolicyError(
                    f"{POLICY_FILE}: {where}.source_roots entries are relative to the app "
                    f"directory and stay inside it, got {root_path!r}"
                )
        apps[canonical(name)] = AppPolicy(
            name=canonical(name),
            role=role_name,
            allow=tuple(sorted(canonical(a) for a in _names(body, "allow", where))),
            reference_only=tuple(exceptions),
            packages=_names(body, "packages", where),
            source_roots=_names(body, "source_roots", where),
            exports=_names(body, "exports", where) if "exports" in body else None,
            deny_third_party=tuple(canonical(n) for n in _names(body, "deny_third_party", where)),
            import_names=_import_names(_table(body, "import_names", where + "."), where),
            boot_exceptions=tuple(boot),
        )
    target: dict[str, TargetApp] = {}
    for name, body in _table(raw, "target").items():
        where = f"target.{name}"
        body = _as_table(body, where)
        _keys(body, where, {"role", "allow"})
        target[canonical(name)] = TargetApp(
            name=canonical(name),
            role=_role(body, where, roles),
            allow=tuple(sorted(canonical(a) for a in _names(body, "allow", where))),
        )
    forbidden = []
    for i, rule in enumerate(_list(raw, "forbidden_references", "")):
        where = f"forbidden_references[{i}]"
        rule = _as_table(rule, where)
        _keys(rule, where, {"module", "allowed_apps", "reason", "from_modules"})
        module = _str(rule, "module", where)
        if not _DOTTED.fullmatch(module):
            raise PolicyError(
                f"{POLICY_FILE}: {where}.module must be a dotted module name, got {module!r}"
            )
        scope = tuple(_names(rule, "from_modules", where)) if "from_modules" in rule else ()
        for dotted in scope:
            if not _DOTTED.fullmatch(dotted):
                raise PolicyError(
                    f"{POLICY_FILE}: {where}.from_modules entries must be dotted module names, "
                    f"got {dotted!r}"
                )
        allowed = tuple(canonical(a) for a in _names(rule, "allowed_apps", where))
        if scope and allowed:
            raise PolicyError(
                f"{POLICY_FILE}: {where} has both from_modules and allowed_apps; a rule scoped "
                "to modules forbids the reference from them alone (drop allowed_apps)"
            )
        forbidden.append(
            ForbiddenReference(
                module=module,
                allowed_apps=allowed,
                reason=_str(rule, "reason", where),
                from_modules=scope,
            )
        )
    return Policy(
        apps=apps,
        roles=roles,
        target=target,
        forbidden_references=tuple(forbidden),
        import_names=import_names,
        max_file_bytes=max_bytes,
        scan_exclude=tuple(p.strip("/") for p in _names(scan, "exclude", "scan")),
        boundaries_doc=_str(docs, "boundaries", "docs", "docs/architecture_boundaries.md"),
        link_roots=_names(docs, "link_roots", "docs")
        if "link_roots" in docs
        else ("README.md", "docs"),
    )


def _import_names(table: Mapping[str, Any], where: str) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for key, value in table.items():
        values = [value] if isinstance(value, str) else value
        if not (
            isinstance(values, list) and values and all(isinstance(v, str) and v for v in values)
        ):
            raise PolicyError(
                f"{POLICY_FILE}: {where}.import_names.{key} must be a distribution name or an "
                "array of them (the distributions that provide that import name)"
            )
        out[key] = tuple(sorted({canonical(v) for v in values}))
    return out


def _keys(table: Mapping[str, Any], where: str, allowed: set[str]) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        prefix = f"{where}." if where else ""
        raise PolicyError(
            f"{POLICY_FILE}: unknown key {prefix}{unknown[0]}; allowed here: "
            + ", ".join(sorted(allowed))
        )


def _as_table(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise PolicyError(f"{POLICY_FILE}: {where} must be a table")
    return value


def _table(raw: Mapping[str, Any], key: str, prefix: str = "") -> Mapping[str, Any]:
    return _as_table(raw.get(key, {}), prefix + key)


def _list(raw: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = raw.get(key, [])
    if not isinstance(value, list):
        raise PolicyError(f"{POLICY_FILE}: {where + '.' if where else ''}{key} must be an array")
    return value


def _names(raw: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = _list(raw, key, where)
    if not all(isinstance(v, str) and v for v in value):
        raise PolicyError(f"{POLICY_FILE}: {where}.{key} must be an array of non-empty strings")
    return tuple(value)


def _str(raw: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = raw.get(key, default)
    if not isinstance(value, str):
        raise PolicyError(f"{POLICY_FILE}: {where}.{key} must be a string")
    return value


def _role(body: Mapping[str, Any], where: str, roles: Mapping[str, Role]) -> str:
    role = _str(body, "role", where)
    if role not in roles:
        defined = ", ".join(sorted(roles)) or "none"
        raise PolicyError(
            f"{POLICY_FILE}: {where}.role is {role!r}, which is not defined "
            f"under [roles] (defined: {defined})"
        )
    return role
