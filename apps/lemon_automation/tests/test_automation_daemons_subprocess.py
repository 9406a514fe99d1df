"""Two real daemons (``lemon serve`` subprocesses) on one PostgreSQL schema, each with only its
local bus (nothing but the store connects them): an ``every 1s`` job fires each due time exactly
once between them (one start, one completion, one run), and a daemon killed with SIGKILL while
its fire's run is in flight is taken over by the other, which ends the fire ``interrupted`` once
and does not run it again; one paused (SIGSTOP) past its lease loses the fire the same way, and
when it resumes the fence refuses its late writes (no second completion); a scheduled fire
killed mid-run with ``max_retries = 1`` is retried exactly once by the survivor; an owner
killed between its claim and its submission (held at the session port's first store write) is
taken over and the fire runs once (one model call on the scripted model server)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lemon_control_plane.local_token import read_local_token
from lemon_control_plane.testing import WireClient, wire_client
from lemon_infra import PostgresFireLedger, PostgresStore
from lemon_platform_test.lemon_process import lemon_env, start_serve, stop_serve
from lemon_platform_test.providers import ScriptedProviderServer, ScriptedTurn

PG = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
HOLD = '/tool bash {"command": "echo never"}'  # waits for an approval nobody gives
WAIT_S = 60.0


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen[str]
    url: str
    token: str | None

    @property
    def ws(self) -> str:
        return self.url.replace("http://", "ws://") + "/ws"


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"cron2_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        yield name
    finally:
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def start(
    tmp_path: Path, name: str, schema: str, *, lease_s: float = 2.0, model_url: str | None = None
) -> Daemon:
    """A daemon whose gateway engine and fire leases live ``lease_s`` seconds: short for the
    takeover tests, long where a loaded machine must not turn a slow renewal into a takeover.
    With ``model_url`` its default model is the scripted model server's at that URL.
    The router's session lease stays 2 s: an idle owner keeps a session for a third of it, and
    with local buses a fire handed to a busy owner waits for that release (the hand-off
    command travels on the bus), so a longer one would starve the other daemon's fires."""
    home = tmp_path / name
    (home / "agent").mkdir(parents=True, exist_ok=True)  # a restart: the same home
    (home / "config.toml").write_text(
        f'[store]\nbackend = "postgres"\ndsn_env = "LEMON_TEST_DSN"\nschema = "{schema}"\n'
        f"[router]\nlease_ttl_s = 2.0\n[gateway]\nlease_ttl_s = {lease_s}\n"
        f"[automation]\nlease_ms = {int(lease_s * 1000)}\npoll_ms = 200\nretry_backoff_ms = 200\n"
        f'daemon_id = "{name}"\n'
        + (
            ""
            if model_url is None
            else '[defaults]\nmodel = "scripted:test-model"\n'
            '[providers.scripted]\nkind = "openai_completions"\n'
            f'base_url = "{model_url}"\n'
        ),
        encoding="utf-8",
    )
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = lemon_env(tmp_path, home=home, LEMON_TEST_DSN=PG)
    log = (tmp_path / f"{name}.log").open("a")  # a pipe nobody reads would fill and block
    proc, url = start_serve(env, work, stderr=log.fileno())
    log.close()
    return Daemon(name, proc, url, read_local_token(home))


@contextmanager
def two_daemons(
    tmp_path: Path, schema: str, *, lease_s: float = 2.0, model_url: str | None = None
) -> Iterator[tuple[Daemon, Daemon]]:
    a = start(tmp_path, "a", schema, lease_s=lease_s, model_url=model_url)
    try:
        b = start(tmp_path, "b", schema, lease_s=lease_s, model_url=model_url)
    except BaseException:
        stop_serve(a.proc)
        raise
    try:
        yield a, b
    finally:
        stop_serve(a.proc, graceful=True)
        stop_serve(b.proc, graceful=True)
        for name in ("a", "b"):  # shown by pytest only when the test failed
            lines = (tmp_path / f"{name}.log").read_text(errors="replace").splitlines()
            print(f"--- daemon {name} log (last 40 lines) ---", *lines[-40:], sep="\n")


def cron_events(client: WireClient, kind: str) -> list[dict[str, Any]]:
    return [f["payload"] for f in client.events("cron") if f["payload"].get("type") == kind]


async def pump(client: WireClient, seconds: float) -> None:
    """Record the client's frames for ``seconds``. A deadline, not an outer cancellation: on
    Python 3.11 ``wait_for`` can swallow a cancel that lands as a frame arrives (and frames
    arrive every second here)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while (left := end - loop.time()) > 0:
        try:
            raw = await asyncio.wait_for(client.ws.recv(), left)
        except TimeoutError:
            return
        assert isinstance(raw, str)
        client.frames.append(json.loads(raw))


async def test_each_due_time_fires_exactly_once_across_two_daemons_with_local_buses(
    tmp_path: Path, schema: str
) -> None:
    # Long leases: no takeover is wanted here, and on a loaded machine a renewal held up past a
    # 2 s lease is a takeover (the run cancelled lease_lost, the fire not completed).
    with two_daemons(tmp_path, schema, lease_s=10.0) as (a, b):
        async with (
            wire_client(a.ws, token=a.token)() as on_a,
            wire_client(b.ws, token=b.token)() as on_b,
        ):
            job = (
                await on_a.call(
                    "cron.add", {"name": "tick", "schedule": "every 1s", "prompt": "/echo tick"}
                )
            )["job"]
            listed = await asyncio.wait_for(on_b.call("cron.list"), 30)  # A's job, seen by B
            assert [j["id"] for j in listed["jobs"]] == [job["id"]]
            await asyncio.gather(pump(on_a, 8.0), pump(on_b, 8.0))
            await asyncio.wait_for(on_b.call("cron.pause", {"id": job["id"]}), 30)
            # Settled: every claimed fire ended and its completion reached a client (a fire
            # claimed just before the pause may still be submitting on a loaded machine).
            store = await PostgresStore.open(PG, schema=schema, max_connections=2)
            try:
                loop = asyncio.get_running_loop()
                deadline = loop.time() + WAIT_S
                while True:
                    await asyncio.gather(pump(on_a, 0.5), pump(on_b, 0.5))
                    fires = await PostgresFireLedger(store).fires(job["id"], limit=1000)
                    done = cron_events(on_a, "run_completed") + cron_events(on_b, "run_completed")
                    settled = all(f.done for f in fires) and len(done) >= len(fires)
                    if settled or loop.time() > deadline:
                        break
            finally:
                await store.close()
            await asyncio.gather(pump(on_a, 1.0), pump(on_b, 1.0))  # nothing more comes
            started = cron_events(on_a, "run_started") + cron_events(on_b, "run_started")
            done = cron_events(on_a, "run_completed") + cron_events(on_b, "run_completed")
    seen = [(f.due_at_ms, f.owner, f.status, f.outcome) for f in fires]
    dues = sorted(f.due_at_ms for f in fires)
    anchor = job["anchorMs"]
    assert len(dues) >= 5, seen
    # every due time from the first on, once each, with no gap: anchor + k * 1 s
    assert dues == [anchor + 1000 * k for k in range(1, len(dues) + 1)], seen
    assert {f.status for f in fires} == {"completed"}, seen
    assert {f.owner for f in fires} <= {"a", "b"}
    completed_ids = [d["cronRunId"] for d in done]
    assert sorted(completed_ids) == sorted(set(completed_ids))  # one completion per fire
    assert len(completed_ids) == len(fires)
    started_ids = [s["cronRunId"] for s in started]
    assert sorted(started_ids) == sorted(set(started_ids))  # at most one start per fire
    assert set(started_ids) == set(completed_ids)
    runs = [d["runId"] for d in done]
    assert len(set(runs)) == len(runs)  # one router run per due time


async def test_a_daemon_killed_mid_run_is_taken_over_and_the_fire_ends_interrupted_once(
    tmp_path: Path, schema: str
) -> None:
    with two_daemons(tmp_path, schema) as (a, b):
        async with wire_client(b.ws, token=b.token)() as on_b:
            async with wire_client(a.ws, token=a.token)() as on_a:
                job = (
                    await on_a.call(
                        "cron.add", {"name": "hold", "schedule": "every 1h", "prompt": HOLD}
                    )
                )["job"]
                ran = await on_a.call("cron.run", {"id": job["id"]})
                await on_a.event("exec.approval.requested")  # A's run is in flight
            a.proc.kill()  # SIGKILL: no goodbye, the fire's lease is left to expire
            await asyncio.to_thread(a.proc.wait, 30)
            ended = await asyncio.wait_for(
                on_b.event("cron", type="run_completed", cronRunId=ran["cronRunId"]), WAIT_S
            )
            assert ended["payload"]["status"] == "interrupted"
            await pump(on_b, 3.0)  # B's recovery passes again: nothing more for this fire
            assert (
                len(
                    [
                        d
                        for d in cron_events(on_b, "run_completed")
                        if d["cronRunId"] == ran["cronRunId"]
                    ]
                )
                == 1
            )
            assert not on_b.events("exec.approval.requested")  # never executed again on B
            history = (await on_b.call("cron.runs", {"id": job["id"]}))["runs"]
    (record,) = history
    assert record["status"] == "interrupted"
    assert record["owner"] == "b"
    assert record["triggeredBy"] == "manual"


async def test_a_paused_owner_loses_its_fire_and_its_late_completion_is_refused_by_the_fence(
    tmp_path: Path, schema: str
) -> None:
    # Long leases: no takeover is wanted here, and on a loaded machine a renewal held up past a
    # 2 s lease is a takeover (the run cancelled lease_lost, the fire not completed).
    with two_daemons(tmp_path, schema, lease_s=10.0) as (a, b):
        async with (
            wire_client(a.ws, token=a.token)() as on_a,
            wire_client(b.ws, token=b.token)() as on_b,
        ):
            job = (
                await on_a.call(
                    "cron.add", {"name": "hold", "schedule": "every 1h", "prompt": HOLD}
                )
            )["job"]
            ran = await on_a.call("cron.run", {"id": job["id"]})
            await on_a.event("exec.approval.requested")  # A's run is in flight
            a.proc.send_signal(signal.SIGSTOP)  # longer than lease_ms (2 s): B takes over
            try:
                ended = await asyncio.wait_for(
                    on_b.event("cron", type="run_completed", cronRunId=ran["cronRunId"]), WAIT_S
                )
            finally:
                a.proc.send_signal(signal.SIGCONT)
            assert ended["payload"]["status"] == "interrupted"
            # A wakes, its renewal is refused by the fence: it abandons the fire (cancels its
            # run) and publishes no completion of its own.
            await asyncio.gather(pump(on_a, 4.0), pump(on_b, 2.0))
            assert not [
                d for d in cron_events(on_a, "run_completed") if d["cronRunId"] == ran["cronRunId"]
            ]
            status = await on_a.call("cron.status")
            assert status["lost"] == 1
            (record,) = (await on_a.call("cron.runs", {"id": job["id"]}))["runs"]
    assert record["status"] == "interrupted"
    assert record["owner"] == "b"


async def test_a_scheduled_fire_killed_mid_run_is_retried_once_by_the_other_daemon(
    tmp_path: Path, schema: str
) -> None:
    # Long leases: no takeover is wanted here, and on a loaded machine a renewal held up past a
    # 2 s lease is a takeover (the run cancelled lease_lost, the fire not completed).
    with two_daemons(tmp_path, schema, lease_s=10.0) as (a, b):
        async with (
            wire_client(a.ws, token=a.token)() as on_a,
            wire_client(b.ws, token=b.token)() as on_b,
        ):
            when = datetime.now(UTC) + timedelta(seconds=2)
            job = (
                await on_a.call(
                    "cron.add",
                    {
                        "name": "flaky",
                        "schedule": f"at {when.isoformat()}",
                        "prompt": HOLD,
                        "maxRetries": 1,
                        "timeoutSec": 5,
                    },
                )
            )["job"]
            clients = {"a": on_a, "b": on_b}
            loop = asyncio.get_running_loop()
            deadline = loop.time() + WAIT_S
            owner = None
            while owner is None:  # whichever daemon claimed the due time runs it
                assert loop.time() < deadline, "the at job never ran"
                await asyncio.gather(pump(on_a, 0.3), pump(on_b, 0.3))
                owner = next(
                    (n for n, c in clients.items() if c.events("exec.approval.requested")), None
                )
            dead, alive = (a, b) if owner == "a" else (b, a)
            on_alive = clients[alive.name]
            first = cron_events(clients[owner], "run_started")[0]
            dead.proc.kill()  # SIGKILL while the scheduled fire is in flight
            await asyncio.to_thread(dead.proc.wait, 30)
            ended = await asyncio.wait_for(
                on_alive.event("cron", type="run_completed", cronRunId=first["cronRunId"]), WAIT_S
            )
            assert ended["payload"]["status"] == "interrupted"
            retry = await asyncio.wait_for(
                on_alive.event("cron", type="run_started", triggeredBy="retry"), WAIT_S
            )
            assert retry["payload"]["cronRunId"] != first["cronRunId"]
            done = await asyncio.wait_for(
                on_alive.event(
                    "cron", type="run_completed", cronRunId=retry["payload"]["cronRunId"]
                ),
                WAIT_S,
            )
            assert done["payload"]["status"] == "timeout"  # the retry ran (and timed out)
            await pump(on_alive, 3.0)  # max_retries = 1: no second retry
            starts = [s for s in cron_events(on_alive, "run_started") if s["jobId"] == job["id"]]
            history = (await on_alive.call("cron.runs", {"id": job["id"]}))["runs"]
    assert [s["triggeredBy"] for s in starts] == ["retry"]  # its local bus: the retry only
    assert [(r["triggeredBy"], r["status"], r["attempt"]) for r in history] == [
        ("retry", "timeout", 1),
        ("schedule", "interrupted", 0),
    ]
    assert history[0]["owner"] == alive.name
    assert history[0]["retryOf"] == history[1]["cronRunId"]


async def test_cron_abort_on_one_daemon_stops_the_run_the_other_daemon_executes(
    tmp_path: Path, schema: str
) -> None:
    # Long leases: the abort, not a takeover, must end the fire.
    with two_daemons(tmp_path, schema, lease_s=10.0) as (a, b):
        async with (
            wire_client(a.ws, token=a.token)() as on_a,
            wire_client(b.ws, token=b.token)() as on_b,
        ):
            job = (
                await on_b.call(
                    "cron.add", {"name": "hold", "schedule": "every 1h", "prompt": HOLD}
                )
            )["job"]
            ran = await on_b.call("cron.run", {"id": job["id"]})  # B claims and follows it
            await asyncio.wait_for(on_b.event("exec.approval.requested"), WAIT_S)  # in flight
            aborted = await asyncio.wait_for(
                on_a.call("cron.abort", {"runId": ran["cronRunId"]}), WAIT_S
            )
            assert aborted["aborted"] is True, aborted
            assert aborted["status"] == "aborted"
            ended = await asyncio.wait_for(
                on_b.event("cron", type="run_completed", cronRunId=ran["cronRunId"]), WAIT_S
            )
            assert ended["payload"]["status"] == "aborted"
            (run,) = (await on_a.call("cron.runs", {"id": job["id"]}))["runs"]
            assert run["status"] == "aborted"
            assert run["owner"] == "b"  # B executed it and recorded the end
            audit = (await on_a.call("cron.audit", {"runId": ran["cronRunId"]}))["events"]
            by_action = {e["action"]: e["source"] for e in audit}
            assert by_action["run_abort_requested"] == "a"
            assert by_action["run_aborted"] == "b"
            await pump(on_b, 1.0)
            completions = [
                d for d in cron_events(on_b, "run_completed") if d["cronRunId"] == ran["cronRunId"]
            ]
            assert len(completions) == 1  # not retried, not completed twice


HOLD_KEY = 4242  # the advisory lock the test holds to keep a daemon's `submitted` write waiting


def _hold_submitted_writes(conn: psycopg.Connection[Any], schema: str, job_id: str) -> None:
    """Make the fenced ``submitted`` write of ``job_id``'s fire wait (a BEFORE UPDATE trigger
    on the ledger table taking the advisory lock this connection holds): the owner's claim
    and its submission to the session port happen, the record of the submission does not."""
    conn.execute("SELECT pg_advisory_lock(%s)", (HOLD_KEY,))
    conn.execute(
        f'CREATE FUNCTION "{schema}".hold_submitted() RETURNS trigger LANGUAGE plpgsql AS $$ '
        "BEGIN IF NEW.status = 'submitted' AND OLD.status = 'claimed' "
        f"AND NEW.job_id = '{job_id}' THEN PERFORM pg_advisory_xact_lock({HOLD_KEY}); END IF; "
        "RETURN NEW; END $$"
    )
    conn.execute(
        f'CREATE TRIGGER hold_submitted BEFORE UPDATE ON "{schema}".lemon_fires '
        f'FOR EACH ROW EXECUTE FUNCTION "{schema}".hold_submitted()'
    )


def _held_backend(conn: psycopg.Connection[Any]) -> int | None:
    """The pid of the backend waiting for the test's advisory lock (None: nobody waits)."""
    row = conn.execute(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND NOT granted",
        (HOLD_KEY,),
    ).fetchone()
    return None if row is None else int(row[0])


async def test_a_daemon_killed_between_the_claim_and_the_record_of_its_submission_fires_once(
    tmp_path: Path, schema: str
) -> None:
    """The owner claimed a scheduled fire and submitted its run (which ran), then died (kill
    -9) before its fenced ``submitted`` write: the other daemon takes the claimed fire over,
    re-submits the same derived run id (the session port answers the existing receipt: no
    second run) and records the fire completed, once."""
    with (
        two_daemons(tmp_path, schema) as (a, b),
        psycopg.connect(PG, autocommit=True) as conn,
    ):
        async with (
            wire_client(a.ws, token=a.token)() as on_a,
            wire_client(b.ws, token=b.token)() as on_b,
        ):
            clients = {"a": on_a, "b": on_b}
            daemons = {"a": a, "b": b}
            when = datetime.now(UTC) + timedelta(seconds=3)
            job = (
                await on_a.call(
                    "cron.add",
                    {"name": "once", "schedule": f"at {when.isoformat()}", "prompt": "/echo once"},
                )
            )["job"]
            _hold_submitted_writes(conn, schema, job["id"])
            loop = asyncio.get_running_loop()
            deadline = loop.time() + WAIT_S
            while (held := _held_backend(conn)) is None:  # the owner waits in its record
                assert loop.time() < deadline, "no daemon reached the submitted write"
                await asyncio.gather(pump(on_a, 0.2), pump(on_b, 0.2))
            ((owner, status, due, fence),) = conn.execute(
                f'SELECT owner, status, due_at_ms, fence FROM "{schema}".lemon_fires '
                "WHERE job_id = %s",
                (job["id"],),
            ).fetchall()
            assert status == "claimed"
            run_id = (
                "run_" + (await on_a.call("cron.runs", {"id": job["id"]}))["runs"][0]["cronRunId"]
            )
            # the submission landed: the run executes (and ends) while the record waits
            ran = await asyncio.wait_for(clients[owner].completed(run_id), WAIT_S)
            assert ran["payload"]["answer"] == "once"
            dead, alive = daemons[owner], daemons["b" if owner == "a" else "a"]
            dead.proc.kill()  # SIGKILL between the submission and its record
            await asyncio.to_thread(dead.proc.wait, 30)
            # its backend would commit the record once the lock is free: end it (a dead
            # daemon's connection is gone; the server notices only at its next write)
            conn.execute("SELECT pg_terminate_backend(%s)", (held,))
            conn.execute(f'DROP TRIGGER hold_submitted ON "{schema}".lemon_fires')
            conn.execute("SELECT pg_advisory_unlock(%s)", (HOLD_KEY,))
            on_alive = clients[alive.name]
            cid = run_id.removeprefix("run_")
            ended = await asyncio.wait_for(
                on_alive.event("cron", type="run_completed", cronRunId=cid), WAIT_S
            )
            assert ended["payload"]["status"] == "completed", ended
            assert ended["payload"]["runId"] == run_id
            await pump(on_alive, 3.0)  # nothing more for this fire
            history = (await on_alive.call("cron.runs", {"id": job["id"]}))["runs"]
            executions = [
                f
                for c in clients.values()
                for f in c.events("agent")
                if f["payload"].get("type") == "completed" and f["payload"].get("runId") == run_id
            ]
            completions = [
                d for d in cron_events(on_alive, "run_completed") if d["cronRunId"] == cid
            ]
            ((final_owner, final_fence),) = conn.execute(
                f'SELECT owner, fence FROM "{schema}".lemon_fires WHERE job_id = %s',
                (job["id"],),
            ).fetchall()
    assert len(executions) == 1  # one run: the re-submission answered the existing receipt
    assert len(completions) == 1
    (record,) = history
    assert (record["status"], record["owner"], record["dueAtMs"]) == ("completed", alive.name, due)
    assert record["routerRunId"] == run_id
    assert (final_owner, final_fence) == (alive.name, fence + 1)  # taken over once


def _hold_first_submission_write(conn: psycopg.Connection[Any], schema: str) -> None:
    """Make the first store write of a cron fire's submission wait (a BEFORE INSERT trigger
    on the lease table taking the advisory lock this connection holds): the session port's
    ``submit`` reads the stored receipt and the session's settings, then writes the router's
    owner lease of the fire's sub-session (``router:session:<key>:sub:cron_<id>``) before it
    records or queues anything. The owner's claim is committed; nothing of its submission is.
    Only the first backend to get there waits (``pg_try_advisory_lock`` of a second key, held
    by that backend until it ends): a later one passes."""
    conn.execute("SELECT pg_advisory_lock(%s)", (HOLD_KEY,))
    conn.execute(
        f'CREATE FUNCTION "{schema}".hold_submission() RETURNS trigger LANGUAGE plpgsql AS $$ '
        "BEGIN IF NEW.name LIKE 'router:session:%' AND position(':sub:cron_' in NEW.name) > 0 "
        f"AND pg_try_advisory_lock({HOLD_KEY + 1}) THEN PERFORM pg_advisory_xact_lock({HOLD_KEY}); "
        "END IF; RETURN NEW; END $$"
    )
    conn.execute(
        f'CREATE TRIGGER hold_submission BEFORE INSERT ON "{schema}".lemon_leases '
        f'FOR EACH ROW EXECUTE FUNCTION "{schema}".hold_submission()'
    )


async def test_a_daemon_killed_between_the_claim_and_the_submission_is_taken_over_once(
    tmp_path: Path, schema: str
) -> None:
    """The owner claimed a scheduled fire and died (kill -9) before its submission reached the
    session port's store (held at the port's first write, the sub-session's owner lease):
    nothing ran, nothing was recorded. The other daemon takes the claimed fire over at its
    lease's expiry, submits it (the same derived run id), and it runs once: one model call,
    one ``cron_run_completed``, the fence moved once."""
    with ScriptedProviderServer() as model:
        model.script(ScriptedTurn(text="once"))
        with (
            two_daemons(tmp_path, schema, model_url=model.openai_base_url) as (a, b),
            psycopg.connect(PG, autocommit=True) as conn,
        ):
            _hold_first_submission_write(conn, schema)
            async with (
                wire_client(a.ws, token=a.token)() as on_a,
                wire_client(b.ws, token=b.token)() as on_b,
            ):
                clients = {"a": on_a, "b": on_b}
                daemons = {"a": a, "b": b}
                when = datetime.now(UTC) + timedelta(seconds=3)
                job = (
                    await on_a.call(
                        "cron.add",
                        {
                            "name": "once",
                            "schedule": f"at {when.isoformat()}",
                            "prompt": "say once",
                        },
                    )
                )["job"]
                loop = asyncio.get_running_loop()
                deadline = loop.time() + WAIT_S
                while (held := _held_backend(conn)) is None:  # the owner waits in its submit
                    assert loop.time() < deadline, "no daemon reached the submission's write"
                    await asyncio.gather(pump(on_a, 0.2), pump(on_b, 0.2))
                ((owner, status, due, fence),) = conn.execute(
                    f'SELECT owner, status, due_at_ms, fence FROM "{schema}".lemon_fires '
                    "WHERE job_id = %s",
                    (job["id"],),
                ).fetchall()
                assert status == "claimed"  # the claim committed, its submission did not
                (cron_run,) = (await on_a.call("cron.runs", {"id": job["id"]}))["runs"]
                cid = cron_run["cronRunId"]
                run_id = f"run_{cid}"
                written = conn.execute(
                    f'SELECT tbl, key FROM "{schema}".lemon_kv WHERE position(%s in key) > 0',
                    (run_id,),
                ).fetchall()
                assert written == []  # no receipt, no inbox record, no run of it
                assert model.requests == []
                dead, alive = daemons[owner], daemons["b" if owner == "a" else "a"]
                dead.proc.kill()  # SIGKILL between the claim and the submission
                await asyncio.to_thread(dead.proc.wait, 30)
                # its backend would write the lease once the lock is free: end it (a dead
                # daemon's connection is gone; the server notices only at its next write)
                conn.execute("SELECT pg_terminate_backend(%s)", (held,))
                conn.execute(f'DROP TRIGGER hold_submission ON "{schema}".lemon_leases')
                conn.execute("SELECT pg_advisory_unlock(%s)", (HOLD_KEY,))
                on_alive = clients[alive.name]
                ended = await asyncio.wait_for(
                    on_alive.event("cron", type="run_completed", cronRunId=cid), WAIT_S
                )
                assert ended["payload"]["status"] == "completed", ended
                assert ended["payload"]["runId"] == run_id
                ran = await asyncio.wait_for(on_alive.completed(run_id), WAIT_S)
                assert ran["payload"]["answer"] == "once"
                await pump(on_alive, 3.0)  # nothing more for this fire
                history = (await on_alive.call("cron.runs", {"id": job["id"]}))["runs"]
                executions = [
                    f
                    for f in on_alive.events("agent")
                    if f["payload"].get("type") == "completed"
                    and f["payload"].get("runId") == run_id
                ]
                completions = [
                    d for d in cron_events(on_alive, "run_completed") if d["cronRunId"] == cid
                ]
                ((final_owner, final_fence),) = conn.execute(
                    f'SELECT owner, fence FROM "{schema}".lemon_fires WHERE job_id = %s',
                    (job["id"],),
                ).fetchall()
        calls = model.requests
    assert len(calls) == 1  # one model call: the survivor's run, nothing of the dead owner's
    assert len(executions) == 1
    assert len(completions) == 1
    (record,) = history
    assert (record["status"], record["owner"], record["dueAtMs"]) == ("completed", alive.name, due)
    assert record["routerRunId"] == run_id
    assert (final_owner, final_fence) == (alive.name, fence + 1)  # taken over once


async def test_a_restart_after_three_missed_due_times_applies_each_catch_up_policy(
    tmp_path: Path, schema: str
) -> None:
    """A daemon with three hourly jobs (``latest``, ``all``, ``skip``) stops; while it is down
    three due times of each pass (the jobs' anchors are moved 3.5 h back in the store, which is
    what 3.5 h of downtime leaves behind: a watermark three periods old); restarted, it fires
    the newest within grace and records the other two ``coalesced`` (latest), fires all three
    oldest first (all), or fires none and records three ``missed_deadline`` (skip)."""
    import msgspec

    from lemon_automation.jobs import JOBS_TABLE

    first = start(tmp_path, "a", schema, lease_s=10.0)
    try:
        async with wire_client(first.ws, token=first.token)() as c:
            ids = {
                policy: (
                    await c.call(
                        "cron.add",
                        {"name": policy, "schedule": "every 1h", "prompt": f"/echo {policy}",
                         "catchUp": policy},
                    )
                )["job"]["id"]
                for policy in ("latest", "all", "skip")
            }  # fmt: skip
    finally:
        stop_serve(first.proc, graceful=True)
    hour = 3_600_000
    store = await PostgresStore.open(PG, schema=schema, max_connections=2)
    try:
        anchors = {}
        for policy, job_id in ids.items():
            row = await store.get(JOBS_TABLE, job_id)
            assert isinstance(row, dict)
            assert row.get("last_due_at_ms") is None  # nothing was due before the stop
            anchor = int(row["anchor_ms"]) - hour * 7 // 2
            anchors[policy] = anchor
            row.update(anchor_ms=anchor, created_at_ms=anchor)
            await store.put(JOBS_TABLE, job_id, msgspec.to_builtins(row))
        again = start(tmp_path, "a", schema, lease_s=10.0)
        try:
            ledger = PostgresFireLedger(store)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + WAIT_S
            while True:
                fires = {p: await ledger.fires(j, limit=100) for p, j in ids.items()}
                if all(len(f) == 3 and all(x.done for x in f) for f in fires.values()):
                    break
                assert loop.time() < deadline, "\n".join(
                    f"{p}: {[(x.status, x.outcome) for x in f]}" for p, f in fires.items()
                )
                await asyncio.sleep(0.2)
            async with wire_client(again.ws, token=again.token)() as c:
                runs = {p: (await c.call("cron.runs", {"id": j}))["runs"] for p, j in ids.items()}
                audit = (await c.call("cron.audit", {"action": "run_skipped"}))["events"]
        finally:
            stop_serve(again.proc, graceful=True)
    finally:
        await store.close()
    for policy, anchor in anchors.items():
        dues = sorted(f.due_at_ms for f in fires[policy])
        assert dues == [anchor + hour, anchor + 2 * hour, anchor + 3 * hour], policy
    by_due = {p: sorted(r, key=lambda r: r["dueAtMs"]) for p, r in runs.items()}
    seen = {p: [(r["status"], r["reason"]) for r in rs] for p, rs in by_due.items()}
    assert seen["latest"] == [
        ("skipped", "coalesced"),
        ("skipped", "coalesced"),
        ("completed", None),
    ], seen
    assert seen["all"] == [("completed", None)] * 3, seen
    assert seen["skip"] == [("skipped", "missed_deadline")] * 3, seen
    assert {r["triggeredBy"] for rs in runs.values() for r in rs} == {"schedule"}
    skipped = sorted((e["jobId"], e["reason"]) for e in audit)
    assert skipped == sorted(
        [(ids["latest"], "coalesced")] * 2 + [(ids["skip"], "missed_deadline")] * 3
    )


async def test_the_generic_abort_of_a_cron_run_on_one_daemon_stops_it_on_the_other(
    tmp_path: Path, schema: str
) -> None:
    """``chat.abort`` of the router run id of a fire daemon B executes, sent to daemon A (whose
    router never saw the run): the plane asks automation first (``RUN_ABORTS``), which takes
    ``cron.abort``'s path through the store; B cancels the run and records the fire
    ``aborted``, once."""
    with two_daemons(tmp_path, schema, lease_s=10.0) as (a, b):
        async with (
            wire_client(a.ws, token=a.token)() as on_a,
            wire_client(b.ws, token=b.token)() as on_b,
        ):
            job = (
                await on_b.call(
                    "cron.add", {"name": "hold", "schedule": "every 1h", "prompt": HOLD}
                )
            )["job"]
            ran = await on_b.call("cron.run", {"id": job["id"]})  # B claims and follows it
            await asyncio.wait_for(on_b.event("exec.approval.requested"), WAIT_S)  # in flight
            run_id = f"run_{ran['cronRunId']}"
            aborted = await asyncio.wait_for(on_a.call("chat.abort", {"runId": run_id}), WAIT_S)
            assert aborted == {"aborted": True, "runId": run_id, "cancelled": 1}, aborted
            ended = await asyncio.wait_for(
                on_b.event("cron", type="run_completed", cronRunId=ran["cronRunId"]), WAIT_S
            )
            assert ended["payload"]["status"] == "aborted"
            (run,) = (await on_a.call("cron.runs", {"id": job["id"]}))["runs"]
            assert (run["status"], run["owner"]) == ("aborted", "b")
            audit = (await on_a.call("cron.audit", {"runId": ran["cronRunId"]}))["events"]
            by_action = {e["action"]: e["source"] for e in audit}
            assert by_action["run_abort_requested"] == "a"
            assert by_action["run_aborted"] == "b"
            # an id that is no cron run still goes to the local router (nothing to cancel)
            other = await on_a.call("chat.abort", {"runId": "run_nope"})
            assert other == {"aborted": True, "runId": "run_nope", "cancelled": 0}
            await pump(on_b, 1.0)
            completions = [
                d for d in cron_events(on_b, "run_completed") if d["cronRunId"] == ran["cronRunId"]
            ]
            assert len(completions) == 1
