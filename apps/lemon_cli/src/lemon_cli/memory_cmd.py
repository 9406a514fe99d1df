"""``lemon memory``: this home's memory, as its operator sees it: ``status``/``stats``,
``list``, ``show ID``, ``search QUERY`` (a context's scopes, or ``--all``; ``--explain``),
``add TEXT``, ``forget ID`` / ``forget --scope S --yes``, ``export``, ``import FILE``,
``consolidate``, ``undo [ID]``, ``history ID``; and ``eval FILE``, a labelled set on a
throwaway store, its recall@5 and MRR@10 next to two baselines measured in the same run.

When a daemon runs, each command is a call of its ``memory.*`` methods (search and the writes
need an admin token: this home's local token is one). When none runs, the same operations
(lemon_memory's :class:`~lemon_memory.Operator`) run here on the configured store: the SQLite
file, or the memory tables in the PostgreSQL schema. Text is redacted on the way out; every
write (add, import) is screened as the model's are. A model never gets this view: its recall is
bounded to its run's own scopes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from lemon_cli._wire_call import daemon_call, daemon_runs

__all__ = ["memory_app"]

memory_app = typer.Typer(
    help="This home's memory: status, list, show, search, add, forget, export, import, "
    "consolidate, undo (on the daemon when one runs, else on the store), and recall quality "
    "(eval).",
    no_args_is_help=True,
)
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")]
LimitOpt = Annotated[int, typer.Option(min=1, max=500, help="At most this many documents.")]
AgentOpt = Annotated[str | None, typer.Option("--agent", help="The agent (default: default).")]
SessionOpt = Annotated[str | None, typer.Option("--session", help="A session key.")]
ProjectOpt = Annotated[
    Path | None,
    typer.Option("--project", help="The project directory (default: the git root of here)."),
]
ScopeOpt = Annotated[
    str | None, typer.Option("--scope", help="One scope: session, project, agent or user.")
]
_IMPORT_CHUNK = 1000  # lines per memory.import call (lemon_memory's MAX_IMPORT_LINES)


def _fail(message: str, code: int) -> typer.Exit:
    typer.echo(f"lemon memory: {message}", err=True)
    return typer.Exit(code)


async def _local(method: str, params: dict[str, Any]) -> Any:
    """``method`` on this home's store, with no daemon (the daemon's own operations)."""
    import asyncio
    import os

    from lemon_core.config import ConfigError, load_config, read_secrets, resolve_store_dsn
    from lemon_core.home import Home
    from lemon_core.store import StoreError
    from lemon_memory import MemoryConfig, Operator, open_store, store_bounds
    from lemon_memory.errors import MemoryStoreError

    try:
        loaded = load_config()
    except ConfigError as exc:
        raise _fail("; ".join(i.render() for i in exc.issues), 2) from None
    config = loaded.config.section(MemoryConfig)
    home = loaded.home
    secrets = tuple(read_secrets(home).values())
    if not config.enabled:
        return await Operator(None, unavailable="[memory] enabled = false").call(method, params)
    shared = None
    try:
        if loaded.config.store.backend == "postgres":
            from lemon_infra import PostgresStore
            from lemon_memory import PostgresMemoryStore

            dsn = resolve_store_dsn(loaded.config.store, os.environ)
            shared = await PostgresStore.open(
                dsn, schema=loaded.config.store.schema, min_connections=1, max_connections=2
            )
            store: Any = await PostgresMemoryStore.open(shared, **store_bounds(config))
        else:
            store = await asyncio.to_thread(open_store, config, Home(root=home))
    except (ConfigError, StoreError, MemoryStoreError) as exc:
        if shared is not None:
            await shared.close()
        raise _fail(str(exc), 1) from None
    try:
        return await Operator(store, known_secrets=lambda: secrets).call(method, params)
    finally:
        await store.close()
        if shared is not None:
            await shared.close()


def _call(method: str, params: dict[str, Any]) -> Any:
    import asyncio

    if daemon_runs():
        return daemon_call("lemon memory", method, params, feature="memory")
    from lemon_core.errors import UsageError
    from lemon_memory.errors import MemoryUnavailableError

    try:
        return asyncio.run(_local(method, params))
    except UsageError as exc:
        raise _fail(str(exc), 2) from None
    except MemoryUnavailableError as exc:
        raise _fail(str(exc), 1) from None


def _context(agent: str | None, session: str | None, project: Path | None) -> dict[str, Any]:
    from lemon_memory.documents import project_root

    params: dict[str, Any] = {"project": project_root(str(project or Path.cwd()))}
    if agent is not None:
        params["agentId"] = agent
    if session is not None:
        params["sessionKey"] = session
    return params


def _line(doc: dict[str, Any], score: float | None = None) -> str:
    text = " ".join(str(doc.get("title") or doc.get("body", "")).split())
    if len(text) > 80:
        text = text[:77] + "..."
    where = f"{doc.get('scope')}:{doc.get('scope_key')}"
    ranked = "" if score is None else f" ({score:.2f})"
    return f"{doc.get('doc_id')}  {doc.get('kind')}  {where}{ranked}  {text}"


def _print_status(found: dict[str, Any], as_json: bool) -> None:
    import json

    if as_json:
        typer.echo(json.dumps(found))
        return
    if not found.get("available"):
        typer.echo(f"memory is unavailable{': ' + found['reason'] if found.get('reason') else ''}")
        return
    for key, value in sorted(found.items()):
        if key != "available":
            typer.echo(f"{key}: {value}")


@memory_app.command("status")
def status(as_json: JsonOpt = False) -> None:
    """Whether memory is available, and its counts."""
    _print_status(_call("memory.status", {}), as_json)


@memory_app.command("stats")
def stats(as_json: JsonOpt = False) -> None:
    """The store's size, documents per scope, evictions and refusals (as status)."""
    _print_status(_call("memory.status", {}), as_json)


@memory_app.command("list")
def list_docs(
    agent: Annotated[str | None, typer.Option(help="Only this agent's documents.")] = None,
    scope: ScopeOpt = None,
    limit: LimitOpt = 50,
    as_json: JsonOpt = False,
) -> None:
    """The newest documents (every scope)."""
    import json

    params: dict[str, Any] = {"limit": limit}
    if agent is not None:
        params["agentId"] = agent
    if scope is not None:
        params["scope"] = scope
    found = _call("memory.list", params)
    if as_json:
        typer.echo(json.dumps(found))
        return
    docs = found.get("documents", [])
    for doc in docs:
        typer.echo(_line(doc))
    if not docs:
        typer.echo("no documents")


@memory_app.command("show")
def show(
    doc_id: Annotated[str, typer.Argument(help="A document id (see: lemon memory list).")],
    as_json: JsonOpt = False,
) -> None:
    """One document, every field."""
    import json

    doc = _call("memory.get", {"docId": doc_id}).get("document")
    if doc is None:
        raise _fail(f"no document {doc_id}", 1)
    if as_json:
        typer.echo(json.dumps(doc))
        return
    for key in ("doc_id", "kind", "scope", "scope_key", "agent_id", "title", "tags", "source",
                "pinned", "created_at_ms", "updated_at_ms", "last_recalled_at_ms",
                "expires_at_ms", "supersedes", "content_hash"):  # fmt: skip
        value = doc.get(key)
        if isinstance(value, list):
            value = " ".join(value)
        typer.echo(f"{key}: {'' if value is None else value}")
    typer.echo("")
    typer.echo(doc.get("body", ""))


@memory_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="The words to search for.")],
    scope: ScopeOpt = None,
    every: Annotated[
        bool, typer.Option("--all", help="Every scope of every agent (the operator's view).")
    ] = False,
    agent: AgentOpt = None,
    session: SessionOpt = None,
    project: ProjectOpt = None,
    limit: Annotated[int, typer.Option(min=1, max=10, help="At most this many hits.")] = 10,
    explain: Annotated[
        bool,
        typer.Option(help="Show each hit's text rank, scope weight, decay and embedding rank."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Search the scopes a run of this agent here would see (session, project, agent, user),
    one of them with --scope, or every scope with --all."""
    import json

    if every and scope is not None:
        raise _fail("--all and --scope do not go together: choose one", 2)
    params: dict[str, Any] = {"query": query, "limit": limit}
    if every:
        params["all"] = True
    else:
        params.update(_context(agent, session, project))
        if scope is not None:
            params["scope"] = scope
    found = _call("memory.search", params)
    if as_json:
        typer.echo(json.dumps(found))
        return
    hits = found.get("hits", [])
    for hit in hits:
        typer.echo(_line(hit.get("document", {}), hit.get("score")))
        if explain:
            rank = hit.get("embeddingRank")
            dense = f"none ({found.get('embeddings', 'off')})" if rank is None else rank
            typer.echo(
                f"    bm25/ts_rank {hit.get('lexical', 0):.4g} x scope weight "
                f"{hit.get('scopeWeight', 0):.2f} x decay {hit.get('decay', 0):.3f}"
                f"{' x pinned 1.25' if hit.get('document', {}).get('pinned') else ''}; "
                f"embedding rank {dense}"
            )
    if not hits:
        typer.echo("no words to search for" if found.get("emptyQuery") else "nothing found")


@memory_app.command("add")
def add(
    text: Annotated[str, typer.Argument(help="The fact or note to remember.")],
    scope: Annotated[
        str, typer.Option(help="session, project, agent or user (default: agent).")
    ] = "agent",
    agent: AgentOpt = None,
    session: SessionOpt = None,
    project: ProjectOpt = None,
    kind: Annotated[str, typer.Option(help="fact, preference, note or run_summary.")] = "note",
    title: Annotated[str | None, typer.Option(help="A short title.")] = None,
    tag: Annotated[list[str] | None, typer.Option(help="A tag (repeatable).")] = None,
    pin: Annotated[bool, typer.Option(help="Never evict it.")] = False,
    ttl: Annotated[
        str | None, typer.Option(help="Forget it after this long, e.g. 7d, 12h, 30m.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Remember TEXT (screened for secrets and injected instructions, as a model's writes)."""
    import json

    params: dict[str, Any] = {**_context(agent, session, project), "text": text, "scope": scope,
                              "kind": kind, "tags": tag or [], "pin": pin}  # fmt: skip
    if title is not None:
        params["title"] = title
    if ttl is not None:
        params["ttl"] = ttl
    doc = _call("memory.add", params)["document"]
    if as_json:
        typer.echo(json.dumps(doc))
        return
    typer.echo(f"remembered {doc['doc_id']} ({doc['scope']}:{doc['scope_key']})")


@memory_app.command("forget")
def forget(
    doc_id: Annotated[
        str | None, typer.Argument(help="A document id (see: lemon memory list).")
    ] = None,
    scope: Annotated[
        str | None,
        typer.Option("--scope", help="Forget every document of this scope instead (needs --yes)."),
    ] = None,
    agent: Annotated[str | None, typer.Option(help="With --scope: only this agent's.")] = None,
    key: Annotated[
        str | None, typer.Option(help="With --scope: only this scope key (a session key...).")
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Confirm forgetting a whole scope.")] = False,
) -> None:
    """Forget one document, or with --scope S --yes every document of a scope."""
    if (doc_id is None) == (scope is None):
        raise _fail("give a document id or --scope S (not both)", 2)
    if doc_id is not None:
        if not _call("memory.forget", {"docId": doc_id}).get("forgotten"):
            raise _fail(f"no document {doc_id}", 1)
        typer.echo(f"forgot {doc_id}")
        return
    if not yes:
        raise _fail(f"this forgets every {scope} document; add --yes to confirm", 2)
    params: dict[str, Any] = {"scope": scope}
    if agent is not None:
        params["agentId"] = agent
    if key is not None:
        params["scopeKey"] = key
    n = _call("memory.forgetScope", params)["forgotten"]
    typer.echo(f"forgot {n} {scope} document{'s' if n != 1 else ''}")


@memory_app.command("export")
def export(
    file: Annotated[
        Path | None, typer.Argument(help="Write here (default: standard output).")
    ] = None,
) -> None:
    """Every document as JSON lines (lemon memory import reads them back)."""
    import json

    out = sys.stdout if file is None else None
    lines: list[str] = []
    after: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 200}
        if after is not None:
            params["after"] = after
        page = _call("memory.export", params)
        lines += [json.dumps(doc, ensure_ascii=False) for doc in page["documents"]]
        after = page.get("next")
        if after is None:
            break
    text = "".join(line + "\n" for line in lines)
    if out is not None:
        out.write(text)
        return
    assert file is not None
    try:
        file.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise _fail(f"cannot write {file}: {exc.strerror or exc}", 2) from None
    typer.echo(f"exported {len(lines)} documents to {file}", err=True)


@memory_app.command("import")
def import_file(
    file: Annotated[Path, typer.Argument(help="JSON lines, one document each (as exported).")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Check every line; store nothing.")
    ] = False,
    skip_bad: Annotated[
        bool, typer.Option("--skip-bad", help="Store the good lines even if some are bad.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Import documents (each line screened like any write). A bad line is reported with its
    number; unless --skip-bad, nothing is stored then."""
    import json

    try:
        text = file.read_bytes().decode("utf-8")
    except OSError as exc:
        raise _fail(f"cannot read {file}: {exc.strerror or exc}", 2) from None
    except UnicodeDecodeError as exc:
        raise _fail(f"{file} is not UTF-8 (byte {exc.start})", 2) from None
    lines = text.splitlines()
    chunks = [(i + 1, lines[i : i + _IMPORT_CHUNK]) for i in range(0, len(lines), _IMPORT_CHUNK)]
    # Every line is checked first (a dry run per chunk), so a bad line anywhere stores nothing.
    errors: list[dict[str, Any]] = []
    valid = 0
    for first, chunk in chunks:
        found = _call("memory.import", {"lines": chunk, "firstLine": first, "dryRun": True})
        errors += found["errors"]
        valid += found["valid"]
    imported = 0
    if not dry_run and valid and (skip_bad or not errors):
        for first, chunk in chunks:
            params = {"lines": chunk, "firstLine": first, "skipBad": True}
            imported += _call("memory.import", params)["imported"]
    if as_json:
        typer.echo(json.dumps({"imported": imported, "valid": valid, "errors": errors,
                               "dryRun": dry_run}))  # fmt: skip
    else:
        for e in errors:
            typer.echo(f"{file}:{e['line']}: {e['message']}", err=True)
        if dry_run:
            typer.echo(f"{valid} good lines, {len(errors)} bad (dry run: nothing stored)")
        elif errors and not skip_bad:
            typer.echo(
                f"nothing imported: {len(errors)} bad line{'s' if len(errors) != 1 else ''} "
                "(fix them, or use --skip-bad to store the good ones)",
                err=True,
            )
        else:
            typer.echo(f"imported {imported} documents from {file}")
    if errors and not skip_bad:
        raise typer.Exit(2)


@memory_app.command("consolidate")
def consolidate(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would merge; change nothing.")
    ] = False,
    agent: Annotated[str | None, typer.Option(help="Only this agent's documents.")] = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="Also apply merges that shrink the text by over half.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Merge near-duplicates (token-set Jaccard of 0.8 or more, same scope and kind) into the
    newest, recording what each supersedes. Pinned documents are never merged away; a merge
    whose kept text is under half the longest dropped one's is skipped unless --yes. Every
    merge can be put back with lemon memory undo."""
    import json

    params: dict[str, Any] = {"dryRun": dry_run, "yes": yes}
    if agent is not None:
        params["agentId"] = agent
    found = _call("memory.consolidate", params)
    if as_json:
        typer.echo(json.dumps(found))
        return
    for merge in found["merges"]:
        typer.echo(f"{merge['keep']} <- {' '.join(merge['drop'])}")
    for held in found.get("skipped", ()):
        typer.echo(
            f"skipped {held['keep']} <- {' '.join(held['drop'])}: keeps {held['keptChars']} of "
            f"{held['droppedChars']} characters (add --yes to merge it)"
        )
    n = sum(len(m["drop"]) for m in found["merges"])
    if dry_run:
        typer.echo(f"would merge {n} documents (dry run: nothing changed)")
    else:
        typer.echo(f"merged {found['merged']} documents")


@memory_app.command("undo")
def undo(
    doc_id: Annotated[
        str | None,
        typer.Argument(help="Put back this document's last version (default: the last change)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Put back what the last forget, scope forget or consolidation merge removed (or one
    document's last version). Exit 2 when there is nothing to undo."""
    import json

    found = _call("memory.undo", {} if doc_id is None else {"docId": doc_id})
    done = found.get("undone")
    if done is None:
        what = f"for {doc_id}" if doc_id is not None else "(no forget or merge kept)"
        if as_json:
            typer.echo(json.dumps(found))
        raise _fail(f"nothing to undo {what}", 2)
    if as_json:
        typer.echo(json.dumps(found))
        return
    for doc in done["restored"]:
        typer.echo(f"restored {_line(doc)}")
    for skipped in done["skipped"]:
        typer.echo(f"kept out {skipped}: the same text is stored again under another id")
    n = len(done["restored"])
    typer.echo(f"undid {done['change']} {done['changeId']}: {n} document{'s' if n != 1 else ''}")


@memory_app.command("history")
def history(
    doc_id: Annotated[str, typer.Argument(help="A document id.")],
    as_json: JsonOpt = False,
) -> None:
    """A document's kept versions (before each forget or merge), newest first: the first is
    what lemon memory undo ID puts back."""
    import json

    found = _call("memory.history", {"docId": doc_id})
    if as_json:
        typer.echo(json.dumps(found))
        return
    if not found["versions"]:
        typer.echo(f"no versions of {doc_id}")
        return
    for v in found["versions"]:
        typer.echo(f"{v['changeId']}  before {v['change']} at {v['atMs']}  {_line(v['document'])}")


@memory_app.command("eval")
def eval_set(
    file: Annotated[Path, typer.Argument(help="A labelled set (docs and queries, JSON).")],
    as_json: JsonOpt = False,
) -> None:
    """Recall quality on a labelled set: recall@5, MRR@10, forbidden documents returned and
    query errors, for lemon_memory's recall and two baselines, in one run (no daemon needed)."""
    import asyncio
    import json

    from lemon_memory.errors import MemoryInputError
    from lemon_memory.recall_eval import load_set, run_eval

    try:
        data = load_set(file)
        reports = asyncio.run(run_eval(data))
    except MemoryInputError as exc:
        typer.echo(f"lemon memory eval: {exc}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps({
            method: {
                "queries": r.queries, "recall_at_5": r.recall_at_5, "mrr_at_10": r.mrr_at_10,
                "forbidden_returned": r.forbidden_returned, "errors": r.errors,
                "by_kind": r.by_kind,
            }
            for method, r in reports.items()
        }))  # fmt: skip
        return
    queries = next(iter(reports.values())).queries
    typer.echo(f"{file.name}: {len(data['docs'])} documents, {queries} queries")
    typer.echo(f"{'method':<68} {'recall@5':>8} {'MRR@10':>7} {'forbidden':>9} {'errors':>6}")
    for method, r in reports.items():
        typer.echo(
            f"{method:<68} {r.recall_at_5:8.2f} {r.mrr_at_10:7.2f} {r.forbidden_returned:9d} "
            f"{r.errors:6d}"
        )
    ours = list(reports.values())[-1]
    typer.echo("lemon_memory by kind (recall@5): " + ", ".join(
        f"{kind} {value:.2f}" for kind, value in ours.by_kind.items()
    ))  # fmt: skip
