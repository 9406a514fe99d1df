"""``lemon memory`` as a real subprocess against a real daemon (``lemon daemon start``): the
daemon's memory status, an empty list and search, a forget of an unknown id, and no daemon: one
clear line and an exit code, never a traceback; ``lemon memory eval`` on the labelled set (no
daemon needed) and on bad files."""

from __future__ import annotations

import json
from pathlib import Path

from lemon_platform_test.lemon_process import run_lemon


def test_memory_without_a_daemon_says_how_to_start_one(env: dict[str, str]) -> None:
    proc = run_lemon(env, "memory", "status")
    assert proc.returncode == 1
    assert "lemon daemon start" in proc.stderr
    assert "Traceback" not in proc.stderr


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
