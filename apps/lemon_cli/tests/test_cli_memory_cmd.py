"""``lemon memory`` as a real subprocess, against a real daemon (``lemon daemon start``: status,
list, search, add, consolidate, show, export, forget) and with no daemon, on the store itself
(add, show, search --explain / --all, stats, export, import with bad lines, forget --scope,
consolidate; a corrupt store: one line, exit 1); ``lemon doctor``'s memory line; ``lemon
memory eval`` on the labelled set (no daemon needed) and on bad files."""

from __future__ import annotations

import json
from pathlib import Path

from lemon_platform_test.lemon_process import run_lemon

SECRET = "Zq8Lp2Vx9Tr4Wm7Ks1Nd6Hy3Bc5Fg0Ja"


def _lines(*docs: dict[str, object]) -> str:
    return "".join(json.dumps(d) + "\n" for d in docs)


def test_memory_without_a_daemon_works_on_the_store(env: dict[str, str], tmp_path: Path) -> None:
    home = Path(env["LEMON_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "secrets.env").write_text(f"STAGING_TOKEN={SECRET}\n", encoding="utf-8")
    added = run_lemon(env, "memory", "add", "the release checklist is in docs/RELEASE.md",
                      "--tag", "release", "--ttl", "7d", "--json", cwd=tmp_path)  # fmt: skip
    assert added.returncode == 0, added.stderr
    doc = json.loads(added.stdout)
    assert (doc["scope"], doc["agent_id"], doc["source"]) == ("agent", "default", "cli")
    refused = run_lemon(env, "memory", "add", f"the token is {SECRET}")
    assert refused.returncode == 2
    assert "secret" in refused.stderr
    assert SECRET not in refused.stderr
    assert run_lemon(env, "memory", "add", "x", "--ttl", "0s").returncode == 2
    shown = run_lemon(env, "memory", "show", doc["doc_id"])
    assert shown.returncode == 0, shown.stderr
    assert "tags: release" in shown.stdout
    assert shown.stdout.rstrip().endswith("the release checklist is in docs/RELEASE.md")
    assert run_lemon(env, "memory", "show", "mem_nope").returncode == 1
    explained = run_lemon(env, "memory", "search", "release checklist", "--explain")
    assert explained.returncode == 0, explained.stderr
    assert doc["doc_id"] in explained.stdout
    assert "scope weight 0.70" in explained.stdout
    assert "embedding rank none (not installed)" in explained.stdout
    other = run_lemon(env, "memory", "search", "release", "--agent", "b")
    assert other.stdout.strip() == "nothing found"
    every = run_lemon(env, "memory", "search", "release", "--all", "--agent", "b")
    assert doc["doc_id"] in every.stdout
    assert run_lemon(env, "memory", "search", "x", "--all", "--scope", "user").returncode == 2
    stats = json.loads(run_lemon(env, "memory", "stats", "--json").stdout)
    assert (stats["available"], stats["documents"], stats["backend"]) == (True, 1, "sqlite")
    exported = tmp_path / "out.jsonl"
    assert run_lemon(env, "memory", "export", str(exported)).returncode == 0
    assert json.loads(exported.read_text(encoding="utf-8"))["doc_id"] == doc["doc_id"]

    bad = tmp_path / "in.jsonl"
    good = {"agent_id": "a", "scope": "agent", "scope_key": "a", "body": "deploys go first"}
    bad.write_text(
        _lines(good) + "{oops\n" + _lines({**good, "body": f"key {SECRET}"}), encoding="utf-8"
    )
    proc = run_lemon(env, "memory", "import", str(bad))
    assert proc.returncode == 2
    assert f"{bad}:2: not JSON" in proc.stderr
    assert f"{bad}:3: refused" in proc.stderr
    assert "nothing imported" in proc.stderr
    assert json.loads(run_lemon(env, "memory", "stats", "--json").stdout)["documents"] == 1
    kept = run_lemon(env, "memory", "import", str(bad), "--skip-bad")
    assert (kept.returncode, kept.stdout.strip()) == (0, f"imported 1 documents from {bad}")
    store = home / "store"
    assert not any(SECRET.encode() in p.read_bytes() for p in store.glob("memory.sqlite3*"))

    no = run_lemon(env, "memory", "forget", "--scope", "agent")
    assert no.returncode == 2
    assert "--yes" in no.stderr
    assert run_lemon(env, "memory", "forget").returncode == 2
    yes = run_lemon(env, "memory", "forget", "--scope", "agent", "--agent", "a", "--yes")
    assert (yes.returncode, yes.stdout.strip()) == (0, "forgot 1 agent document")
    merged = run_lemon(env, "memory", "consolidate", "--dry-run")
    assert merged.stdout.strip() == "would merge 0 documents (dry run: nothing changed)"
    for p in (added, refused, shown, explained, proc, kept, no, yes, merged):
        assert "Traceback" not in p.stderr


def test_memory_undo_puts_a_forgotten_document_back_without_a_daemon(
    env: dict[str, str],
) -> None:
    added = run_lemon(env, "memory", "add", "the backups run at 03:00 UTC", "--json")
    doc_id = json.loads(added.stdout)["doc_id"]
    assert run_lemon(env, "memory", "forget", doc_id).returncode == 0
    kept = run_lemon(env, "memory", "history", doc_id)
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout.startswith("chg_")
    assert "before forget at" in kept.stdout
    undone = run_lemon(env, "memory", "undo")
    assert undone.returncode == 0, undone.stderr
    assert undone.stdout.startswith(f"restored {doc_id}")
    assert "undid forget chg_" in undone.stdout
    found = run_lemon(env, "memory", "search", "backups", "--all", "--json")
    assert [h["document"]["doc_id"] for h in json.loads(found.stdout)["hits"]] == [doc_id]
    nothing = run_lemon(env, "memory", "undo")
    assert nothing.returncode == 2
    assert "nothing to undo" in nothing.stderr
    none = run_lemon(env, "memory", "history", doc_id)
    assert none.stdout.strip() == f"no versions of {doc_id}"
    one = run_lemon(env, "memory", "undo", "mem_unknown", "--json")
    assert one.returncode == 2
    assert json.loads(one.stdout) == {"undone": None}
    for p in (undone, nothing, one):
        assert "Traceback" not in p.stderr


def test_doctor_reports_the_memory_store_and_a_corrupt_one(env: dict[str, str]) -> None:
    assert run_lemon(env, "memory", "add", "a note").returncode == 0
    checks = json.loads(run_lemon(env, "doctor", "--json").stdout)["checks"]
    (memory,) = [c for c in checks if c["name"] == "memory"]
    assert memory["status"] == "ok"
    assert "memory.sqlite3 (sqlite): 1 documents of at most 50000" in memory["detail"]
    assert "per scope: agent 1" in memory["detail"]
    assert "embeddings not installed (lexical recall" in memory["detail"]  # the default lock
    path = Path(env["LEMON_HOME"]) / "store" / "memory.sqlite3"
    for extra in path.parent.glob("memory.sqlite3-*"):
        extra.unlink()
    path.write_bytes(b"this is not a database" * 400)
    checks = json.loads(run_lemon(env, "doctor", "--json").stdout)["checks"]
    (memory,) = [c for c in checks if c["name"] == "memory"]
    assert memory["status"] == "warn"
    assert "cannot be opened" in memory["detail"]
    assert f"mv {path} {path}.corrupt" in memory["detail"]
    assert "chat still works" in memory["detail"]
    down = run_lemon(env, "memory", "status")
    assert down.returncode == 1
    assert "cannot be opened" in down.stderr
    assert "Traceback" not in down.stderr


def test_memory_status_list_search_and_forget_on_the_running_daemon(
    env: dict[str, str], started: str
) -> None:
    status = run_lemon(env, "memory", "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["available"] is True
    listed = run_lemon(env, "memory", "list")
    assert (listed.returncode, listed.stdout.strip()) == (0, "no documents")
    assert json.loads(run_lemon(env, "memory", "list", "--json").stdout) == {"documents": []}
    found = run_lemon(env, "memory", "search", "release notes")
    assert (found.returncode, found.stdout.strip()) == (0, "nothing found")
    gone = run_lemon(env, "memory", "forget", "mem_unknown")
    assert gone.returncode == 1
    assert "no document mem_unknown" in gone.stderr
    added = run_lemon(env, "memory", "add", "deploys go through the staging cluster first")
    assert added.returncode == 0, added.stderr
    again = run_lemon(env, "memory", "add", "deploys go through the staging cluster first, always",
                      "--json")  # fmt: skip
    newest = json.loads(again.stdout)["doc_id"]
    hit = run_lemon(env, "memory", "search", "staging", "--all", "--json")
    assert len(json.loads(hit.stdout)["hits"]) == 2
    merged = run_lemon(env, "memory", "consolidate")
    assert merged.stdout.splitlines()[-1] == "merged 1 documents"
    shown = json.loads(run_lemon(env, "memory", "show", newest, "--json").stdout)
    assert len(shown["supersedes"]) == 1
    exported = run_lemon(env, "memory", "export")
    assert [json.loads(x)["doc_id"] for x in exported.stdout.splitlines()] == [newest]
    undone = run_lemon(env, "memory", "undo", "--json")  # the merge, on the daemon
    assert undone.returncode == 0, undone.stderr
    assert json.loads(undone.stdout)["undone"]["change"] == "merge"
    hit = run_lemon(env, "memory", "search", "staging", "--all", "--json")
    assert len(json.loads(hit.stdout)["hits"]) == 2
    too_many = run_lemon(env, "memory", "list", "--limit", "0")
    assert too_many.returncode == 2  # typer's own range check
    for proc in (status, listed, found, gone, too_many):
        assert "Traceback" not in proc.stderr


DATA = Path(__file__).parents[2] / "lemon_memory" / "tests" / "data" / "memory_recall_v1.json"


def test_memory_eval_prints_the_metrics_next_to_the_baselines_without_a_daemon(
    env: dict[str, str],
) -> None:
    proc = run_lemon(env, "memory", "eval", str(DATA))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "memory_recall_v1.json: 40 documents, 33 queries"
    assert "recall@5" in lines[1]
    assert "MRR@10" in lines[1]
    assert any(line.startswith("LIKE substring") for line in lines)
    assert any(line.startswith("Lemon's FTS5 rule, replayed") for line in lines)
    ours = next(line for line in lines if line.startswith("lemon_memory recall"))
    recall, mrr, forbidden, errors = ours.split()[-4:]
    assert float(recall) >= 0.85
    assert float(mrr) >= 0.85
    assert (forbidden, errors) == ("0", "0")
    as_json = json.loads(run_lemon(env, "memory", "eval", str(DATA), "--json").stdout)
    assert as_json["Lemon's FTS5 rule, replayed"]["errors"] > 0  # the baseline's syntax errors
    assert (
        as_json["lemon_memory recall (quoted-token OR, porter, bm25, scope weights)"]["by_kind"][
            "punctuation"
        ]
        == 1.0
    )


def test_memory_eval_of_a_bad_file_is_one_line_and_exit_2(
    env: dict[str, str], tmp_path: Path
) -> None:
    bad = tmp_path / "set.json"
    cases = {
        "missing": (tmp_path / "nope.json", "cannot read"),
        "not json": (bad, "is not a JSON labelled set"),
    }
    bad.write_text("{not json", encoding="utf-8")
    for path, message in cases.values():
        proc = run_lemon(env, "memory", "eval", str(path))
        assert proc.returncode == 2
        assert message in proc.stderr
        assert "Traceback" not in proc.stderr
    bad.write_text(json.dumps({"docs": [{"id": "d1"}], "queries": []}), encoding="utf-8")
    proc = run_lemon(env, "memory", "eval", str(bad))
    assert proc.returncode == 2
    assert "docs entry 1 lacks agent, scope, text" in proc.stderr
