"""``lemon acp`` driven by the official ACP TypeScript SDK (``@agentclientprotocol/sdk`` from
npm) as the editor (``clients/ts_sdk_client.mjs`` under node): the prompt, the streamed text,
a bash call through a permission then cancel, and stdout clean (every line a JSON-RPC frame).

The SDK is installed once into a cache outside the repository (``$LEMON_TEST_NODE_CACHE``,
else ``~/.cache/lemon-tests``); without node/npm, or with the npm registry unreachable, the
test is skipped and says so."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SDK_VERSION = "2.4.0"
CLIENT = Path(__file__).parent / "clients" / "ts_sdk_client.mjs"
LEMON = str(Path(sys.executable).parent / "lemon")


def _sdk_dir() -> Path:
    """The installed SDK's directory (installed on first use); skips the test without it."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed to run the ACP TypeScript SDK client")
    root = Path(os.environ.get("LEMON_TEST_NODE_CACHE") or Path.home() / ".cache" / "lemon-tests")
    target = root / f"acp-ts-sdk-{SDK_VERSION}"
    package = target / "node_modules" / "@agentclientprotocol" / "sdk" / "package.json"
    if package.is_file():
        return target
    target.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                str(target),
                "--no-audit",
                "--no-fund",
                "--silent",
                f"@agentclientprotocol/sdk@{SDK_VERSION}",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.skip("npm install of @agentclientprotocol/sdk timed out (registry unreachable?)")
    if done.returncode != 0 or not package.is_file():
        pytest.skip(
            f"npm could not install @agentclientprotocol/sdk@{SDK_VERSION} (registry "
            f"unreachable?): {done.stderr.strip()[-300:]}"
        )
    return target


async def test_the_typescript_sdk_streams_asks_and_cancels_on_a_clean_stdout(
    agent_env: dict[str, str], workspace: Path
) -> None:
    sdk = await asyncio.to_thread(_sdk_dir)
    process = await asyncio.create_subprocess_exec(
        "node",
        str(CLIENT),
        str(sdk),
        str(workspace),
        LEMON,
        env=agent_env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(180):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()[-2000:]
    summary = json.loads(out.decode().strip().splitlines()[-1])
    assert summary["protocolVersion"] == 1
    assert summary["agent"] == "lemon"
    assert summary["sessionId"].startswith("acp:")
    assert summary["echoStop"] == "end_turn"
    assert summary["text"] == "hello from the typescript editor"
    assert summary["chunks"] > 1  # streamed, not one block
    assert summary["asked"] == 1
    assert summary["cancelStop"] == "cancelled"
    assert {"agent_message_chunk", "tool_call", "usage_update"} <= set(summary["kinds"])
    lines = [line for line in summary["rawLines"] if line.strip()]
    assert lines
    for line in lines:  # stdout carries only JSON-RPC frames
        frame = json.loads(line)
        assert frame["jsonrpc"] == "2.0"
