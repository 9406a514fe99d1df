"""Run-summary ingest from the run store's history, on a booted daemon's real store."""

from __future__ import annotations

from pathlib import Path

from lemon_core.store import RunStore, RunSummary
from lemon_memory import MemoryApp, MemoryContext
from lemon_runtime import Runtime

SECRET = "Zq8Lp2Vx9Tr4Wm7Ks1Nd6Hy3Bc5Fg0Ja"


def summary(run_id: str, key: str, answer: str, **kw: object) -> RunSummary:
    return RunSummary(
        run_id=run_id, session_key=key, ok=True, answer=answer, finished_at_ms=10**13, **kw
    )  # type: ignore[arg-type]


async def test_a_finished_run_is_ingested_redacted_and_cron_runs_are_not(
    runtime: Runtime, tmp_path: Path
) -> None:
    app = runtime.handle("lemon_memory")
    assert isinstance(app, MemoryApp)
    assert app.ingester is not None
    assert app.store is not None
    runs = RunStore(runtime.store)
    key = "agent:default:main"
    await runs.finalize(
        summary(
            "r1",
            key,
            f"Deployed the walrus service with token={SECRET} to staging.",
            meta={"cwd": str(tmp_path)},
        )
    )
    await runs.finalize(summary("r2", key, "cron output", meta={"origin": "cron"}))
    assert await app.ingester.poll_once() == 2  # session and project scopes
    assert await app.ingester.poll_once() == 0  # never twice
    ctx = MemoryContext.for_run(agent_id="default", session_key=key, cwd=str(tmp_path))
    hits = (await app.store.recall(ctx, "walrus staging")).hits
    assert {h.document.scope for h in hits} == {"session", "project"}
    body = hits[0].document.body
    assert "[REDACTED:" in body
    assert SECRET not in body
    assert "Deployed the walrus service" in body
    assert hits[0].document.kind == "run_summary"
    assert hits[0].document.expires_at_ms is not None
    assert not (await app.store.recall(ctx, "cron output")).hits
    stats = await app.store.statistics()
    assert stats.redactions >= 2
    await app.store.close()  # flush the WAL into the file, then grep both
    home = tmp_path / "home" / "store"
    for path in home.glob("memory.sqlite3*"):
        assert SECRET.encode() not in path.read_bytes()
