"""The gateway's import surface. (That ``__all__`` is sorted, complete and exact is checked for
every app by ``lemon quality``'s ``export_list`` rule.)"""

from __future__ import annotations

import lemon_gateway


def test_the_private_execution_request_is_not_exported() -> None:
    # Consumers submit lemon_core ExecutionCommands; the gateway's request type stays private.
    assert "ExecutionRequest" not in lemon_gateway.__all__
