"""What an actor waits for: `dormant inbox` (its pending messages) and `dormant fire-timer` (its next timer, now;
`dormant dev` only)."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.table import Table

from dormant.cli.common import (
    DEFAULT_URL,
    ActorArgument,
    CliError,
    JsonOption,
    KeyArgument,
    TokenOption,
    UrlOption,
    client,
    command,
    key_parts,
    out,
    print_json,
)
from dormant.cli.render import shown, shown_key, when
from dormant.http.client import HttpError
from dormant.models import Inbox


def register(app: typer.Typer) -> None:
    app.command("inbox")(inbox)
    app.command("fire-timer")(fire_timer)


@command
async def inbox(actor: ActorArgument, key: KeyArgument,
                limit: Annotated[int, typer.Option(help="Messages to show at most", min=1, max=1000)] = 100,
                url: UrlOption = DEFAULT_URL, token: TokenOption = None, json: JsonOption = False) -> int:
    """The messages waiting in the actor's inbox, in send order: queue messages its workflow has not taken yet
    (a failed or diverged actor keeps them until it is resumed) and actions scheduled for later."""
    async with client(url, token) as http:
        found = await http.get(actor, key_parts(key)).inbox(limit=limit)
    if json:
        print_json(found)
    else:
        out.print(_table(found, time.time()) if found.messages else "no messages waiting")
        if found.total > len(found.messages):
            out.print(f"(the first {len(found.messages)} of {found.total}: --limit shows more)")
    return 0


def _table(found: Inbox, now: float) -> Table:
    table = Table()
    for column in ("id", "queue", "sent", "due", "from", "bytes", "body"):
        table.add_column(column, overflow="fold", no_wrap=column in ("queue", "bytes"))
    for message in found.messages:
        queue = message.queue if message.kind == "queue" else f"{message.queue} (action)"
        due = when(message.not_before, now) if message.not_before is not None else "-"
        body = message.preview + ("…" if message.truncated else "")
        table.add_row(shown(message.id), shown(queue), when(message.created_at, now), due,
                      shown(message.sender or "-"), str(message.bytes), shown(body))
    return table


@command
async def fire_timer(actor: ActorArgument, key: KeyArgument, url: UrlOption = DEFAULT_URL, token: TokenOption = None,
                     json: JsonOption = False) -> int:
    """Fire the actor's next timer now, against `dormant dev`: its earliest sleep deadline, queue-wait timeout,
    retry or scheduled action is due at once, and the actor wakes (see a 24-hour timeout fire without editing
    the code). The history records the fired time, so replays agree."""
    async with client(url, token) as http:
        try:
            result = await http.get(actor, key_parts(key)).fire_timer()
        except HttpError as error:
            if error.status == 404 and error.code == "not_found":
                raise CliError(f"{url} does not fire timers: only `dormant dev` serves fire-timer") from None
            raise
    if json:
        print_json(result)
    else:
        out.print(f"[bold]{shown(result.actor)}[/bold] {shown_key(result.key)}: {shown(result.message)}")
    return 0
