"""coding_agent's ``lemon.apps`` hook: the native agent on a booted runtime.

Profiles ``execution-only`` and ``full``. Start registers ``APPROVALS`` (one
:class:`~lemon_core.approvals.ExecApprovals` on the runtime's bus whose ``agent`` / ``global``
grants persist in the runtime's store through an
:class:`~lemon_core.store.ApprovalGrantStore`, loaded before anything asks) and
``AGENT_RUNTIME`` (a :class:`CodingExecutor` wired to the runtime: its home, those approvals,
and the environment over ``$LEMON_HOME/secrets.env``) and ``TRANSCRIPT_READER`` (the session
history for clients, :class:`~coding_agent._transcripts.SessionTranscriptReader`). The gateway's
hook takes the executor from ``AGENT_RUNTIME``, so no other app imports this one. Leaving the
lifespan unregisters them and waits for grant writes still in flight (the runtime closes its
store after every lifespan is left). The app owns the ``[file_access]`` and ``[tools]``
sections (:class:`FileAccessConfig`, :class:`ToolsConfig`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Final

from coding_agent._sections import SECTIONS
from coding_agent._subagents_section import SubagentsConfig
from coding_agent._transcripts import (
    ModelCatalogImpl,
    SessionCompactorImpl,
    SessionTranscriptReader,
)
from coding_agent._wire import registered
from coding_agent.executor import CodingExecutor
from coding_agent.subagents import Subagents
from coding_agent.transcript_mirror import TranscriptMirror
from lemon_browser import AddressGuard, Browsers, WebConfig
from lemon_core.approvals import ExecApprovals
from lemon_core.capabilities import AGENT_RUNTIME, APPROVALS, MODEL_CATALOG, ModelCatalog
from lemon_core.config import read_secrets
from lemon_core.cron import CRON_JOBS
from lemon_core.execution import Executor
from lemon_core.mcp import MCP_HUB
from lemon_core.sessions import (
    SESSION_COMPACTOR,
    SESSION_PORT,
    TRANSCRIPT_READER,
    SessionCompactor,
    TranscriptReader,
)
from lemon_core.store import ApprovalGrantStore
from lemon_core.wire_methods import WIRE_METHODS
from lemon_memory import GOAL_STORE, MEMORY_STORE
from lemon_runtime import AppSpec, Runtime

__all__ = ["CodingAgentRuntime", "coding_agent_app"]


@dataclass(kw_only=True, slots=True)
class CodingAgentRuntime:
    """What the hook registers as ``AGENT_RUNTIME``: the wired executor, always ready."""

    impl: CodingExecutor
    approvals: ExecApprovals
    transcripts: TranscriptReader
    compactor: SessionCompactor
    catalog: ModelCatalog

    def executor(self) -> Executor:
        return self.impl

    def not_ready_reason(self) -> str | None:
        return None


@contextlib.asynccontextmanager
async def _lifespan(runtime: Runtime) -> AsyncIterator[CodingAgentRuntime]:
    approvals = ExecApprovals(runtime.bus, grant_store=ApprovalGrantStore(runtime.store))
    # A store failure is logged and counted in approvals.statistics(); it never fails the boot.
    await approvals.load_grants()
    environ = {**read_secrets(runtime.home), **os.environ}
    # With a shared store (several daemons), transcripts are mirrored into it: every daemon
    # reads and resumes what another wrote, without a shared filesystem.
    mirror = TranscriptMirror(runtime.store) if runtime.leases is not None else None
    capabilities = runtime.context.capabilities
    # Children are submitted through the session port, which the router registers after
    # this app starts: looked up per task.
    subagents = Subagents(
        store=runtime.store,
        port=lambda: capabilities.get(SESSION_PORT),
        config=runtime.section(SubagentsConfig),
        bus=runtime.bus,
        approvals=approvals,  # a top-level parent's questions reach its person this way
    )
    await subagents.recover()  # tasks a previous process left running: unknown, not re-run
    # The browser tool's Chromium ([web] browser): started at its first use, closed on leaving.
    web = runtime.section(WebConfig)
    browsers = Browsers(guard=AddressGuard(allow_hosts=web.allow_hosts)) if web.browser else None
    impl = CodingExecutor(
        home=runtime.home,
        approvals=approvals,
        environ=environ,
        transcript_mirror=mirror,
        mcp=lambda: capabilities.get(MCP_HUB),  # lemon_mcp's hub, when it booted
        subagents=subagents,
        memory=lambda: capabilities.get(MEMORY_STORE),  # looked up per run
        goals=lambda: capabilities.get(GOAL_STORE),
        browsers=browsers,
        cron=lambda: capabilities.get(CRON_JOBS),  # lemon_automation's, while it runs
    )
    transcripts = SessionTranscriptReader(impl.sessions())
    compactor = SessionCompactorImpl(impl)
    catalog = ModelCatalogImpl(runtime.config, environ)
    agent = CodingAgentRuntime(
        impl=impl,
        approvals=approvals,
        transcripts=transcripts,
        compactor=compactor,
        catalog=catalog,
    )
    capabilities.register(APPROVALS, approvals)
    capabilities.register(AGENT_RUNTIME, agent)
    capabilities.register(TRANSCRIPT_READER, transcripts)
    capabilities.register(SESSION_COMPACTOR, compactor)
    capabilities.register(MODEL_CATALOG, catalog)
    try:
        with registered(capabilities.get(WIRE_METHODS), subagents):  # runs.tree, tasks.answer
            yield agent
    finally:
        capabilities.unregister(MODEL_CATALOG, catalog)
        capabilities.unregister(SESSION_COMPACTOR, compactor)
        capabilities.unregister(TRANSCRIPT_READER, transcripts)
        capabilities.unregister(AGENT_RUNTIME, agent)
        capabilities.unregister(APPROVALS, approvals)
        await subagents.close()
        await approvals.drain()
        if browsers is not None:
            await browsers.aclose()


coding_agent_app: Final = AppSpec(
    name="coding_agent",
    lifespan=_lifespan,
    profiles=frozenset({"execution-only", "full"}),
    description="the native agent (executor and approvals)",
    sections=SECTIONS,
    provides=(AGENT_RUNTIME, APPROVALS, MODEL_CATALOG),
)
