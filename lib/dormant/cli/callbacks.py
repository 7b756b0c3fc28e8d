"""`dormant callback complete|fail|heartbeat|status TOKEN`: what an outside system does with a callback's token.

The token is the authorization (no --token, no identity): these commands need only the API's URL. A token on a
command line stays in the shell's history: pass `-` to read it from stdin instead (`... complete - < token.txt`).
"""

from __future__ import annotations

import sys
import time
from typing import Annotated

import typer

from dormant.cli.common import DEFAULT_URL, CliError, JsonOption, UrlOption, command, out, parse_json, print_json
from dormant.cli.render import shown, when
from dormant.http.client import HttpClient
from dormant.models import CallbackStatus

app = typer.Typer(name="callback", no_args_is_help=True,
                  help="Complete, fail or heartbeat a workflow's callback (`ctx.callback`) by its token.")
TokenArgument = Annotated[str, typer.Argument(help="The callback's token (`cb.token`), or - to read it from stdin",
                                              show_default=False)]


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="callback")


def _token(given: str) -> str:
    if given != "-":
        return given
    text = sys.stdin.readline().strip()
    if not text:
        raise CliError("no token on stdin")
    return text


def _show(status: CallbackStatus, json: bool) -> int:
    if json:
        print_json(status)
        return 0
    now = time.time()
    parts = [f"callback [bold]{shown(status.callback)}[/bold]: {status.status}"]
    if status.deadline is not None:
        parts.append(f"times out {when(status.deadline, now)}")
    if status.heartbeat_deadline is not None and status.status in ("open", "accepted"):
        parts.append(f"next heartbeat due {when(status.heartbeat_deadline, now)}")
    out.print(", ".join(parts))
    return 0


@app.command("complete")
@command
async def complete(token: TokenArgument,
                   result: Annotated[str, typer.Option("--result", help="The result as JSON (checked against the "
                                                                        "callback's declared model)")] = "null",
                   url: UrlOption = DEFAULT_URL, json: JsonOption = False) -> int:
    """Complete the callback with a result: the workflow's `cb.result()` returns it."""
    value = parse_json(result, "--result")
    async with HttpClient(url) as http:
        return _show(await http.complete_callback(_token(token), value), json)


@app.command("fail")
@command
async def fail(token: TokenArgument,
               error_type: Annotated[str, typer.Option("--type", help="What failed, e.g. PaymentDeclined")],
               message: Annotated[str, typer.Option("--message", help="Why, for people")] = "",
               url: UrlOption = DEFAULT_URL, json: JsonOption = False) -> int:
    """Fail the callback: the workflow's `cb.result()` raises CallbackFailedError with this type and message."""
    async with HttpClient(url) as http:
        return _show(await http.fail_callback(_token(token), error_type, message), json)


@app.command("heartbeat")
@command
async def heartbeat(token: TokenArgument, url: UrlOption = DEFAULT_URL, json: JsonOption = False) -> int:
    """Say the outside system is still at it: the callback's heartbeat deadline moves (nothing is woken)."""
    async with HttpClient(url) as http:
        return _show(await http.heartbeat_callback(_token(token)), json)


@app.command("status")
@command
async def status(token: TokenArgument, url: UrlOption = DEFAULT_URL, json: JsonOption = False) -> int:
    """Where the callback stands: open, completed, failed, timed_out, cancelled or expired."""
    async with HttpClient(url) as http:
        return _show(await http.callback_status(_token(token)), json)
