"""`dormant actors list`: the actors of one type or of every type, by status."""

from __future__ import annotations

import time
from enum import Enum
from typing import Annotated, Any

import typer

from dormant.cli.common import DEFAULT_URL, JsonOption, TokenOption, UrlOption, client, command, out, print_json
from dormant.cli.render import print_table, summaries_tables
from dormant.http.client import HttpClient
from dormant.http.keys import encode_key
from dormant.ports import LISTED_STATUSES, ActorSummary

app = typer.Typer(help="List actors by type and status.", no_args_is_help=True)

Status = Enum("Status", {s.value: s.value for s in LISTED_STATUSES}, type=str)  # type: ignore[misc]
StatusOption = Annotated[Status | None, typer.Option(
    "--status", "-s", help="Only actors in this status (`running` is listed as sleeping)", show_default=False)]
TypeOption = Annotated[list[str] | None, typer.Option(
    "--type", "-t", help="Only this actor type (repeatable; default: every type the API serves)",
    show_default=False)]


async def served_types(http: HttpClient, *, with_workflow: bool = False) -> list[str]:
    """The actor types the API serves (GET /actors)."""
    response = await http.request("GET", "/actors", idempotent=True)
    types: list[dict[str, Any]] = response.json()
    return [t["name"] for t in types if t.get("workflow") or not with_workflow]


@app.command("list")
@command
async def list_actors(types: TypeOption = None, status: StatusOption = None,
                      limit: Annotated[int, typer.Option(help="Show at most this many (0: all)", min=0)] = 0,
                      url: UrlOption = DEFAULT_URL, token: TokenOption = None,
                      json: JsonOption = False) -> int:
    """List actors with their status and since when (pages are followed). Each key is shown in full, in a form
    the other commands take; --json gives the listing's fields, the key's URL form (`segment`) among them."""
    rows: list[ActorSummary] = []
    async with client(url, token) as http:
        for actor_type in types or await served_types(http):
            async for summary in http.actors(actor_type, status=status.value if status else None):
                rows.append(summary)
                if limit and len(rows) >= limit:
                    break
            if limit and len(rows) >= limit:
                break
    if json:
        print_json([{**row.model_dump(mode="json"), "segment": encode_key(row.key)} for row in rows])
    elif rows:
        print_table(out, summaries_tables(rows, time.time()))
    else:
        out.print("no actors" + (f" in status {status.value}" if status else ""))
    return 0
