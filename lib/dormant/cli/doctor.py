"""`dormant doctor`: the values actors keep in S3 checked against the bucket, and repaired where possible
(docs/operations.md, "Lost values")."""

from __future__ import annotations

from typing import Annotated

import typer

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
from dormant.cli.render import shown, shown_key, styled
from dormant.models import ValueCheck

SHOWN_PROBLEMS = 20  # per actor, in the table view


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)


@command
async def doctor(actor: ActorArgument,
                 key: Annotated[str | None, typer.Argument(
                     help="One actor's key, as in URLs (without it: every actor of the type)", show_default=False)
                 ] = None,
                 repair: Annotated[bool, typer.Option(
                     "--repair", help="Recover missing objects from others with the same content; take messages "
                                      "whose body is lost out of the inbox; mark an actor whose live values are "
                                      "lost failed")] = False,
                 url: UrlOption = DEFAULT_URL, token: TokenOption = None, json: JsonOption = False) -> int:
    """Check that every value the actor(s) keep in S3 is there: each reference of each kept version and pending
    message is looked up in the bucket (it reads the raw items, so it works on an actor that no longer loads).
    Exit 0: all intact (or repaired); 1: something is missing or lost."""
    async with client(url, token) as http:
        if key is not None:
            reports = [await http.get(actor, key_parts(key)).check_values(repair=repair)]
        else:
            reports = [await http.get(actor, summary.key).check_values(repair=repair)
                       async for summary in http.actors(actor)]
    if json:
        print_json(reports)
    else:
        for report in reports:
            if key is not None or report.outcome != "intact":
                _show(report)
        if key is None:
            counts = {outcome: sum(1 for r in reports if r.outcome == outcome)
                      for outcome in ("intact", "repaired", "lost")}
            out.print(f"{len(reports)} actor(s) of {shown(actor)} checked: "
                      + ", ".join(f"{count} {styled(outcome)}" for outcome, count in counts.items()))
    return 1 if any(report.outcome == "lost" for report in reports) else 0


def _show(report: ValueCheck) -> None:
    out.print(f"[bold]{shown(report.actor)}[/bold] {shown_key(report.key)}: {styled(report.outcome)} "
              f"({report.references} reference(s)): {shown(report.message)}")
    for problem in report.problems[:SHOWN_PROBLEMS]:
        out.print(f"  {styled(problem.outcome)} {shown(problem.where)}: {shown(problem.object)}")
    if len(report.problems) > SHOWN_PROBLEMS:
        out.print(f"  ... and {len(report.problems) - SHOWN_PROBLEMS} more (--json lists them all)")
    if report.dropped_messages:
        dropped = shown(", ".join(report.dropped_messages))
        out.print(f"  messages taken out of the inbox (their body is lost): {dropped}")
    if report.problems and report.intact_versions:
        out.print(f"  kept versions with all their values: {', '.join(map(str, report.intact_versions))}")
