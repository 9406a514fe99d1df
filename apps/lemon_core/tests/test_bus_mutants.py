"""Bus facts that the mutation lane (scripts/mutate) found untested."""

from __future__ import annotations

import pytest

from lemon_core.bus import Bus, Delivery
from lemon_core.errors import BusClosedError
from lemon_core.events import RunStarted


async def test_bus_closed_refuses_typed_publications_too() -> None:
    bus = Bus()
    bus.close()
    with pytest.raises(BusClosedError, match="publications are refused"):
        bus.broadcast_event("run:r1", "run_started", RunStarted(run_id="r1", session_key="s"))


@pytest.mark.parametrize("field", ["max_entries", "max_message_bytes"])
@pytest.mark.parametrize("value", [True, False, 0, -1, 1.5, "8"])
async def test_bus_delivery_bounds_are_positive_ints_not_bools(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"{field} must be a positive int"):
        Delivery(**{field: value})  # type: ignore[arg-type]  # the misuse under test
