"""A small stdio MCP server for the control plane's tests: one tool, ``echo``, answering its
``text``. Newline-delimited JSON-RPC, as the MCP stdio transport says."""

from __future__ import annotations

import json
import sys

ECHO = {
    "name": "echo",
    "description": "Echo the text back.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    method, rid = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "echo", "version": "1"},
        }})  # fmt: skip
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [ECHO]}})
    elif method == "tools/call":
        text = (message["params"].get("arguments") or {}).get("text", "")
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
    elif rid is not None:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no method"}})
