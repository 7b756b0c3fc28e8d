"""Going back to a kept version: `dormant versions` (which ones, or one of them), `fork` and `reset`."""

from __future__ import annotations

import json as jsonlib
import time
from collections.abc import Awaitable
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
    err,
    key_parts,
    key_text,
    out,
    print_json,
)
from dormant.cli.render import print_table, print_whole, relative, show_result, shown, shown_key, styled, timeline, when
from dormant.core.safetext import printable
from dormant.errors import WouldDivergeError
from dormant.models import OperationResult
from dormant.ports import VersionInfo

VersionOption = Annotated[int, typer.Option(help="A kept version (`dormant versions ACTOR KEY` lists them)", min=1,
                                            show_default=False)]
ReasonOption = Annotated[str | None, typer.Option(help="Why (kept with who asked, shown by status)",
                                                  show_default=False)]


def register(app: typer.Typer) -> None:
    app.command("versions")(versions)
    app.command("fork")(fork)
    app.command("reset")(reset)


async def _refusing(call: Awaitable[OperationResult], json: bool) -> int:
    """The result, or a refusal for divergence: its diff printed line by line (exit 2), as `dormant replay` shows it."""
    try:
        return show_result(await call, json)
    except WouldDivergeError as error:
        first, _, diff = str(error).partition("\n")
        err.print(f"[red]error:[/red] WouldDivergeError: {shown(first)}", highlight=False)
        for line in diff.split("\n"):
            err.print(shown(line), highlight=False)
        return 2


@command
async def versions(actor: ActorArgument, key: KeyArgument,
                   at: Annotated[int | None, typer.Option(help="Show this kept version: its state and history",
                                                          min=1, show_default=False)] = None,
                   url: UrlOption = DEFAULT_URL, token: TokenOption = None, json: JsonOption = False) -> int:
    """The versions of the actor that a fork or a reset can start from: the store keeps the last
    `snapshot_every` commits (16 by default), and a version is kept while its snapshot is among them
    (docs/storage.md, "Kept versions"). With --at, that version's state and history."""
    parts = key_parts(key)
    async with client(url, token) as http:
        handle = http.get(actor, parts)
        if at is not None:
            kept = await handle.version(at)
            if json:
                print_json(kept)
                return 0
            out.print(f"[bold]{shown(actor)}[/bold] {shown_key(parts)} at version {kept.version}: "
                      f"{styled(kept.workflow.state.value)}; state:")
            out.print_json(jsonlib.dumps(kept.state))
            print_whole(out, timeline(kept.history, f"history then: {len(kept.history)} entries"))
            return 0
        found = await handle.versions()
    if json:
        print_json(found)
        return 0
    out.print(f"[bold]{shown(actor)}[/bold] {shown_key(parts)}: versions {found[0].version} to {found[-1].version} "
              f"are kept (fork or reset from any of them)")
    print_table(out, _tables(found, time.time()))
    return 0


def _tables(found: list[VersionInfo], now: float) -> list[Table]:
    """Widest first: the moment gives way to how long ago, then to nothing; the changes column wraps, a location
    per line (so a name is cut only if it is wider than the column alone)."""
    tables = []
    for committed in ("moment", "ago", None):
        table = Table()
        for column in ("version", *(("committed",) if committed else ()), "status", "entries", "received", "changed"):
            table.add_column(column, no_wrap=column != "changed", overflow="fold",
                             justify="right" if column in ("version", "entries", "received") else "left")
        for info in found:
            changed = "(its commit is not kept)" if info.changed is None else (
                "\n".join(shown(loc) for loc in info.changed) + (f"\n(+{info.more_changed} more)"
                                                                  if info.more_changed else "") or "-")
            moment = [when(info.committed_at, now) if committed == "moment" else relative(info.committed_at, now)]
            table.add_row(str(info.version), *(moment if committed else []),
                          styled(info.status.value), str(info.entries),
                          "-" if info.received is None else str(len(info.received)), changed)
        tables.append(table)
    return tables


@command
async def fork(actor: ActorArgument, key: KeyArgument, at: VersionOption,
               new_key: Annotated[str, typer.Option("--as", help="The new actor's key, as in URLs",
                                                    show_default=False)],
               reason: ReasonOption = None,
               paused: Annotated[bool, typer.Option("--paused", help="Leave the new actor paused (unpause it to "
                                                                     "run it)")] = False,
               url: UrlOption = DEFAULT_URL, token: TokenOption = None, json: JsonOption = False) -> int:
    """Create a new actor from a kept version of this one (its input, state, history and workflow record) and let
    it run on with the code deployed now. The kept history is first replayed against that code: if it would
    diverge, nothing is created and the diff is shown. The new actor's inbox starts empty."""
    async with client(url, token) as http:
        return await _refusing(http.get(actor, key_parts(key)).fork(at, list(key_parts(new_key)),
                                                                              reason=reason, paused=paused), json)


@command
async def reset(actor: ActorArgument, key: KeyArgument, to: VersionOption, reason: ReasonOption = None,
                yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation")] = False,
                url: UrlOption = DEFAULT_URL, token: TokenOption = None, json: JsonOption = False) -> int:
    """Take the actor back to a kept version, in place: its history, state and workflow record as they were (the
    entries recorded since are deleted), who and why kept on its record; then it runs on. The kept history is
    first replayed against the code deployed now: if it would diverge, nothing changes and the diff is shown.
    Messages it received after that version are not given back (the result lists their ids)."""
    parts = key_parts(key)
    if not yes:
        try:
            confirmed = typer.confirm(f"reset {printable(actor)} {key_text(parts)} to version {to}? What it did "
                                      "since is dropped from its history and state", err=True)
        except typer.Abort:  # no terminal to answer on
            confirmed = False
        if not confirmed:
            raise CliError("not reset (answer y, or pass --yes)")
    async with client(url, token) as http:
        return await _refusing(http.get(actor, parts).reset(to, reason=reason), json)
