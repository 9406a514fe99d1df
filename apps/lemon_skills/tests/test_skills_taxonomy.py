"""The taxonomy in code equals the README tables; every identifier form routes as the seed says."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lemon_skills
from lemon_skills import (
    SkillsSettings,
    SkillsUsageError,
    SourceKind,
    SourceRouter,
    TrustLevel,
    TrustPolicy,
)

README = Path(__file__).parents[1] / "README.md"


def _first_column(section: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    start = text.index(f"## {section}\n")
    end = text.find("\n## ", start + 1)
    rows = re.findall(r"^\| `([a-z_]+)` \|", text[start:end], flags=re.MULTILINE)
    return rows


def test_the_source_kinds_in_code_are_the_taxonomy_table() -> None:
    assert _first_column("Source kinds") == [k.value for k in SourceKind]


def test_the_trust_levels_in_code_are_the_trust_table_in_order() -> None:
    assert _first_column("Trust levels") == [t.value for t in TrustLevel]
    ordered = sorted(TrustLevel, reverse=True)
    assert [t.value for t in ordered] == ["builtin", "official", "trusted", "community"]
    assert TrustLevel.BUILTIN > TrustLevel.OFFICIAL > TrustLevel.TRUSTED > TrustLevel.COMMUNITY


def test_the_public_names_are_exactly_all() -> None:
    # The facade loads its names on first use (PEP 562): __all__ lists exactly what it exports,
    # and each name resolves to the object of the module that defines it.
    assert sorted(lemon_skills._EXPORTS) == sorted(lemon_skills.__all__)
    for name in lemon_skills.__all__:
        module, attr = lemon_skills._EXPORTS[name]
        assert getattr(lemon_skills, name) is getattr(importlib.import_module(module), attr)
    assert lemon_skills.__all__ == sorted(lemon_skills.__all__, key=lambda n: (not n.isupper(), n))


def test_only_builtin_skips_audit_and_approval() -> None:
    policy = TrustPolicy()
    assert [t for t in TrustLevel if not policy.requires_audit(t)] == [TrustLevel.BUILTIN]
    assert [t for t in TrustLevel if policy.auto_approved(t)] == [TrustLevel.BUILTIN]


@pytest.fixture
def router(tmp_path: Path) -> SourceRouter:
    settings = SkillsSettings(home=tmp_path / "home", hermes_url="https://example.org/hermes.git")
    return SourceRouter(settings, cwd=tmp_path)


ROWS = [
    ("builtin", SourceKind.BUILTIN, TrustLevel.BUILTIN, ""),
    ("  builtin  ", SourceKind.BUILTIN, TrustLevel.BUILTIN, ""),
    ("builtin:skill-creator", SourceKind.BUILTIN, TrustLevel.BUILTIN, "skill-creator"),
    ("https://github.com/user/skill-repo", SourceKind.GIT, TrustLevel.COMMUNITY,
     "https://github.com/user/skill-repo"),
    ("git+https://github.com/acme/skill", SourceKind.GIT, TrustLevel.COMMUNITY,
     "https://github.com/acme/skill"),
    ("git+ssh://git@example.org/acme/skill.git", SourceKind.GIT, TrustLevel.COMMUNITY,
     "ssh://git@example.org/acme/skill.git"),
    ("git@github.com:acme/k8s-skill.git", SourceKind.GIT, TrustLevel.COMMUNITY,
     "git@github.com:acme/k8s-skill.git"),
    ("ssh://git@example.org/acme/skill.git", SourceKind.GIT, TrustLevel.COMMUNITY,
     "ssh://git@example.org/acme/skill.git"),
    ("file:///srv/repos/skill", SourceKind.GIT, TrustLevel.COMMUNITY, "file:///srv/repos/skill"),
    ("gh:acme/k8s-skill", SourceKind.GIT, TrustLevel.COMMUNITY,
     "https://github.com/acme/k8s-skill.git"),
    ("hermes:devops/docker", SourceKind.GIT, TrustLevel.OFFICIAL,
     "https://example.org/hermes.git"),
    ("official/devops/k8s-rollout", SourceKind.REGISTRY, TrustLevel.OFFICIAL,
     "official/devops/k8s-rollout"),
    ("official/languages/python/typing", SourceKind.REGISTRY, TrustLevel.OFFICIAL,
     "official/languages/python/typing"),
    ("community/tools/gh-cli", SourceKind.REGISTRY, TrustLevel.COMMUNITY,
     "community/tools/gh-cli"),
    ("acme/tools/deploy", SourceKind.REGISTRY, TrustLevel.COMMUNITY, "acme/tools/deploy"),
]  # fmt: skip


@pytest.mark.parametrize(("identifier", "kind", "trust", "location"), ROWS)
def test_each_identifier_form_routes_to_its_kind_and_trust(
    router: SourceRouter, identifier: str, kind: SourceKind, trust: TrustLevel, location: str
) -> None:
    source = router.route(identifier)
    assert (source.kind, source.trust, source.location) == (kind, trust, location)
    assert source.identifier == identifier.strip()


def test_hermes_ids_point_into_the_hermes_repository(router: SourceRouter) -> None:
    assert router.route("hermes:devops/docker").subdir == "skills/devops/docker"


@pytest.mark.parametrize("identifier", ["/abs/skill", "./my-skill", "../sibling", "~/mine", "."])
def test_paths_are_local_and_trusted(router: SourceRouter, tmp_path: Path,
                                     identifier: str) -> None:  # fmt: skip
    source = router.route(identifier)
    assert (source.kind, source.trust) == (SourceKind.LOCAL, TrustLevel.TRUSTED)
    assert Path(source.location).is_absolute()
    if identifier.startswith("./"):
        assert source.location == str(tmp_path / "my-skill")


def test_a_path_inside_the_installation_is_not_a_local_source(
    router: SourceRouter, tmp_path: Path
) -> None:
    with pytest.raises(SkillsUsageError, match="inside Lemon's skills directory"):
        router.route(str(tmp_path / "home" / "skills" / "installed" / "x"))


@pytest.mark.parametrize(
    "identifier", ["", "some-skill", "official/devops", "C:\\skills\\x", "builtin/commit-guide"]
)
def test_an_unknown_form_is_an_error_listing_the_forms(router: SourceRouter,
                                                       identifier: str) -> None:  # fmt: skip
    with pytest.raises(SkillsUsageError) as caught:
        router.route(identifier)
    message = str(caught.value)
    assert "cannot resolve the skill source" in message
    for form in ("builtin", "gh:<owner>/<repo>", "hermes:<collection>/<path>",
                 "<namespace>/<group>/<name>", "./skill", "git+<url>"):  # fmt: skip
        assert form in message


@pytest.mark.parametrize(
    ("identifier", "needle"),
    [("gh:", "gh:<owner>/<repo>"), ("gh:acme", "gh:<owner>/<repo>"),
     ("gh:-bad/x/y", "gh:<owner>/<repo>"), ("hermes:docker", "hermes:<collection>/<path>"),
     ("hermes:a/../b", "hermes:<collection>/<path>"), ("git://example.org/x", "not authenticated"),
     ("http://example.org/x.git", "not authenticated"), ("git+ftp://x/y", "not a git URL")],
)  # fmt: skip
def test_malformed_shorthands_say_how_to_write_them(router: SourceRouter, identifier: str,
                                                    needle: str) -> None:  # fmt: skip
    with pytest.raises(SkillsUsageError, match=re.escape(needle)):
        router.route(identifier)


_ASSIGNED = {
    SourceKind.BUILTIN: {TrustLevel.BUILTIN},
    SourceKind.LOCAL: {TrustLevel.TRUSTED},
    SourceKind.GIT: {TrustLevel.OFFICIAL, TrustLevel.COMMUNITY},
    SourceKind.REGISTRY: {TrustLevel.OFFICIAL, TrustLevel.COMMUNITY},
}


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=40),
        st.from_regex(
            r"(builtin|git\+|gh:|hermes:|git@|https://|file://|\./|~|official/)"
            r"[A-Za-z0-9_./:@-]{0,30}",
            fullmatch=True,
        ),
    )
)
def test_any_identifier_routes_by_the_trust_table_or_is_a_usage_error(identifier: str) -> None:
    router = SourceRouter(SkillsSettings(home=Path("/nonexistent/home")), cwd=Path("/tmp"))
    try:
        source = router.route(identifier)
    except SkillsUsageError:
        return  # a clear usage error (never another exception)
    assert source.trust in _ASSIGNED[source.kind]
    assert source.kind is not SourceKind.WELL_KNOWN  # no identifier form
    if source.trust is TrustLevel.OFFICIAL:
        head = source.identifier.split("/", 1)[0].lower()
        assert source.identifier.startswith("hermes:") or head == "official"


def test_a_lazy_export_is_never_shadowed_by_the_module_that_defines_it() -> None:
    """A fresh interpreter: touching one name of a module (which imports it) must not turn
    another exported name into that module (a module called like its function did)."""
    import subprocess
    import sys

    code = (
        "import lemon_skills\n"
        "for name in lemon_skills.__all__:\n"
        "    getattr(lemon_skills, name)\n"
        "for name in lemon_skills.__all__:\n"
        "    module, attr = lemon_skills._EXPORTS[name]\n"
        "    value = getattr(lemon_skills, name)\n"
        "    assert not isinstance(value, type(lemon_skills)), name\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
