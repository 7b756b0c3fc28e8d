"""`dormant replay`: check the code here against actor histories, offline (nothing runs, nothing changes).

- `dormant replay FILE --app module:registry`: one exported history (`dormant history export`).
- `dormant replay --all --url URL --app module:registry`: every live actor of a running API is exported and
  replayed against the code; a summary per actor type, each divergence's diff, exit 1 on any divergence (run it
  in CI before a deploy, as Temporal users run replay_workflows over their list of workflows).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dormant.actor import Registry
from dormant.cli.actors import TypeOption, served_types
from dormant.cli.common import (
    DEFAULT_URL,
    CliError,
    JsonOption,
    TokenOption,
    UrlOption,
    client,
    command,
    err,
    load_app,
    out,
    print_json,
)
from dormant.cli.render import shown, shown_key
from dormant.core.safetext import printable_lines
from dormant.errors import UnknownActorError
from dormant.http.client import HttpClient
from dormant.ports import FINISHED, ActorSummary
from dormant.runtime.offline import ReplayReport, count_words, in_finished_iterations, parse_export, replay_snapshot

CONCURRENCY = 8


@dataclass
class TypeTally:
    ok: int = 0
    diverged: list[tuple[ActorSummary, str]] = field(default_factory=list)
    missing: bool = False


def register(app: typer.Typer) -> None:
    app.command("replay")(replay)


@command
async def replay(file: Annotated[Path | None, typer.Argument(help="A history export (JSON lines)",
                                                             show_default=False)] = None,
                 app: Annotated[str, typer.Option("--app", envvar="DORMANT_APP", show_envvar=True,
                                                  help="The new code's registry, module:attribute",
                                                  show_default=False)] = "",
                 every: Annotated[bool, typer.Option("--all", help="Replay every live actor of the API at --url")]
                 = False,
                 types: TypeOption = None,
                 include_finished: Annotated[bool, typer.Option(
                     help="With --all: also completed and terminated actors (they never run again)")] = False,
                 url: UrlOption = DEFAULT_URL, token: TokenOption = None, json: JsonOption = False) -> int:
    """Replay histories against the code in --app, offline: exit 1 if any diverges."""
    if not app:
        raise CliError("name the code to check with --app module:attribute (or DORMANT_APP)")
    registry = load_app(app)
    if not every:
        if file is None:
            raise CliError("give a history export FILE, or --all --url URL")
        snapshot = parse_export(file.read_text(encoding="utf-8").splitlines())
        report = await replay_snapshot(registry, snapshot)
        if json:
            print_json({"actor": report.ref.name, "key": list(report.ref.key), "outcome": report.outcome,
                        "replayed": report.replayed, "recorded": len(snapshot.history),
                        "in_finished_iterations": in_finished_iterations(snapshot.history),
                        "detail": report.detail})
        else:
            out.print(f"{shown(report.ref.name)} {shown_key(report.ref.key)}: {report.outcome} "
                      f"({count_words(report.replayed, snapshot.history)})", highlight=False)
            out.print(escape(printable_lines(report.detail)), highlight=False)
        return 0 if report.outcome == "ok" else 1
    if file is not None:
        raise CliError("--all replays what the API at --url holds: give no FILE")
    async with client(url, token) as http:
        tallies = await _replay_all(http, registry, types, include_finished, quiet=json)
    return _summarise(tallies, json)


async def _replay_all(http: HttpClient, registry: Registry, types: list[str] | None, include_finished: bool,
                      *, quiet: bool) -> dict[str, TypeTally]:
    chosen = types or await served_types(http, with_workflow=True)
    live: list[ActorSummary] = []
    tallies = {t: TypeTally() for t in chosen}
    for actor_type in chosen:
        async for summary in http.actors(actor_type):
            if include_finished or summary.status not in FINISHED:
                live.append(summary)
    gate = asyncio.Semaphore(CONCURRENCY)
    with Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                  disable=quiet or not live) as progress:
        task = progress.add_task("replay", total=len(live))

        async def one(summary: ActorSummary) -> None:
            async with gate:
                report = await _replay_one(http, registry, summary)
            tally = tallies[summary.name]
            if report is None:
                tally.missing = True
                tally.diverged.append((summary, f"actor type {summary.name!r} is not in the new code"))
            elif report.outcome == "ok":
                tally.ok += 1
            else:
                tally.diverged.append((summary, report.detail))
            progress.advance(task)

        await asyncio.gather(*(one(summary) for summary in live))
    return tallies


async def _replay_one(http: HttpClient, registry: Registry, summary: ActorSummary) -> ReplayReport | None:
    path = http.get(summary.name, summary.key).path + "/inspector/export"
    text = (await http.request("GET", path, idempotent=True)).text
    try:
        registry.get(summary.name)
    except UnknownActorError:
        return None
    return await replay_snapshot(registry, parse_export(text.splitlines()))


def _summarise(tallies: dict[str, TypeTally], json: bool) -> int:
    diverged = sum(len(t.diverged) for t in tallies.values())
    if json:
        print_json({"ok": diverged == 0, "types": {
            name: {"ok": t.ok, "diverged": len(t.diverged), "divergences": [
                {"key": list(s.key), "status": s.status.value, "detail": detail} for s, detail in t.diverged]}
            for name, t in tallies.items()}})
        return 1 if diverged else 0
    table = Table(title="replay against the new code", title_justify="left")
    for column in ("actor type", "replayed", "ok", "diverged"):
        table.add_column(column, justify="left" if column == "actor type" else "right")
    for name, t in tallies.items():
        count = t.ok + len(t.diverged)
        table.add_row(shown(name), str(count), f"[green]{t.ok}[/green]",
                      f"[red]{len(t.diverged)}[/red]" if t.diverged else "0")
    out.print(table)
    for name, t in tallies.items():
        for summary, detail in t.diverged:
            out.print(f"\n[red]diverged[/red] [bold]{shown(name)}[/bold] {shown_key(summary.key)} "
                      f"({summary.status.value}):", highlight=False)
            out.print(escape(printable_lines(detail)), highlight=False)
    if diverged:
        out.print(f"\n[red]{diverged} actor(s) diverge from the new code: do not deploy it as it is[/red]")
        return 1
    out.print("\n[green]every live actor replays cleanly against the new code[/green]")
    return 0
