"""Two real daemons (``lemon serve`` subprocesses) on one PostgreSQL schema and one Redis
prefix behave as one deployment: a message sent through A is in B's ``chat.history``, B's
clients receive A's run events, and a burst of messages into one session alternating A and B is
every one accounted for with no two runs of the session overlapping; the owner killed or paused
mid-run, Redis and PostgreSQL lost (through proxies the test cuts: the servers are shared).

Each daemon has its own home (its daemon lock, its state file, its transcript files); they share
the store and the bus through the servers, and nothing else: transcripts reach the other daemon
through the store (coding_agent mirrors them there). Each test uses its own schema (dropped
after) and thereby its own Redis channel prefix."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lemon_control_plane.local_token import read_local_token
from lemon_control_plane.testing import WireClient, wire_client
from lemon_platform_test.lemon_process import lemon_env, start_serve, stop_serve
from lemon_platform_test.proxy import TcpProxy

PG = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("LEMON_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
REDIS_PORT = int(REDIS.rsplit(":", 1)[1].split("/")[0])


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen[str]
    url: str
    token: str | None = None
    """The daemon's local token (its home's: what its owner's clients present)."""

    @property
    def ws(self) -> str:
        return self.url.replace("http://", "ws://") + "/ws"


@contextmanager
def fresh_schema(prefix: str) -> Iterator[str]:
    """A PostgreSQL schema name of this test's own, dropped after."""
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        yield name
    finally:
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def schema() -> Iterator[str]:
    with fresh_schema("two") as name:
        yield name


def start(
    tmp_path: Path,
    name: str,
    schema: str,
    *,
    lease_ttl_s: float = 15.0,
    redis_url: str = REDIS,
    dsn: str = PG,
    gateway: str = "",
    store_timeout_s: float = 5.0,
) -> Daemon:
    home = tmp_path / name
    (home / "agent").mkdir(parents=True)
    (home / "config.toml").write_text(
        f'[store]\nbackend = "postgres"\ndsn_env = "LEMON_TEST_DSN"\nschema = "{schema}"\n'
        f"timeout_s = {store_timeout_s}\n"
        f'[bus]\nbackend = "redis"\nurl = "{redis_url}"\n'
        f"[router]\nlease_ttl_s = {lease_ttl_s}\n"
        f"[gateway]\nlease_ttl_s = {lease_ttl_s}\n{gateway}",
        encoding="utf-8",
    )
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = lemon_env(tmp_path, home=home, LEMON_TEST_DSN=dsn)
    proc, url = start_serve(env, work)
    return Daemon(name, proc, url, read_local_token(home))


def stop(daemon: Daemon) -> None:
    stop_serve(daemon.proc, graceful=True)


@contextmanager
def two_daemons(
    tmp_path: Path,
    schema: str,
    a: dict[str, Any] | None = None,
    b: dict[str, Any] | None = None,
) -> Iterator[tuple[Daemon, Daemon]]:
    """Daemons ``a`` and ``b`` (``start``'s options each) on ``schema`` (their transcripts
    shared through the store); both stopped after (``a`` too when ``b`` does not start)."""
    first = start(tmp_path, "a", schema, **(a or {}))
    try:
        second = start(tmp_path, "b", schema, **(b or {}))
    except BaseException:
        stop(first)
        raise
    try:
        yield first, second
    finally:
        stop(first)
        stop(second)


@pytest.fixture
def lease_ttl_s() -> float:
    return 15.0


@pytest.fixture
def pair(tmp_path: Path, schema: str, lease_ttl_s: float) -> Iterator[tuple[Daemon, Daemon]]:
    options = {"lease_ttl_s": lease_ttl_s}
    with two_daemons(tmp_path, schema, options, options) as daemons:
        yield daemons


SESSION = "agent:default:main"


async def test_history_and_live_events_are_shared(pair: tuple[Daemon, Daemon]) -> None:
    a, b = pair
    async with (
        wire_client(a.ws, token=a.token)() as on_a,
        wire_client(b.ws, token=b.token)() as on_b,
    ):
        # B's client watches the session before A runs it.
        await on_b.call("chat.history", {"sessionKey": SESSION})
        sent = await on_a.call("chat.send", {"sessionKey": SESSION, "prompt": "hello from a"})
        done_a = await on_a.completed(sent["runId"])
        done_b = await on_b.completed(sent["runId"])
        assert done_a["payload"]["ok"] is True
        assert done_b["payload"]["runId"] == sent["runId"]
        history = await on_b.call("chat.history", {"sessionKey": SESSION})
        turn = [(m["role"], m["content"]) for m in history["messages"]]
        assert [role for role, _ in turn] == ["user", "assistant"]
        assert turn[0] == ("user", "hello from a")
        listed = await on_b.call("sessions.list")
        assert [s["sessionKey"] for s in listed["sessions"]] == [SESSION]


async def test_a_burst_alternating_daemons_is_all_accounted_for_and_never_overlaps(
    pair: tuple[Daemon, Daemon],
) -> None:
    a, b = pair
    async with (
        wire_client(a.ws, token=a.token)() as on_a,
        wire_client(b.ws, token=b.token)() as on_b,
    ):
        clients = (on_a, on_b)
        sent: list[tuple[WireClient, str]] = []
        for i in range(20):
            client = clients[i % 2]
            reply = await client.call(
                "chat.send",
                {"sessionKey": SESSION, "prompt": f"/echo m{i:02d}", "queueMode": "collect"},
            )
            sent.append((client, reply["runId"]))
        assert len({run_id for _, run_id in sent}) == 20  # one run per message
        for client, run_id in sent:
            done = await client.completed(run_id)
            assert done["payload"]["ok"] is True, done
        history = await on_a.call("chat.history", {"sessionKey": SESSION, "limit": 200})
    pairs = [(m["role"], m["content"]) for m in history["messages"]]
    # Runs of one session never overlapped: the transcript is 20 whole turns, none interleaved.
    assert len(pairs) == 40, pairs
    for turn in range(20):
        user, answer = pairs[2 * turn], pairs[2 * turn + 1]
        assert user[0] == "user"
        assert answer == ("assistant", user[1].removeprefix("/echo "))
    assert sorted(user[1] for user in pairs[::2]) == [f"/echo m{i:02d}" for i in range(20)]


HOLD = '/tool bash {"command": "echo never"}'  # waits for an approval nobody gives


def completions(client: WireClient, run_id: str) -> list[dict[str, Any]]:
    return [
        f
        for f in client.events("agent")
        if f["payload"].get("type") == "completed" and f["payload"].get("runId") == run_id
    ]


@pytest.mark.parametrize("lease_ttl_s", [1.0])
async def test_kill_9_of_the_owner_mid_run_one_completion_and_the_session_goes_on(
    pair: tuple[Daemon, Daemon],
) -> None:
    a, b = pair
    async with wire_client(b.ws, token=b.token)() as on_b:
        await on_b.call("chat.history", {"sessionKey": SESSION})  # B's client follows it
        async with wire_client(a.ws, token=a.token)() as on_a:
            held = await on_a.call("chat.send", {"sessionKey": SESSION, "prompt": HOLD})
            await on_a.event("exec.approval.requested", runId=held["runId"])
        a.proc.kill()  # SIGKILL: no goodbye, the lease is left to expire
        await asyncio.to_thread(a.proc.wait, 30)

        after = await on_b.call("chat.send", {"sessionKey": SESSION, "prompt": "/echo after"})
        vanished = await on_b.completed(held["runId"])
        done = await on_b.completed(after["runId"])
        assert vanished["payload"]["ok"] is False
        assert "owner_lost" in vanished["payload"]["error"]
        assert done["payload"]["ok"] is True
        assert done["payload"]["answer"] == "after"
        # A sentinel run: everything about the held run has arrived by its end.
        sentinel = await on_b.call("chat.send", {"sessionKey": SESSION, "prompt": "/echo end"})
        await on_b.completed(sentinel["runId"])
        assert len(completions(on_b, held["runId"])) == 1  # exactly one completion
        approvals = [
            f
            for f in on_b.events("exec.approval.requested")
            if f["payload"].get("runId") == held["runId"]
        ]
        # At most A's own approval request (B's client may have heard it through Redis while
        # A lived): the run was never executed again on B, which would ask again.
        assert len(approvals) <= 1


def read_until(daemon: Daemon, needle: str) -> list[str]:
    """Lines of the daemon's stderr up to the first one holding ``needle`` (blocking)."""
    assert daemon.proc.stderr is not None
    lines: list[str] = []
    for line in daemon.proc.stderr:
        lines.append(line)
        if needle in line:
            return lines
    raise AssertionError(f"{daemon.name} ended without logging {needle!r}: {lines}")


@pytest.mark.parametrize("lease_ttl_s", [1.0])
async def test_a_paused_owner_loses_the_session_and_its_late_write_is_refused(
    pair: tuple[Daemon, Daemon],
) -> None:
    a, b = pair
    async with wire_client(b.ws, token=b.token)() as on_b:
        await on_b.call("chat.history", {"sessionKey": SESSION})
        async with wire_client(a.ws, token=a.token)() as on_a:
            held = await on_a.call("chat.send", {"sessionKey": SESSION, "prompt": HOLD})
            await on_a.event("exec.approval.requested", runId=held["runId"])
            a.proc.send_signal(signal.SIGSTOP)  # paused past its lease: renewal stops
            try:
                taken = await on_b.call(
                    "chat.send", {"sessionKey": SESSION, "prompt": "/echo taken over"}
                )
                vanished = await on_b.completed(held["runId"])
                assert vanished["payload"]["ok"] is False
                assert "owner_lost" in vanished["payload"]["error"]
                done = await on_b.completed(taken["runId"])
                assert done["payload"]["answer"] == "taken over"
            finally:
                a.proc.send_signal(signal.SIGCONT)
            # A wakes up: its renewal finds the lease taken, it cancels the run, and the run's
            # durable writes carry the old token: refused, nothing written.
            logged = await asyncio.to_thread(read_until, a, "recording run history failed")
            assert any("lost its shared lease" in line for line in logged), logged
            assert "StaleLeaseError" in logged[-1]
        sentinel = await on_b.call("chat.send", {"sessionKey": SESSION, "prompt": "/echo end"})
        await on_b.completed(sentinel["runId"])
        assert len(completions(on_b, held["runId"])) == 1  # A published no second one
        listed = await on_b.call("sessions.list")
        (row,) = listed["sessions"]
        assert row["lastRunId"] == sentinel["runId"]


async def test_a_redis_outage_is_survived_and_subscribers_resync_from_the_store(
    tmp_path: Path, schema: str
) -> None:
    with TcpProxy("127.0.0.1", REDIS_PORT) as proxy:
        # A reaches Redis through a proxy this test cuts (the machine's Redis is shared and is
        # never restarted); B reaches it directly.
        a_options = {"redis_url": f"redis://127.0.0.1:{proxy.port}/0"}
        with two_daemons(tmp_path, schema, a_options) as (a, b):
            async with (
                wire_client(a.ws, token=a.token)() as on_a,
                wire_client(b.ws, token=b.token)() as on_b,
            ):
                await on_b.call("chat.history", {"sessionKey": SESSION})
                await on_a.call("chat.history", {"sessionKey": SESSION})
                proxy.cut()
                logged = await asyncio.to_thread(read_until, a, "Redis bus")
                assert "down" in logged[-1]
                # A keeps serving its own clients; the run is persisted.
                sent = await on_a.call(
                    "chat.send", {"sessionKey": SESSION, "prompt": "/echo during the outage"}
                )
                done = await on_a.completed(sent["runId"])
                assert done["payload"]["answer"] == "during the outage"
                proxy.restore()
                logged = await asyncio.to_thread(read_until, a, "reconnected")
                # B's subscriptions may have missed A's events: B's client is told to resync,
                # and the store, the authority, has everything.
                resync = await on_b.event("stream.resync")
                assert resync["payload"]["sessionKey"] == SESSION
                history = await on_b.call("chat.history", {"sessionKey": SESSION})
                assert ("user", "/echo during the outage") in [
                    (m["role"], m["content"]) for m in history["messages"]
                ]
                # Delivery across daemons resumed.
                again = await on_a.call(
                    "chat.send", {"sessionKey": SESSION, "prompt": "/echo back"}
                )
                back = await on_b.completed(again["runId"])
                assert back["payload"]["answer"] == "back"


async def test_a_lost_postgres_connection_is_a_clear_error_with_nothing_half_written(
    tmp_path: Path, schema: str
) -> None:
    pg_port = int(PG.rsplit(":", 1)[1].split("/")[0])
    with TcpProxy("127.0.0.1", pg_port) as proxy:
        dsn = PG.replace(f":{pg_port}/", f":{proxy.port}/")
        bounds = "engine_lock_timeout_s = 2\nstore_timeout_s = 2\n"
        a_options = {"dsn": dsn, "gateway": bounds, "store_timeout_s": 1.0}
        with two_daemons(tmp_path, schema, a_options) as (a, b):
            async with (
                wire_client(a.ws, token=a.token)() as on_a,
                wire_client(b.ws, token=b.token)() as on_b,
            ):
                proxy.cut()  # A loses PostgreSQL (B keeps it)
                lost = await on_a.call("chat.send", {"sessionKey": SESSION, "prompt": "/echo lost"})
                failed = await on_a.completed(lost["runId"])
                assert failed["payload"]["ok"] is False
                assert "the shared store cannot be reached" in failed["payload"]["error"]
                assert "nothing was executed" in failed["payload"]["error"]
                proxy.restore()
                # A's store fails fast until a probe reaches the server again (at most one
                # probe a second): a message sent in that window is refused as the lost one
                # was, with nothing executed; one sent after it runs (bounded retries, as a
                # person would retry).
                for _ in range(20):
                    back = await on_a.call(
                        "chat.send", {"sessionKey": SESSION, "prompt": "/echo back"}
                    )
                    done = await on_a.completed(back["runId"])
                    if done["payload"]["ok"]:
                        break
                    assert "nothing was executed" in done["payload"]["error"], done
                    await asyncio.sleep(0.25)
                assert done["payload"]["ok"] is True, done
                history = await on_b.call("chat.history", {"sessionKey": SESSION})
                assert [(m["role"], m["content"]) for m in history["messages"]] == [
                    ("user", "/echo back"),
                    ("assistant", "back"),
                ]
                (row,) = (await on_b.call("sessions.list"))["sessions"]
                assert row["lastRunId"] == back["runId"]


async def test_a_message_through_b_during_a_run_on_a_is_queued_by_the_session_rules(
    pair: tuple[Daemon, Daemon],
) -> None:
    a, b = pair
    async with (
        wire_client(a.ws, token=a.token)() as on_a,
        wire_client(b.ws, token=b.token)() as on_b,
    ):
        await on_b.call("chat.history", {"sessionKey": SESSION})  # B's client follows it
        held = await on_a.call("chat.send", {"sessionKey": SESSION, "prompt": HOLD})
        asked = await on_a.event("exec.approval.requested", runId=held["runId"])
        # Two followups through B while A's run is active: B hands them to A, the session's
        # owner, whose queue merges them (the newer id carries both; one run after A's).
        first = await on_b.call(
            "chat.send", {"sessionKey": SESSION, "prompt": "/echo one", "queueMode": "followup"}
        )
        second = await on_b.call(
            "chat.send", {"sessionKey": SESSION, "prompt": "/echo two", "queueMode": "followup"}
        )
        assert len({held["runId"], first["runId"], second["runId"]}) == 3
        # Nothing of B's ran in parallel: A's run is still the only one.
        mine = {first["runId"], second["runId"]}
        assert not [f for f in on_b.events("agent") if f["payload"].get("runId") in mine]
        await on_a.call(
            "exec.approval.resolve",
            {"approvalId": asked["payload"]["approvalId"], "decision": "approve_once"},
        )
        done_held = await on_b.completed(held["runId"])
        done = await on_b.completed(second["runId"])
        assert done_held["payload"]["runId"] == held["runId"]
        assert done["payload"]["ok"] is True, done
        history = await on_b.call("chat.history", {"sessionKey": SESSION, "limit": 200})
    users = [m["content"] for m in history["messages"] if m["role"] == "user"]
    assert users == [HOLD, "/echo one\n/echo two"]  # after A's run, as one merged message


@pytest.mark.parametrize("lease_ttl_s", [1.0])
async def test_a_message_queued_on_an_owner_killed_mid_run_is_run_by_the_other_daemon(
    pair: tuple[Daemon, Daemon],
) -> None:
    a, b = pair
    async with wire_client(b.ws, token=b.token)() as on_b:
        await on_b.call("chat.history", {"sessionKey": SESSION})
        async with wire_client(a.ws, token=a.token)() as on_a:
            held = await on_a.call("chat.send", {"sessionKey": SESSION, "prompt": HOLD})
            await on_a.event("exec.approval.requested", runId=held["runId"])
            # Handed to A, queued behind its run, recorded in the shared store.
            queued = await on_b.call("chat.send", {"sessionKey": SESSION, "prompt": "/echo kept"})
            on_owner = await on_a.call("sessions.snapshot", {"sessionKey": SESSION})
            assert queued["runId"] in str(on_owner["queued"])  # in A's queue, not run on B
        a.proc.kill()  # SIGKILL with the message still queued in A's memory
        await asyncio.to_thread(a.proc.wait, 30)
        # Nobody sends anything more: B's sweep takes the session once A's lease expired.
        vanished = await on_b.completed(held["runId"])
        done = await on_b.completed(queued["runId"])
        assert "owner_lost" in vanished["payload"]["error"]
        assert done["payload"]["ok"] is True, done
        assert done["payload"]["answer"] == "kept"
        history = await on_b.call("chat.history", {"sessionKey": SESSION})
    assert ("user", "/echo kept") in [(m["role"], m["content"]) for m in history["messages"]]
