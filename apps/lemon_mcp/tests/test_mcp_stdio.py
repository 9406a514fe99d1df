"""The stdio client and the hub against real server processes (the scripted server for the
faults, the official SDK's server for the happy path)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lemon_core.config import Config
from lemon_core.mcp import McpHub
from lemon_mcp import McpClient, McpHubImpl, StdioTransport

ConfigFor = Callable[..., tuple[Config, Path, Path]]
SERVERS = Path(__file__).parent / "servers"
SCRIPTED = str(SERVERS / "scripted_mcp_server.py")
SDK = str(SERVERS / "sdk_mcp_server.py")
PYTHON = sys.executable


def scripted(name: str, mode: str, **extra: object) -> str:
    """A ``[mcp.servers.NAME]`` table running the scripted server in ``mode``."""
    lines = [
        f"[mcp.servers.{name}]",
        f'command = "{PYTHON}"',
        f'args = ["{SCRIPTED}", "{mode}"]',
    ]
    lines += [f"{k} = {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


def _hub(home: Path, **environ: str) -> McpHubImpl:
    return McpHubImpl(home=home, environ={"PATH": os.environ["PATH"], **environ})


async def test_the_sdk_server_lists_and_calls_its_tools(config_for: ConfigFor) -> None:
    config, home, work = config_for(
        f'[mcp.servers.sdk]\ncommand = "{PYTHON}"\nargs = ["{SDK}", "stdio"]\napproval = "allow"\n'
    )
    hub = _hub(home)
    assert isinstance(hub, McpHub)
    try:
        found = await hub.discover(config, cwd=work)
        assert found.unavailable == {}
        by_name = {t.name: t for t in found.tools}
        assert set(by_name) == {"mcp_sdk_echo", "mcp_sdk_add"}
        echo = by_name["mcp_sdk_echo"]
        assert echo.server == "sdk"
        assert echo.tool == "echo"
        assert echo.approval == "allow"
        assert echo.parameters["properties"]["text"]["type"] == "string"
        out = await hub.call(echo, {"text": "hello"})
        assert (out.content, out.is_error) == ("hello", False)
        out = await hub.call(by_name["mcp_sdk_add"], {"a": 2, "b": 3})
        assert out.content == "5"
    finally:
        await hub.aclose()


async def test_pagination_follows_every_page(config_for: ConfigFor) -> None:
    config, home, work = config_for(scripted("p", "pages"))
    hub = _hub(home)
    try:
        found = await hub.discover(config, cwd=work)
        assert sorted(t.tool for t in found.tools) == [
            f"t{p}_{i}" for p in range(3) for i in (0, 1)
        ]
    finally:
        await hub.aclose()


async def test_a_server_hanging_at_start_is_unavailable_and_never_blocks_another(
    config_for: ConfigFor,
) -> None:
    config, home, work = config_for(
        scripted("slow", "hang_start", startup_timeout_s=0.5) + scripted("ok", "ok")
    )
    hub = _hub(home)
    try:
        began = time.monotonic()
        found = await hub.discover(config, cwd=work)
        assert time.monotonic() - began < 5
        assert "startup_timeout_s" in found.unavailable["slow"]
        assert {t.server for t in found.tools} == {"ok"}
    finally:
        await hub.aclose()


async def test_a_missing_command_is_unavailable_with_the_reason(config_for: ConfigFor) -> None:
    config, home, work = config_for('[mcp.servers.gone]\ncommand = "/nonexistent/mcp-server"\n')
    hub = _hub(home)
    found = await hub.discover(config, cwd=work)
    assert "cannot start" in found.unavailable["gone"]
    await hub.aclose()


async def test_a_call_that_never_answers_times_out_and_is_cancelled(
    config_for: ConfigFor,
) -> None:
    config, home, work = config_for(scripted("h", "hang_call", call_timeout_s=0.3))
    hub = _hub(home)
    try:
        found = await hub.discover(config, cwd=work)
        echo = next(t for t in found.tools if t.tool == "echo")
        out = await hub.call(echo, {"text": "x"})
        assert out.is_error
        assert "no answer within 0.3 s" in out.content
        for _ in range(200):  # the server logs the cancellation it received on stderr
            if "cancelled" in hub.stderr_tail("h"):
                break
            await asyncio.sleep(0.01)
        assert "cancelled 3" in hub.stderr_tail("h")
    finally:
        await hub.aclose()


async def test_a_frame_over_the_cap_ends_the_connection(config_for: ConfigFor) -> None:
    config, home, work = config_for(scripted("big", "big_frame"))
    hub = _hub(home)
    try:
        found = await hub.discover(config, cwd=work)
        echo = next(t for t in found.tools if t.tool == "echo")
        out = await hub.call(echo, {"text": "x"})
        assert out.is_error
        assert "frame over" in out.content
        assert hub.status()[0].state.value == "failed"
    finally:
        await hub.aclose()


async def test_garbage_on_stdout_ends_the_connection_after_a_bounded_number() -> None:
    transport = StdioTransport(
        name="g", command=PYTHON, args=(SCRIPTED, "garbage"), max_garbage_lines=5
    )
    client = McpClient(transport, name="g")
    lost = asyncio.Event()
    client.on_lost = lambda reason: lost.set()
    await client.start()
    await asyncio.wait_for(lost.wait(), 10)
    assert "more than 5 non-JSON lines" in (client.closed_reason or "")
    assert transport.garbage_lines == 6
    await client.aclose()


async def test_a_response_for_an_unknown_id_ends_the_connection(config_for: ConfigFor) -> None:
    config, home, work = config_for(scripted("u", "unknown_id"))
    hub = _hub(home)
    try:
        found = await hub.discover(config, cwd=work)
        out = await hub.call(found.tools[0], {"text": "x"})
        assert out.is_error
        assert "unknown request id" in out.content
    finally:
        await hub.aclose()


async def test_a_crash_mid_call_is_an_error_then_the_server_restarts(
    config_for: ConfigFor,
) -> None:
    config, home, work = config_for(scripted("c", "crash_call"))
    hub = _hub(home)
    try:
        found = await hub.discover(config, cwd=work)
        out = await hub.call(found.tools[0], {"text": "x"})
        assert out.is_error
        assert "closed its stdout" in out.content
        hub._clock = lambda: time.monotonic() + 3600  # past the restart backoff
        again = await hub.discover(config, cwd=work)
        assert again.unavailable == {}
        assert again.tools
    finally:
        await hub.aclose()


async def test_list_changed_makes_the_next_discovery_list_again(config_for: ConfigFor) -> None:
    config, home, work = config_for(scripted("l", "list_changed"))
    hub = _hub(home)
    try:
        found = await hub.discover(config, cwd=work)
        assert {t.tool for t in found.tools} == {"echo", "add"}
        await hub.call(found.tools[0], {"text": "x"})
        again = await hub.discover(config, cwd=work)
        assert {t.tool for t in again.tools} == {"echo", "add", "late"}
    finally:
        await hub.aclose()


async def test_two_servers_with_the_same_tool_get_distinct_names_and_filters_apply(
    config_for: ConfigFor,
) -> None:
    config, home, work = config_for(
        scripted("a", "ok")
        + scripted("b", "ok", **{"tools.deny": '["add"]'})
        + scripted("c", "ok", approval='"deny"')
    )
    hub = _hub(home)
    try:
        found = await hub.discover(config, cwd=work)
        names = sorted(t.name for t in found.tools)
        assert names == ["mcp_a_add", "mcp_a_echo", "mcp_b_echo"]
    finally:
        await hub.aclose()


async def test_stopping_ends_the_servers_process_group(config_for: ConfigFor) -> None:
    config, home, work = config_for(scripted("k", "children"))
    hub = _hub(home)
    await hub.discover(config, cwd=work)
    tail = ""
    for _ in range(200):
        tail = hub.stderr_tail("k")
        if "grandchild" in tail:
            break
        await asyncio.sleep(0.01)
    grandchild = int(tail.split("grandchild ")[1].split()[0])
    await hub.aclose()
    for _ in range(300):
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("the server's child outlived the hub")


async def test_env_from_passes_a_secret_to_the_server_only(config_for: ConfigFor) -> None:
    config, home, work = config_for(scripted("e", "ok", env_from='{ SERVER_TOKEN = "OUR_TOKEN" }'))
    hub = _hub(home, OUR_TOKEN="s3cr3t")
    found = await hub.discover(config, cwd=work)
    assert found.unavailable == {}
    assert "s3cr3t" not in repr(found)
    await hub.aclose()
    missing = _hub(home)  # the variable unset: the server does not start, and says why
    found = await missing.discover(config, cwd=work)
    assert "OUR_TOKEN" in found.unavailable["e"]
    await missing.aclose()


async def test_a_project_server_starts_only_once_approved(config_for: ConfigFor) -> None:
    from lemon_mcp import McpConfig, ProjectApprovals, definition_hash

    config, home, work = config_for("", scripted("p", "ok"))
    hub = _hub(home)
    try:
        found = await hub.discover(config, cwd=work)
        assert "lemon mcp approve p" in found.unavailable["p"]
        assert hub.status() == []  # it was never started
        server = config.section(McpConfig).servers["p"]
        ProjectApprovals(home).approve(work / ".lemon" / "config.toml", "p", "0" * 64)
        assert "not approved" in (await hub.discover(config, cwd=work)).unavailable["p"]
        ProjectApprovals(home).approve(
            work / ".lemon" / "config.toml", "p", definition_hash(server)
        )
        found = await hub.discover(config, cwd=work)
        assert found.unavailable == {}
        assert {t.tool for t in found.tools} == {"echo", "add"}
    finally:
        await hub.aclose()


async def test_a_late_answer_after_a_timeout_is_dropped_not_a_fault(config_for: ConfigFor) -> None:
    config, home, work = config_for(scripted("s", "ok", call_timeout_s=0.7))
    hub = _hub(home)
    try:
        found = await hub.discover(config, cwd=work)
        echo = next(t for t in found.tools if t.tool == "echo")
        slow = await hub.call(echo, {"text": "slow"})
        assert slow.is_error
        assert "no answer within" in slow.content
        # The server answers the slow call first (late), then this one: the late answer is
        # dropped and the connection stays up.
        fast = await hub.call(echo, {"text": "fast"})
        assert (fast.content, fast.is_error) == ("fast", False)
        assert hub.status()[0].state.value == "ready"
    finally:
        await hub.aclose()


async def test_a_slow_server_goes_on_starting_and_is_offered_to_the_next_run(
    config_for: ConfigFor,
) -> None:
    # hang_start never answers: it stands in for a slow `uvx` server; the run waits only
    # discover_wait_s, and the start goes on in the background (ended by aclose).
    config, home, work = config_for(
        "[mcp]\ndiscover_wait_s = 0.3\n"
        + scripted("slow", "hang_start", startup_timeout_s=60)
        + scripted("ok", "ok")
    )
    hub = _hub(home)
    began = time.monotonic()
    found = await hub.discover(config, cwd=work)
    assert time.monotonic() - began < 5
    assert "still starting" in found.unavailable["slow"]
    assert {t.server for t in found.tools} == {"ok"}
    assert hub.status()[1].state.value == "starting"
    client = hub._servers["slow"].client
    assert client is not None
    pid = client.transport.pid  # type: ignore[attr-defined]
    assert pid is not None
    await asyncio.wait_for(hub.aclose(), 10)  # the pending start is cancelled, its process ended
    assert hub.status() == []
    # ended and reaped by the time aclose returns (not left to end after the loop is gone)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def _stderr_says(hub: McpHubImpl, name: str, text: str) -> None:
    for _ in range(500):
        if text in hub.stderr_tail(name):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{text!r} not in {name}'s stderr: {hub.stderr_tail(name)!r}")


async def test_an_aborted_call_sends_cancelled_and_keeps_the_connection(
    config_for: ConfigFor,
) -> None:
    config, home, work = config_for(scripted("a", "hang_call"))
    hub = _hub(home)
    try:
        found = await hub.discover(config, cwd=work)
        echo = next(t for t in found.tools if t.tool == "echo")
        call = asyncio.ensure_future(hub.call(echo, {"text": "x"}))
        await _stderr_says(hub, "a", "call 3")  # the server has the request
        call.cancel()  # what an aborted run does to its tool call
        with contextlib.suppress(asyncio.CancelledError):
            await call
        await _stderr_says(hub, "a", "cancelled 3")
        assert hub.status()[0].state.value == "ready"
    finally:
        await hub.aclose()


async def test_a_server_inherits_no_secret_but_its_env_from(config_for: ConfigFor) -> None:
    from lemon_core.mcp import McpToolSpec

    config, home, work = config_for(scripted("e", "ok", env_from='{ SERVER_TOKEN = "OUR_TOKEN" }'))
    hub = _hub(home, OUR_TOKEN="s3cr3t", OPENAI_API_KEY="sk-x", OUR_PLAIN="1")
    try:
        await hub.discover(config, cwd=work)
        out = await hub.call(McpToolSpec(name="mcp_e_env", server="e", tool="env"), {})
        # the server got SERVER_TOKEN (from OUR_TOKEN) and OUR_PLAIN; no provider key, and
        # not OUR_TOKEN itself (the config names it a secret)
        assert out.content == "OUR_PLAIN SERVER_TOKEN"
    finally:
        await hub.aclose()


async def test_a_second_aclose_waits_until_the_server_is_ended_and_reaped() -> None:
    """The hub's stop can race a cancelled start's clean-up: both close the one transport. The
    second call must not return before the first has ended the process (else the runtime stops
    with the server still running)."""
    transport = StdioTransport(name="h", command=PYTHON, args=(SCRIPTED, "hang_start"))
    await transport.start(lambda _: None, lambda _: None)
    pid = transport.pid
    assert pid is not None
    first = asyncio.ensure_future(transport.aclose())
    await asyncio.sleep(0)  # the first close is under way (stdin closed, TERM sent)
    await transport.aclose()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # ended and reaped, not a zombie
    await first


async def test_closing_waits_for_a_stop_a_background_start_began(config_for: ConfigFor) -> None:
    """A start left to the background (past discover_wait_s) times out and is ending its
    server, which ignores TERM (the stop takes the 2 s grace), when the hub is closed: aclose
    cancels the start but waits for that stop, so no process outlives the hub."""
    config, home, work = config_for(
        "[mcp]\ndiscover_wait_s = 0.2\n"
        f'[mcp.servers.slow]\ncommand = "{PYTHON}"\n'
        f'args = ["{SCRIPTED}", "hang_start", "stubborn"]\nstartup_timeout_s = 0.5\n'
    )
    hub = _hub(home)
    failed = asyncio.Event()
    hub.subscribe(lambda name, change: failed.set() if change == "failed" else None)
    found = await hub.discover(config, cwd=work)
    assert "still starting" in found.unavailable["slow"]
    client = hub._servers["slow"].client
    assert client is not None
    pid = client.transport.pid  # type: ignore[attr-defined]
    await asyncio.wait_for(failed.wait(), 30)  # timed out: its stop is under way (TERM ignored)
    await asyncio.wait_for(hub.aclose(), 10)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # ended and reaped by the time aclose returned
