"""``lemon serve`` with a test-only fault point armed (run as a script by test_webhooks_crash).

The fault point is injected the way every fault point is: the app is built by
``webhooks_app(faults=...)``, replacing the entry point's ``lemon_webhooks_app`` in this
process before the runtime discovers its apps. ``after_reserve`` announces the reservation on
stderr and then waits forever, so the test can ``kill -9`` the daemon at exactly that point.
Then this runs the installed ``lemon`` script with the given arguments.
"""

from __future__ import annotations

import asyncio
import runpy
import sys
from pathlib import Path

import lemon_webhooks._boot as boot


class HangAfterReserve:
    async def after_reserve(self, run_id: str) -> None:
        print(f"webhook fault point: reserved {run_id}", file=sys.stderr, flush=True)
        await asyncio.Event().wait()


boot.lemon_webhooks_app = boot.webhooks_app(faults=HangAfterReserve())  # type: ignore[misc]  # Final: replaced in this test process only
sys.argv = ["lemon", *sys.argv[1:]]
runpy.run_path(str(Path(sys.executable).with_name("lemon")), run_name="__main__")
