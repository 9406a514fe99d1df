"""The fire ledger's row shape, shared by its SQL backends (SQLite and PostgreSQL): the column
list their SELECTs and RETURNINGs name, and the :class:`~lemon_core.fire_ledger.Fire` a row
of those columns is."""

from __future__ import annotations

from typing import Any, Final

from lemon_core.fire_ledger import Fire

__all__ = ["FIRE_COLUMNS", "fire_of"]

FIRE_COLUMNS: Final = (
    "job_id, due_at_ms, owner, fence, lease_until_ms, status, run_id, outcome, "
    "claimed_at_ms, updated_at_ms"
)


def fire_of(row: tuple[Any, ...]) -> Fire:
    """The fire a row of :data:`FIRE_COLUMNS` holds."""
    return Fire(
        job_id=str(row[0]),
        due_at_ms=int(row[1]),
        owner=str(row[2]),
        fence=int(row[3]),
        lease_until_ms=int(row[4]),
        status=str(row[5]),
        run_id=row[6],
        outcome=row[7],
        claimed_at_ms=int(row[8]),
        updated_at_ms=int(row[9]),
    )
