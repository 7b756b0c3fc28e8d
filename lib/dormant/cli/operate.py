"""Operator actions: `dormant resume`, `pause` and `unpause` (one actor, or every actor of a type and status, with a
progress bar), `terminate`, `delete`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from dormant.cli.actors import StatusOption, TypeOption, served_types
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
from dormant.cli.render import print_table, results_table, show_result
from dormant.core.safetext import printable
from dormant.http.client import HttpClient
from dormant.models import OperationPage, OperationResult
from dormant.ports import FINISHED

OptionalActor = Annotated[str | None, typer.Argument(help="The actor type (with --all: optional)",
                                                     show_default=False)]
OptionalKey = Annotated[str | None, typer.Argument(help="The actor key as in URLs (`main`, `tenant,42`)",
                                                   show_default=False)]
ReasonOption = Annotated[str | None, typer.Option(help="Why (kept with who asked, shown by status)",
                                                  show_default=False)]
PageOption = Annotated[int, typer.Option(help="Actors per request with --all", min=1, max=100)]
# One page of a bulk action over HTTP: (client, actor type, cursor) -> its results and the next cursor.
PageCall = Callable[[HttpClient, str, str | None], Awaitable[OperationPage]]


def register(app: typer.Typer) -> None:
    app.command("resume")(resume)
    app.command("pause")(pause)
    app.command("unpause")(unpause)
    app.command("terminate")(terminate)
    app.command("delete")(delete)


@command
async def resume(actor: OptionalActor = None, key: OptionalKey = None,
                 every: Annotated[bool, typer.Option("--all", help="Resume every actor of the type (or of every "
                                                                   "type) listed in --status")] = False,
                 status: StatusOption = None, page: PageOption = 25,
                 url: UrlOption = DEFAULT_URL, token: TokenOption = None, json: JsonOption = False) -> int:
    """Resume an actor: a diverged one once fixed code is deployed (its waiting messages then run), a failed
    one from its failed step (fresh attempts); any other is woken. With --all, every matching actor."""
    if not every:
        if actor is None or key is None or status is not None:
            raise CliError("name an actor and its key, or use --all [--status S] [ACTOR]")
        async with client(url, token) as http:
            return show_result(await http.get(actor, key_parts(key)).resume(), json)
    listed = status.value if status else None
    return await _bulk("resume", actor, None, key, listed, url, token, json, with_workflow=True,
                       page=lambda http, t, cursor: http.resume_page(t, status=listed, limit=page, cursor=cursor))


@command
async def pause(actor: OptionalActor = None, key: OptionalKey = None, reason: ReasonOption = None,
                every: Annotated[bool, typer.Option("--all", help="Pause every live actor of the type (or of "
                                                                  "every type), or those in --status")] = False,
                types: TypeOption = None, status: StatusOption = None, page: PageOption = 25,
                url: UrlOption = DEFAULT_URL, token: TokenOption = None, json: JsonOption = False) -> int:
    """Pause an actor: no wake-up runs it until `dormant unpause`. Messages sent to it are kept, its timers keep
    their time (one that comes due meanwhile fires at the unpause), actions are refused; who paused it and why is
    shown by `dormant status`. With --all, every matching live actor (completed and terminated ones are left out
    unless --status names them)."""
    if not every:
        if actor is None or key is None or status is not None or types:
            raise CliError("name an actor and its key, or use --all [--type T] [--status S]")
        async with client(url, token) as http:
            return show_result(await http.get(actor, key_parts(key)).pause(reason), json)
    listed = status.value if status else None
    return await _bulk("pause", actor, types, key, listed, url, token, json, page=lambda http, t, cursor:
                       http.pause_page(t, status=listed, limit=page, cursor=cursor, reason=reason))


@command
async def unpause(actor: OptionalActor = None, key: OptionalKey = None,
                  every: Annotated[bool, typer.Option("--all", help="Unpause every paused actor of the type (or "
                                                                    "of every type)")] = False,
                  types: TypeOption = None, page: PageOption = 25,
                  url: UrlOption = DEFAULT_URL, token: TokenOption = None, json: JsonOption = False) -> int:
    """Unpause an actor: it goes back to where it was paused and is woken now; the messages that waited run
    (each once), timers that came due meanwhile fire. With --all, every paused actor."""
    if not every:
        if actor is None or key is None or types:
            raise CliError("name an actor and its key, or use --all [--type T]")
        async with client(url, token) as http:
            return show_result(await http.get(actor, key_parts(key)).unpause(), json)
    return await _bulk("unpause", actor, types, key, "paused", url, token, json,
                       page=lambda http, t, cursor: http.unpause_page(t, limit=page, cursor=cursor))


async def _bulk(action: str, actor: str | None, types: list[str] | None, key: str | None, status: str | None,
                url: str, token: str | None, json: bool, *, page: PageCall, with_workflow: bool = False) -> int:
    """Run a bulk action page by page over every listed actor of the types, with a progress bar on stderr (the
    total is what the listing holds when it starts), then a table of outcomes; exit 1 if one was refused."""
    if key is not None:
        raise CliError("--all takes an actor type at most, not a key")
    if actor is not None and types and set(types) != {actor}:
        raise CliError("give the actor type once: as an argument or with --type")
    results: list[OperationResult] = []
    verb = {"resume": "resuming", "pause": "pausing", "unpause": "unpausing"}[action]
    async with client(url, token) as http:
        chosen = [actor] if actor else list(types or []) or await served_types(http, with_workflow=with_workflow)
        listed = {t: [s async for s in http.actors(t, status=status)] for t in chosen}
        # (a pause without --status leaves the finished ones out: they are not counted either)
        total = sum(1 for rows in listed.values() for row in rows
                    if not (action == "pause" and status is None and row.status in FINISHED))
        with Progress(TextColumn(verb), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err, disable=json or total == 0) as progress:
            task = progress.add_task(verb, total=total)
            for actor_type in chosen:
                cursor: str | None = None
                while listed[actor_type]:
                    done = await page(http, actor_type, cursor)
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
        out.print(f"no actors to {action}")
    return 1 if any(r.outcome in ("refused", "not_found") for r in results) else 0


@command
async def terminate(actor: Annotated[str, typer.Argument(help="The actor type", show_default=False)],
                    key: Annotated[str, typer.Argument(help="The actor key as in URLs", show_default=False)],
                    reason: Annotated[str | None, typer.Option(help="Why (shown by status)", show_default=False)]
                    = None,
                    url: UrlOption = DEFAULT_URL, token: TokenOption = None, json: JsonOption = False) -> int:
    """End the actor's workflow as `terminated` (waiting messages are discarded; later sends answer 409)."""
    async with client(url, token) as http:
        return show_result(await http.get(actor, key_parts(key)).terminate(reason), json)


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
        return show_result(await http.get(actor, key_parts(key)).delete(), json)
