"""lemon_acp: ``lemon acp``, an Agent Client Protocol (v1) agent on stdio over the session port.

An editor (Zed, a JetBrains IDE, any ACP client) drives Lemon's agent: :class:`AcpAgent` speaks
ACP's JSON-RPC over newline-delimited frames and talks to one
:class:`~lemon_core.sessions.SessionPort` (the daemon's, over its WebSocket, or an in-process
runtime's); it never reaches the router, the gateway or the executor.
"""

from __future__ import annotations

from lemon_acp._agent import (
    MODES,
    PROTOCOL_VERSION,
    AcpAgent,
    AcpSession,
    ModelSource,
    SkillSource,
    Turn,
)
from lemon_acp._rpc import FrameReader, FrameWriter, RpcConnection
from lemon_acp._stdio import claim_stdout, serve_stdio
from lemon_acp.errors import AcpError, RpcError

__all__ = [
    "MODES",
    "PROTOCOL_VERSION",
    "AcpAgent",
    "AcpError",
    "AcpSession",
    "FrameReader",
    "FrameWriter",
    "ModelSource",
    "RpcConnection",
    "RpcError",
    "SkillSource",
    "Turn",
    "claim_stdout",
    "serve_stdio",
]
