"""`dormant history show` (a terminal timeline) and `dormant history export` (JSON lines, for replay)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from dormant.cli.actor import read
from dormant.cli.common import (
    DEFAULT_URL,
    ActorArgument,
    CliError,
    JsonOption,
    TokenOption,
    UrlOption,
    client,
    command,
    err,
    key_parts,
    out,
    print_json,
)
from dormant.cli.render import note_words, print_whole, shown, shown_key, timeline
from dormant.core.safetext import json_text
from dormant.http.keys import encode_key
from dormant.models import ActorStatus
from dormant.runtime.offline import in_finished_iterations, parse_export
from dormant.workflow.errors import DormantError
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
    async with client(url, token) as http:  # the status with its history: one operator read (the token allows it)
        payload = await read(http, actor, encode_key(parts), "/status?history=true")
    entries = [HistoryEntry.model_validate(e) for e in payload.pop("history")]
    if json:
        print_json(entries)
        return 0
    status = ActorStatus.model_validate(payload)
    title = f"[bold]{shown(actor)}[/bold] {shown_key(parts)}: {len(entries)} entries"
    notes = [note_words(note, time.time()) for note in (status.rewritten, status.paused) if note is not None]
    print_whole(out, timeline(entries, "\n".join([title, *notes])))  # a reset or fork, a pause: who, why, when
    return 0


@app.command("export")
@command
async def export(actor: ActorArgument, key: KeyPartsArgument, url: UrlOption = DEFAULT_URL,
                 token: TokenOption = None,
                 out_file: Annotated[Path | None, typer.Option("--out", help="File to write (default: stdout)",
                                                               show_default=False)] = None) -> int:
    """Write the actor's history as JSON lines (replay it offline with `dormant replay FILE --app ...`). With
    --out, says what it wrote; on stdout, only the export."""
    parts = _key(key)
    async with client(url, token) as http:
        path = http.get(actor, parts).path + "/inspector/export"
        text = (await http.request("GET", path, idempotent=True)).text
    if out_file is None:
        sys.stdout.write(json_text(text))  # the same JSON lines, nothing a terminal acts on
        return 0
    out_file.write_text(text, encoding="utf-8")
    try:
        history = parse_export(text.split("\n")).history
    except (DormantError, ValueError, KeyError) as error:  # kept as received: the file may still help whoever reads it
        raise CliError(f"wrote {out_file}, but it is not a history export `dormant replay` reads: {error}") from None
    kept = in_finished_iterations(history)  # (what `dormant replay` of the file does not walk: it says so too)
    entries = f"{len(history)} entries" + (f", {kept} of them in finished loop iterations" if kept else "")
    err.print(f"wrote the history of [bold]{shown(actor)}[/bold] {shown_key(parts)} ({entries}) to "
              f"{shown(str(out_file))}; check it against new code with `dormant replay {shown(str(out_file))} "
              "--app module:registry`", highlight=False)
    return 0
