"""``lemon memory``: the running daemon's memory, as its operator sees it (``status``,
``list``, ``search QUERY``, ``forget DOC_ID``), through lemon_memory's ``memory.*`` methods;
and ``eval FILE``, which needs no daemon: a labelled set on a throwaway store, its recall@5 and
MRR@10 next to two baselines measured in the same run.

Every scope is visible here (search and forget need an admin token: this home's local token
is one); the text is redacted again by the daemon on the way out. A model never gets this view:
its recall is bounded to its run's own scopes.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from lemon_cli._wire_call import daemon_call

__all__ = ["memory_app"]

memory_app = typer.Typer(
    help="The running daemon's memory (status, list, search, forget) and recall quality (eval).",
    no_args_is_help=True,
)
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the daemon's answer as JSON.")]
LimitOpt = Annotated[int, typer.Option(min=1, max=500, help="At most this many documents.")]


def _call(method: str, params: dict[str, Any]) -> Any:
    return daemon_call("lemon memory", method, params, feature="memory")


def _line(doc: dict[str, Any], score: float | None = None) -> str:
    text = " ".join(str(doc.get("title") or doc.get("body", "")).split())
    if len(text) > 80:
        text = text[:77] + "..."
    where = f"{doc.get('scope')}:{doc.get('scope_key')}"
    ranked = "" if score is None else f" ({score:.2f})"
    return f"{doc.get('doc_id')}  {doc.get('kind')}  {where}{ranked}  {text}"


@memory_app.command("status")
def status(as_json: JsonOpt = False) -> None:
    """Whether memory is available, and its counts."""
    found = _call("memory.status", {})
    if as_json:
        typer.echo(json.dumps(found))
        return
    if not found.get("available"):
        typer.echo(f"memory is unavailable{': ' + found['reason'] if found.get('reason') else ''}")
        return
    for key, value in sorted(found.items()):
        if key != "available":
            typer.echo(f"{key}: {value}")


@memory_app.command("list")
def list_docs(
    agent: Annotated[str | None, typer.Option(help="Only this agent's documents.")] = None,
    limit: LimitOpt = 50,
    as_json: JsonOpt = False,
) -> None:
    """The newest documents (every scope)."""
    params: dict[str, Any] = {"limit": limit}
    if agent is not None:
        params["agentId"] = agent
    found = _call("memory.list", params)
    if as_json:
        typer.echo(json.dumps(found))
        return
    docs = found.get("documents", [])
    for doc in docs:
        typer.echo(_line(doc))
    if not docs:
        typer.echo("no documents")


@memory_app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="The words to search for.")],
    limit: Annotated[int, typer.Option(min=1, max=10, help="At most this many hits.")] = 10,
    as_json: JsonOpt = False,
) -> None:
    """Search every scope (an admin's view)."""
    found = _call("memory.search", {"query": query, "limit": limit})
    if as_json:
        typer.echo(json.dumps(found))
        return
    hits = found.get("hits", [])
    for hit in hits:
        typer.echo(_line(hit.get("document", {}), hit.get("score")))
    if not hits:
        typer.echo("no words to search for" if found.get("emptyQuery") else "nothing found")


@memory_app.command("forget")
def forget(
    doc_id: Annotated[str, typer.Argument(help="A document id (see: lemon memory list).")],
) -> None:
    """Forget one document."""
    found = _call("memory.forget", {"docId": doc_id})
    if not found.get("forgotten"):
        typer.echo(f"lemon memory: no document {doc_id}", err=True)
        raise typer.Exit(1)
    typer.echo(f"forgot {doc_id}")


@memory_app.command("eval")
def eval_set(
    file: Annotated[Path, typer.Argument(help="A labelled set (docs and queries, JSON).")],
    as_json: JsonOpt = False,
) -> None:
    """Recall quality on a labelled set: recall@5, MRR@10, forbidden documents returned and
    query errors, for lemon_memory's recall and two baselines, in one run (no daemon needed)."""
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
