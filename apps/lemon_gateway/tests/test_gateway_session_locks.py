"""The session lock the processes of one home share (``_session_locks``): a run of a session
waits while another process holds it, takes it when that process lets go or dies, and a
cancelled waiter holds nothing."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from lemon_gateway._session_locks import SessionFileLock, session_lock_path

_HOLDER = """
import fcntl, sys
handle = open(sys.argv[1], "ab")
fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.readline()
"""


def _hold_in_another_process(path: Path) -> subprocess.Popen[str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


async def test_a_run_waits_while_another_process_holds_the_session(tmp_path: Path) -> None:
    holder = _hold_in_another_process(session_lock_path(tmp_path, "agent:a:main"))
    try:
        waiting = asyncio.ensure_future(SessionFileLock.acquire(tmp_path, "agent:a:main"))
        await asyncio.sleep(0.3)
        assert not waiting.done()  # held elsewhere: it waits
        other = await SessionFileLock.acquire(tmp_path, "agent:b:main")
        assert other is not None
        assert other.held
        other.release()
        holder.kill()  # the holder dies: the kernel lets the lock go
        lock = await asyncio.wait_for(waiting, 10)
        assert lock is not None
        assert lock.held
        lock.release()
        lock.release()  # idempotent
        assert not lock.held
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait(10)
        for stream in (holder.stdin, holder.stdout):
            if stream is not None:
                stream.close()


async def test_a_cancelled_waiter_holds_nothing(tmp_path: Path) -> None:
    first = await SessionFileLock.acquire(tmp_path, "agent:a:main")
    assert first is not None
    waiting = asyncio.ensure_future(SessionFileLock.acquire(tmp_path, "agent:a:main"))
    await asyncio.sleep(0.05)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    first.release()
    again = await asyncio.wait_for(SessionFileLock.acquire(tmp_path, "agent:a:main"), 5)
    assert again is not None
    again.release()
