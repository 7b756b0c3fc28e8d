"""`dormant actors list` and `dormant actors count`: the actors of one type or of every type, by status, and those
whose search attributes match `--where` conditions (dormant.core.search)."""

from __future__ import annotations

import re
import time
from enum import Enum
from typing import Annotated, Any

import typer

from dormant.cli.common import (
    DEFAULT_URL,
    CliError,
    JsonOption,
    TokenOption,
    UrlOption,
    client,
    command,
    out,
    print_json,
)
from dormant.cli.render import counts_table, print_table, summaries_tables
from dormant.http.client import HttpClient
from dormant.http.keys import encode_key
from dormant.ports import LISTED_STATUSES, ActorSummary

app = typer.Typer(help="List and count actors by type and status, or find them by their search attributes.",
                  no_args_is_help=True)

Status = Enum("Status", {s.value: s.value for s in LISTED_STATUSES}, type=str)  # type: ignore[misc]
StatusOption = Annotated[Status | None, typer.Option(
    "--status", "-s", help="Only actors in this status (`running` is never listed)", show_default=False)]
TypeOption = Annotated[list[str] | None, typer.Option(
    "--type", "-t", help="Only this actor type (repeatable; default: every type the API serves; with --where, every "
                         "type that declares the attributes it names)", show_default=False)]
WhereOption = Annotated[list[str] | None, typer.Option(
    "--where", "-w", help="Only actors whose search attributes satisfy this condition (repeatable: all must hold): "
                          "`name=value`, `name<value`, `<=`, `>`, `>=`, or `name^=prefix` for strings; e.g. "
                          "--where customer=42 --where 'amount>100'", show_default=False)]
_NAMED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


async def served_types(http: HttpClient, *, with_workflow: bool = False) -> list[str]:
    """The actor types the API serves (GET /actors)."""
    response = await http.request("GET", "/actors", idempotent=True)
    types: list[dict[str, Any]] = response.json()
    return [t["name"] for t in types if t.get("workflow") or not with_workflow]


async def searched_types(http: HttpClient, types: list[str] | None, where: list[str] | None) -> list[str]:
    """The types to list: those given, or every served type (with `where`: every one that declares each attribute
    the conditions name; the API checks the rest)."""
    if types:
        return types
    if not where:
        return await served_types(http)
    named = {found.group(0) for found in map(_NAMED.match, where) if found is not None}
    response = await http.request("GET", "/actors", idempotent=True)
    matching = [t["name"] for t in response.json() if t.get("search") and named <= set(t["search"])]
    if not matching:
        raise CliError(f"no actor type the API serves declares the search attribute(s) {', '.join(sorted(named))}"
                       " (`--type` names one; its declaration is `actor(..., search={...})`)")
    return matching


@app.command("list")
@command
async def list_actors(types: TypeOption = None, status: StatusOption = None, where: WhereOption = None,
                      limit: Annotated[int, typer.Option(help="Show at most this many (0: all)", min=0)] = 0,
                      url: UrlOption = DEFAULT_URL, token: TokenOption = None,
                      json: JsonOption = False) -> int:
    """List actors with their status and since when (pages are followed). Each key is shown in full, in a form
    the other commands take; --json gives the listing's fields, the key's URL form (`segment`) among them. With
    --where, only the actors whose search attributes match, with their attributes (ordered by one of them)."""
    rows: list[ActorSummary] = []
    async with client(url, token) as http:
        for actor_type in await searched_types(http, types, where):
            async for summary in http.actors(actor_type, status=status.value if status else None, where=where):
                rows.append(summary)
                if limit and len(rows) >= limit:
                    break
            if limit and len(rows) >= limit:
                break
    if json:
        # (a plain listing's rows have no attributes: left out, so its fields stay the listing's)
        print_json([{**row.model_dump(mode="json", exclude={"attributes"} if row.attributes is None else None),
                     "segment": encode_key(row.key)} for row in rows])
    elif rows:
        print_table(out, summaries_tables(rows, time.time()))
    else:
        out.print("no actors" + (f" in status {status.value}" if status else "") + (" match" if where else ""))
    return 0


@app.command("count")
@command
async def count_actors(types: TypeOption = None, where: WhereOption = None,
                       limit: Annotated[int, typer.Option(help="Count at most this many (per status; with --where, "
                                                               "in all)", min=1, max=10000)] = 1000,
                       url: UrlOption = DEFAULT_URL, token: TokenOption = None, json: JsonOption = False) -> int:
    """How many actors of each type are in each status; with --where, how many of those that match."""
    async with client(url, token) as http:
        found = [await http.counts(actor_type, limit=limit, where=where)
                 for actor_type in await searched_types(http, types, where)]
    if json:
        print_json(found)
    else:
        print_table(out, [counts_table(found)])
    return 0
