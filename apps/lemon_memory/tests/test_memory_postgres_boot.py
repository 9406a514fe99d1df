"""With ``[store] backend = "postgres"`` the booted daemon's memory is PostgreSQL full-text
search in the store's schema, on the store's pool: a remember through the registered store is
a row of that schema, and a second daemon on the same schema recalls it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable

from lemon_infra import drop_schema
from lemon_memory import MEMORY_STORE, MemoryContext, prepare
from lemon_memory._postgres import PostgresMemoryStore
from lemon_runtime import Runtime

DSN = os.environ.get("LEMON_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
CTX = MemoryContext(agent_id="default", project="/p/shared")


async def test_a_postgres_store_gives_postgres_memory_shared_by_two_daemons(
    boot: Callable[..., Runtime],
) -> None:
    schema = f"memboot_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    config = f'[store]\nbackend = "postgres"\ndsn = "{DSN}"\nschema = "{schema}"\n'
    try:
        async with boot(config) as first:
            store = first.context.capabilities.require(MEMORY_STORE)
            assert isinstance(store, PostgresMemoryStore)
            assert store.schema == schema
            doc = await store.put(
                prepare(CTX, text="the release train leaves on Tuesdays", now_ms=0,
                        scope="project")
            )  # fmt: skip
            async with boot(config) as second:
                other = second.context.capabilities.require(MEMORY_STORE)
                found = await other.recall(CTX, "when does the release train leave?")
                assert [h.document.doc_id for h in found.hits] == [doc.doc_id]
                assert (await other.statistics()).backend == "postgres"
    finally:
        await drop_schema(DSN, schema)
