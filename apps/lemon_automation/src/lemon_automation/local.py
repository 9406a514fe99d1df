"""The wire methods on this home's store directly, for the CLI when no daemon runs: the same
handlers (so the same validation, messages and shapes) on a service opened without a session
port. A method that runs a job (``cron.run``, ``wake``) is refused: that needs the daemon. A
daemon started later picks the changes up within ``poll_ms``."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from lemon_automation._section import AutomationConfig
from lemon_automation._wire import methods_of, snake
from lemon_automation.jobs import JobStore
from lemon_automation.runs import CronRunStore
from lemon_automation.service import AutomationService, default_daemon_id
from lemon_core.bus import Bus
from lemon_core.config import LoadedConfig
from lemon_core.errors import UsageError
from lemon_core.wire_methods import WireCall
from lemon_runtime import open_configured_store, open_fire_ledger

__all__ = ["call_on_store", "snake"]


async def call_on_store(loaded: LoadedConfig, method: str, params: Mapping[str, Any]) -> Any:
    """``method``'s payload, answered on the configured store (raises ``UsageError`` for bad
    input, as the daemon would answer ``INVALID_PARAMS``)."""
    if method in ("cron.run", "wake"):
        raise UsageError("running a job needs the daemon: start it with lemon daemon start")
    config = loaded.config.section(AutomationConfig)
    store = await open_configured_store(loaded.config, loaded.home)
    bus = Bus()
    try:
        ledger, owned = await open_fire_ledger(store, loaded.home)
        try:
            service = AutomationService(
                jobs=JobStore(store, max_jobs_per_agent=config.max_jobs_per_agent),
                runs=CronRunStore(store),
                ledger=ledger,
                port=None,
                bus=bus,
                owner=config.daemon_id or default_daemon_id(),
                home=loaded.home,
                lease_ms=config.lease_ms,
                poll_ms=config.poll_ms,
            )
            handler, _scope = methods_of(service)[method]
            return await handler(WireCall(method=method, params=dict(params)))
        finally:
            close = getattr(ledger, "close", None)
            if owned and close is not None:
                with contextlib.suppress(Exception):
                    await close()
    finally:
        bus.close()
        await store.close()
