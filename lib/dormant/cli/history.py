"""`dormant history show` (a terminal timeline) and `dormant history export` (JSON lines, for replay)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from dormant.cli.actor import read
from dormant.cli.common import (
    DEFAULT_URL,
    ActorArgument,
    JsonOption,
    TokenOption,
    UrlOption,
    client,
    command,
    key_parts,
    out,
    print_json,
)
from dormant.cli.render import timeline
from dormant.http.keys import encode_key
from dormant.workflow.history import HistoryEntry

app = typer.Typer(help="Actor histories: a timeline, or an export for `dormant replay`.", no_args_is_help=True)
KeyPartsArgument = Annotated[list[str], typer.Argument(
    help="The actor key: one argument in URL form (`tenant,42`) or its parts as separate arguments",
    show_default=False)]


def _key(parts: list[str]) -> tuple[str, ...]:
    return key_parts(parts[0]) if len(parts) == 1 else tuple(parts)


@app.command("show")
@command
async def show(actor: ActorArgument, key: KeyPartsArgument, url: UrlOption = DEFAULT_URL, token: TokenOption = None,
               json: JsonOption = False) -> int:
    """The actor's history as a timeline: steps with results and durations, loop iterations, sleeps,
    messages received, errors."""
    parts = _key(key)
    async with client(url, token) as http:
        entries = [HistoryEntry.model_validate(e) for e in await read(http, actor, encode_key(parts), "/history")]
    if json:
        print_json(entries)
    else:
        out.print(timeline(entries, f"[bold]{escape(actor)}[/bold] {escape(','.join(parts))}: "
                                    f"{len(entries)} entries"))
    return 0


@app.command("export")
@command
async def export(actor: ActorArgument, key: KeyPartsArgument, url: UrlOption = DEFAULT_URL,
                 token: TokenOption = None,
                 out_file: Annotated[Path | None, typer.Option("--out", help="File to write (default: stdout)",
                                                               show_default=False)] = None) -> int:
    """Write the actor's history as JSON lines (replay it offline with `dormant replay FILE --app ...`)."""
    parts = _key(key)
    async with client(url, token) as http:
        path = http.get_or_create(actor, parts).path + "/inspector/export"
        text = (await http.request("GET", path, idempotent=True)).text
    if out_file is None:
        sys.stdout.write(text)
    else:
        out_file.write_text(text, encoding="utf-8")
    return 0
