"""Operator actions: `dormant resume` (one actor, or every actor of a type and status), `terminate`, `delete`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from dormant.cli.actors import StatusOption, served_types
from dormant.cli.common import (
    DEFAULT_URL,
    CliError,
    JsonOption,
    TokenOption,
    UrlOption,
    client,
    command,
    err,
    key_parts,
    key_text,
    out,
    print_json,
)
from dormant.cli.render import print_table, results_table, shown, shown_key
from dormant.models import OperationResult
from dormant.safetext import printable

OptionalActor = Annotated[str | None, typer.Argument(help="The actor type (with --all: optional)",
                                                     show_default=False)]
OptionalKey = Annotated[str | None, typer.Argument(help="The actor key as in URLs (`main`, `tenant,42`)",
                                                   show_default=False)]


def register(app: typer.Typer) -> None:
    app.command("resume")(resume)
    app.command("terminate")(terminate)
    app.command("delete")(delete)


def _show(result: OperationResult, json: bool) -> int:
    if json:
        print_json(result)
    else:
        out.print(f"[bold]{shown(result.actor)}[/bold] {shown_key(result.key)}: {result.outcome} — "
                  f"{shown(result.message)}")
    return 0


@command
async def resume(actor: OptionalActor = None, key: OptionalKey = None,
                 every: Annotated[bool, typer.Option("--all", help="Resume every actor of the type (or of every "
                                                                   "type) listed in --status")] = False,
                 status: StatusOption = None,
                 page: Annotated[int, typer.Option(help="Actors per request with --all", min=1, max=100)] = 25,
                 url: UrlOption = DEFAULT_URL, token: TokenOption = None, json: JsonOption = False) -> int:
    """Resume an actor: a diverged one once fixed code is deployed (its waiting messages then run), a failed
    one from its failed step (fresh attempts); any other is woken. With --all, every matching actor."""
    if not every:
        if actor is None or key is None or status is not None:
            raise CliError("name an actor and its key, or use --all [--status S] [ACTOR]")
        async with client(url, token) as http:
            return _show(await http.get_or_create(actor, key_parts(key)).resume(), json)
    if key is not None:
        raise CliError("--all takes an actor type at most, not a key")
    results: list[OperationResult] = []
    async with client(url, token) as http:
        types = [actor] if actor else await served_types(http, with_workflow=True)
        listed = {t: [s async for s in http.actors(t, status=status.value if status else None)] for t in types}
        total = sum(len(rows) for rows in listed.values())
        with Progress(TextColumn("resuming"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err, disable=json or total == 0) as progress:
            task = progress.add_task("resume", total=total)
            for actor_type in types:
                cursor: str | None = None
                while listed[actor_type]:
                    done = await http.resume_page(actor_type, status=status.value if status else None, limit=page,
                                                  cursor=cursor)
                    results += done.results
                    progress.advance(task, len(done.results))
                    if done.cursor is None:
                        break
                    cursor = done.cursor
    if json:
        print_json(results)
    elif results:
        print_table(out, [results_table(results)])
    else:
        out.print("no actors to resume")
    return 1 if any(r.outcome in ("refused", "not_found") for r in results) else 0


@command
async def terminate(actor: Annotated[str, typer.Argument(help="The actor type", show_default=False)],
                    key: Annotated[str, typer.Argument(help="The actor key as in URLs", show_default=False)],
                    reason: Annotated[str | None, typer.Option(help="Why (shown by status)", show_default=False)]
                    = None,
                    url: UrlOption = DEFAULT_URL, token: TokenOption = None, json: JsonOption = False) -> int:
    """End the actor's workflow as `terminated` (waiting messages are discarded; later sends answer 409)."""
    async with client(url, token) as http:
        return _show(await http.get_or_create(actor, key_parts(key)).terminate(reason), json)


@command
async def delete(actor: Annotated[str, typer.Argument(help="The actor type", show_default=False)],
                 key: Annotated[str, typer.Argument(help="The actor key as in URLs", show_default=False)],
                 yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation")] = False,
                 url: UrlOption = DEFAULT_URL, token: TokenOption = None, json: JsonOption = False) -> int:
    """Remove every item of the actor (state, history, messages, events). Safe to repeat; a later request
    starts the actor afresh."""
    if not yes:
        try:
            confirmed = typer.confirm(f"delete {printable(actor)} {key_text(key_parts(key))} and everything it "
                                      "stores?", err=True)
        except typer.Abort:  # no terminal to answer on
            confirmed = False
        if not confirmed:
            raise CliError("not deleted (answer y, or pass --yes)")
    async with client(url, token) as http:
        return _show(await http.get_or_create(actor, key_parts(key)).delete(), json)
