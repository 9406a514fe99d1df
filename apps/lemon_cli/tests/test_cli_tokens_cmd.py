"""``lemon tokens create|list|rotate|revoke|local`` as a real subprocess: a Typer group like the
others (per-verb help, ``--json`` on list, create and rotate), the token store of the control
plane underneath (hashed at rest), usage errors exit 2 with one clear line."""

from __future__ import annotations

import json
from pathlib import Path

from lemon_control_plane.config import hash_token
from lemon_platform_test.lemon_process import run_lemon


def test_each_verb_has_its_own_help(env: dict[str, str]) -> None:
    group = run_lemon(env, "tokens", "--help")
    assert group.returncode == 0, group.stderr
    assert "python -m lemon_control_plane" not in group.stdout
    assert "Usage: lemon tokens" in group.stdout
    for verb in ("create", "list", "rotate", "revoke", "local"):
        assert verb in group.stdout
    create = run_lemon(env, "tokens", "create", "--help")
    assert create.returncode == 0
    assert "Usage: lemon tokens create [OPTIONS]" in create.stdout
    assert "NAME" in create.stdout
    assert "--scopes" in create.stdout
    assert "--json" in create.stdout
    assert "--json" in run_lemon(env, "tokens", "list", "--help").stdout
    assert "--env" in run_lemon(env, "tokens", "local", "--help").stdout


def test_create_list_rotate_revoke_as_json(env: dict[str, str], tmp_path: Path) -> None:
    created = run_lemon(env, "tokens", "create", "ci", "--scopes", "write,read", "--json")
    assert created.returncode == 0, created.stderr
    document = json.loads(created.stdout)
    assert document["version"] == 1
    assert (document["name"], document["scopes"]) == ("ci", ["read", "write"])
    secret = document["token"]
    assert secret.startswith("lcp_")
    stored = (tmp_path / "home" / "control_plane" / "tokens.json").read_text()
    assert secret not in stored  # hashed at rest
    assert hash_token(secret) in stored

    listed = json.loads(run_lemon(env, "tokens", "list", "--json").stdout)
    assert listed["version"] == 1
    [row] = listed["tokens"]
    assert (row["id"], row["name"], row["state"]) == (document["id"], "ci", "active")
    assert "token" not in row  # never the secret,
    assert "hash" not in row  # nor its hash

    rotated = run_lemon(env, "tokens", "rotate", document["id"], "--json")
    assert rotated.returncode == 0, rotated.stderr
    new_secret = json.loads(rotated.stdout)["token"]
    assert new_secret != secret
    assert (
        hash_token(new_secret) in (tmp_path / "home" / "control_plane" / "tokens.json").read_text()
    )

    revoked = run_lemon(env, "tokens", "revoke", document["id"])
    assert revoked.returncode == 0, revoked.stderr
    assert f"revoked token {document['id']} (ci)" in revoked.stdout
    [row] = json.loads(run_lemon(env, "tokens", "list", "--json").stdout)["tokens"]
    assert row["state"] == "revoked"
    assert row["revoked_at_ms"] > 0
    plain = run_lemon(env, "tokens", "list")
    assert f"{document['id']}  ci  read,write  revoked" in plain.stdout


def test_an_empty_list_says_so(env: dict[str, str]) -> None:
    listed = run_lemon(env, "tokens", "list")
    assert listed.returncode == 0, listed.stderr
    assert "no tokens" in listed.stdout
    assert "lemon tokens create" in listed.stdout
    assert json.loads(run_lemon(env, "tokens", "list", "--json").stdout)["tokens"] == []


def test_usage_errors_exit_2_with_one_clear_line(env: dict[str, str]) -> None:
    scopes = run_lemon(env, "tokens", "create", "ci", "--scopes", "read,root")
    assert scopes.returncode == 2
    assert "scopes must be some of admin, approvals, read, write; got root" in scopes.stderr
    assert "Traceback" not in scopes.stderr
    missing = run_lemon(env, "tokens", "revoke", "nosuch")
    assert missing.returncode == 2
    assert "no token with id 'nosuch'" in missing.stderr
    assert "lemon tokens list" in missing.stderr
    blank = run_lemon(env, "tokens", "create", "  ")
    assert blank.returncode == 2
    assert "a token needs a name" in blank.stderr
    no_name = run_lemon(env, "tokens", "create")
    assert no_name.returncode == 2
    assert "Missing argument 'NAME'" in no_name.stderr
    unknown = run_lemon(env, "tokens", "mint")
    assert unknown.returncode == 2
    assert "No such command 'mint'" in unknown.stderr


def test_a_damaged_token_file_is_one_line(env: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "home" / "control_plane" / "tokens.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    listed = run_lemon(env, "tokens", "list")
    assert listed.returncode == 1
    assert f"the token file {path} cannot be read" in listed.stderr
    assert "Traceback" not in listed.stderr
