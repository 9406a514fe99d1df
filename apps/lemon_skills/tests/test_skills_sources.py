"""A source of each kind fetched for real and installed with the trust level the seed assigns:
git over file://, the registry and well-known documents from a real HTTP server on loopback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lemon_skills import (
    SkillManager,
    SkillSourceError,
    SkillsSettings,
    SourceKind,
    TrustLevel,
    discover_well_known,
)


def yes(_plan: object) -> bool:
    return True


def _installed(manager: SkillManager, name: str) -> tuple[SourceKind, TrustLevel, str | None]:
    record = manager.get(name)
    assert (manager.path_of(name) / "SKILL.md").is_file()
    assert manager.current_hash(name) == record.bundle_hash
    return record.source_kind, record.trust, record.resolved_ref


def test_builtin_skills_are_seeded_at_first_start_without_fetching(
    manager: SkillManager,
) -> None:
    names = [r.name for r in manager.records()]
    assert "skill-creator" in names
    assert _installed(manager, "skill-creator") == (SourceKind.BUILTIN, TrustLevel.BUILTIN, None)
    record = manager.get("skill-creator")
    assert record.verdict == "pass"
    assert manager.ensure_seeded() == []  # once


def test_an_uninstalled_builtin_is_not_seeded_again_until_asked(manager: SkillManager) -> None:
    manager.records()
    manager.uninstall("skill-creator")  # builtin: auto-approved
    assert "skill-creator" not in [r.name for r in manager.records()]
    outcome = manager.install("builtin")
    assert outcome.changed
    assert manager.get("skill-creator").trust is TrustLevel.BUILTIN


def test_a_local_directory_is_trusted(
    manager: SkillManager, make_skill: Callable[..., Path]
) -> None:
    make_skill("notes")
    manager.install("./src/notes", approve=yes)
    assert _installed(manager, "notes") == (SourceKind.LOCAL, TrustLevel.TRUSTED, None)


@pytest.mark.parametrize("prefix", ["", "git+"])
def test_a_git_url_over_file_is_community_and_records_the_commit(
    manager: SkillManager, git_repo: Callable[..., tuple[str, str]], skill_text: Any, prefix: str
) -> None:
    url, commit = git_repo("repo", {"SKILL.md": skill_text("from-git"), "references/a.md": "A\n"})
    manager.install(prefix + url, approve=yes)
    assert _installed(manager, "from-git") == (SourceKind.GIT, TrustLevel.COMMUNITY, commit)
    assert not (manager.path_of("from-git") / ".git").exists()
    assert (manager.path_of("from-git") / "references" / "a.md").read_text() == "A\n"


def test_a_hermes_id_is_official_and_fetches_its_directory(
    manager: SkillManager, git_repo: Callable[..., tuple[str, str]], skill_text: Any
) -> None:
    _, commit = git_repo("hermes", {"skills/devops/docker/SKILL.md": skill_text("docker"),
                                    "README.md": "not part of the skill\n"})  # fmt: skip
    manager.install("hermes:devops/docker", approve=yes)
    assert _installed(manager, "docker") == (SourceKind.GIT, TrustLevel.OFFICIAL, commit)
    assert sorted(p.name for p in manager.path_of("docker").iterdir()) == ["SKILL.md"]


@pytest.mark.parametrize(
    ("ref", "trust"),
    [("official/devops/k8s-rollout", TrustLevel.OFFICIAL),
     ("community/tools/gh-cli", TrustLevel.COMMUNITY)],
)  # fmt: skip
def test_a_registry_entry_is_looked_up_in_the_index_and_trusted_by_namespace(
    manager: SkillManager, git_repo: Callable[..., tuple[str, str]], skill_text: Any,
    index_server: Any, ref: str, trust: TrustLevel,
) -> None:  # fmt: skip
    name = ref.rsplit("/", 1)[1]
    url, commit = git_repo("registry", {f"pkg/{name}/SKILL.md": skill_text(name)})
    index_server.documents[f"/skills/{ref}"] = {"clone_url": url, "subdir": f"pkg/{name}"}
    manager.install(ref, approve=yes)
    assert _installed(manager, name) == (SourceKind.REGISTRY, trust, commit)
    assert index_server.requests == [f"/skills/{ref}"]


def test_a_registry_entry_the_index_does_not_know_fails_clearly(manager: SkillManager) -> None:
    with pytest.raises(SkillSourceError, match="no such skill in the index"):
        manager.install("official/devops/nothing-here", approve=yes)


def test_a_registry_index_with_a_bad_document_fails_clearly(
    manager: SkillManager, index_server: Any
) -> None:
    index_server.documents["/skills/acme/x/y"] = {"clone_url": "git://insecure/x"}
    with pytest.raises(SkillSourceError, match="not authenticated"):
        manager.install("acme/x/y", approve=yes)


def test_well_known_discovery_is_community_whatever_host_answers(
    manager: SkillManager, settings: SkillsSettings, git_repo: Callable[..., tuple[str, str]],
    skill_text: Any, index_server: Any,
) -> None:  # fmt: skip
    url, commit = git_repo("wk", {"SKILL.md": skill_text("lint-fix")})
    index_server.documents["/mirror/lint-fix.json"] = {"clone_url": url}
    found = discover_well_known("lint-fix", settings)
    assert [(s.kind, s.trust) for s in found] == [(SourceKind.WELL_KNOWN, TrustLevel.COMMUNITY)]
    assert found[0].identifier == f"{index_server.url}/mirror/lint-fix.json"
    manager.install_source(found[0], approve=yes)
    assert _installed(manager, "lint-fix") == (SourceKind.WELL_KNOWN, TrustLevel.COMMUNITY, commit)
    # update reads the same well-known URL again
    git_repo("wk", {"SKILL.md": skill_text("lint-fix", body="Newer.\n")})
    assert manager.update("lint-fix", approve=yes).changed
    assert "Newer." in (manager.path_of("lint-fix") / "SKILL.md").read_text()


def test_a_new_release_of_a_builtin_updates_without_audit_or_approval(
    settings: SkillsSettings, tmp_path: Path, skill_text: Any
) -> None:
    import dataclasses

    shipped = tmp_path / "shipped"
    (shipped / "helper").mkdir(parents=True)
    (shipped / "helper" / "SKILL.md").write_text(skill_text("helper", body="v1\n"))
    manager = SkillManager(dataclasses.replace(settings, builtin_dir=shipped))
    assert [r.name for r in manager.records()] == ["helper"]
    (shipped / "helper" / "SKILL.md").write_text(skill_text("helper", body="v2 curl x | sh\n"))
    outcome = manager.update("helper")  # builtin: auto-approved, not audited
    assert outcome.changed
    record = manager.get("helper")
    assert (record.trust, record.verdict, record.findings) == (TrustLevel.BUILTIN, "pass", ())
    assert record.bundle_hash == manager.current_hash("helper")
    assert "v2" in (manager.path_of("helper") / "SKILL.md").read_text()


def test_a_gh_shorthand_clones_owner_repo_from_the_github_host(
    manager: SkillManager, git_repo: Callable[..., tuple[str, str]], skill_text: Any
) -> None:
    _, commit = git_repo("gh/acme/k8s-skill.git", {"SKILL.md": skill_text("k8s-skill")})
    manager.install("gh:acme/k8s-skill", approve=yes)
    assert _installed(manager, "k8s-skill") == (SourceKind.GIT, TrustLevel.COMMUNITY, commit)
    assert manager.get("k8s-skill").location.endswith("/gh/acme/k8s-skill.git")


def test_an_ssh_url_is_cloned_over_the_ssh_transport(
    manager: SkillManager, git_repo: Callable[..., tuple[str, str]], skill_text: Any,
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    url, commit = git_repo("over-ssh", {"SKILL.md": skill_text("over-ssh")})
    # git speaks its real protocol through this "ssh": it runs the remote command locally.
    ssh = tmp_path / "fake-ssh"
    ssh.write_text('#!/bin/sh\nfor last; do :; done\necho "$@" >> "$0.log"\nexec sh -c "$last"\n')
    ssh.chmod(0o755)
    monkeypatch.setenv("GIT_SSH_COMMAND", str(ssh))
    path = url.removeprefix("file://")
    manager.install(f"git@skills.example:{path}", approve=yes)
    assert _installed(manager, "over-ssh") == (SourceKind.GIT, TrustLevel.COMMUNITY, commit)
    assert "skills.example git-upload-pack" in (tmp_path / "fake-ssh.log").read_text()
