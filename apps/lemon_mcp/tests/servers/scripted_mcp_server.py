"""A scripted stdio MCP server for the fault tests: ``python scripted_mcp_server.py MODE``.

Modes: ``ok`` (tools ``echo`` and ``add``), ``pages`` (3 pages of tools), ``hang_start``
(never answers ``initialize``), ``hang_call`` (never answers a call; writes ``cancelled`` to
stderr when told), ``big_frame`` (answers a call with a 20 MB line), ``garbage`` (prints junk
on stdout forever after initialize), ``crash_call`` (exits during a call), ``list_changed``
(the second listing adds a tool), ``unknown_id`` (answers a call with another id),
``children`` (starts a sleeping grandchild and prints its pid on stderr). A second argument
``stubborn`` makes any mode ignore SIGTERM and outlive its stdin, so only the KILL after the
grace ends it (a stop that takes the whole grace).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
STUBBORN = "stubborn" in sys.argv[2:]
if STUBBORN:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("scripted server starting (a banner on stderr)", file=sys.stderr, flush=True)

ECHO = {
    "name": "echo",
    "description": "Echo the text back.",
    "inputSchema": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}
ADD = {
    "name": "add",
    "description": "Add two numbers.",
    "inputSchema": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    },
}
listings = 0


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(rid: object, value: dict) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": value})


def tools_page(params: dict | None) -> dict:
    global listings
    listings += 1
    if MODE == "pages":
        cursor = (params or {}).get("cursor")
        page = {None: 0, "p2": 1, "p3": 2}[cursor]
        tools = [{"name": f"t{page}_{i}", "inputSchema": {"type": "object"}} for i in range(2)]
        nxt = {0: "p2", 1: "p3"}.get(page)
        return {"tools": tools, **({"nextCursor": nxt} if nxt else {})}
    tools = [ECHO, ADD]
    if MODE == "list_changed" and listings > 1:
        tools.append({"name": "late", "inputSchema": {"type": "object"}})
    return {"tools": tools}


def call(rid: object, params: dict) -> None:
    name, args = params["name"], params.get("arguments") or {}
    if MODE == "hang_call":
        print(f"call {rid}", file=sys.stderr, flush=True)
        return
    if MODE == "big_frame":
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {"content": [{"type": "text", "text": "x" * (20 * 1024 * 1024)}]},
            }
        )
        return
    if MODE == "crash_call":
        sys.exit(3)
    if MODE == "unknown_id":
        result(9999, {"content": []})
        return
    if MODE == "list_changed":
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    if name == "env":
        import os

        text = " ".join(
            sorted(k for k in os.environ if k.startswith(("OUR_", "SERVER_", "OPENAI")))
        )
        result(rid, {"content": [{"type": "text", "text": text}]})
        return
    if name == "echo":
        if args.get("text") == "slow":
            time.sleep(1.0)
        result(rid, {"content": [{"type": "text", "text": args.get("text", "")}]})
    elif name == "add":
        total = args.get("a", 0) + args.get("b", 0)
        result(
            rid,
            {
                "content": [{"type": "text", "text": str(total)}],
                "structuredContent": {"sum": total},
            },
        )
    elif name == "fail":
        result(rid, {"content": [{"type": "text", "text": "it failed"}], "isError": True})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no tool"}})


for line in sys.stdin:
    message = json.loads(line)
    method, rid = message.get("method"), message.get("id")
    if method == "initialize":
        if MODE == "hang_start":
            time.sleep(3600)
        if MODE == "children":
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
            print(f"grandchild {child.pid}", file=sys.stderr, flush=True)
        result(
            rid,
            {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "scripted", "version": "1"},
            },
        )
    elif method == "notifications/initialized":
        if MODE == "garbage":
            while True:
                sys.stdout.write("junk junk junk\n")
                sys.stdout.flush()
    elif method == "notifications/cancelled":
        print(f"cancelled {message['params']['requestId']}", file=sys.stderr, flush=True)
    elif method == "tools/list":
        result(rid, tools_page(message.get("params")))
    elif method == "tools/call":
        call(rid, message["params"])
    elif method == "ping":
        result(rid, {})
    elif rid is not None:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": method}})

if STUBBORN:
    time.sleep(3600)  # stdin closed: a stubborn server stays until KILLed
