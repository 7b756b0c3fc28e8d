"""Talking to one actor: `dormant status`, `state`, `send` and `call`."""

from __future__ import annotations

import json as jsonlib
import time
from typing import Annotated, Any

import typer

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
    key_text,
    out,
    parse_json,
    print_json,
)
from dormant.cli.render import shown, shown_key, status_words
from dormant.core.safetext import printable
from dormant.errors import ActorNotFoundError
from dormant.http.client import HttpClient
from dormant.models import ActorStatus, SendResult


async def read(http: HttpClient, actor: str, key: str, suffix: str) -> Any:
    """GET a read route of an actor; unlike a handle's first request, it never creates the actor."""
    parts = key_parts(key)
    path = http.get(actor, parts).path + suffix
    try:
        return (await http.request("GET", path, idempotent=True)).json()
    except ActorNotFoundError:
        raise CliError(f"{printable(actor)} {key_text(parts)} does not exist (`dormant actors list` shows the keys; a "
                       "send or call creates it)") from None


def register(app: typer.Typer) -> None:
    app.command("status")(status)
    app.command("state")(state)
    app.command("send")(send)
    app.command("call")(call)


@command
async def status(actor: ActorArgument, key: KeyArgument, url: UrlOption = DEFAULT_URL, token: TokenOption = None,
                 json: JsonOption = False) -> int:
    """Say what the actor is doing: which queues it waits on and until when, a retry, or its error."""
    async with client(url, token) as http:
        found = ActorStatus.model_validate(await read(http, actor, key, "/status"))
    if json:
        print_json(found)
    else:
        out.print(f"[bold]{shown(actor)}[/bold] {shown_key(key_parts(key))}: " + status_words(found, time.time()))
    return 0


@command
async def state(actor: ActorArgument, key: KeyArgument, url: UrlOption = DEFAULT_URL, token: TokenOption = None,
                json: JsonOption = False) -> int:
    """Print the actor's state (JSON)."""
    async with client(url, token) as http:
        value = await read(http, actor, key, "/state")
    if json:
        print_json(value)
    else:
        out.print_json(jsonlib.dumps(value))
    return 0


@command
async def send(actor: ActorArgument, key: KeyArgument,
               queue: Annotated[str, typer.Argument(help="The queue's name", show_default=False)],
               body: Annotated[str, typer.Argument(help="The message body (JSON)", show_default=False)],
               wait: Annotated[bool, typer.Option(
                   "--wait", help="Wait until the workflow answers the message, or until it is clear that no answer "
                                  "will come")]
               = False,
               timeout: Annotated[float, typer.Option(help="With --wait: give up after this many seconds", min=0.001)]
               = 30.0,
               message_id: Annotated[str | None, typer.Option(
                   "--id", help="Message id (a re-send with the same id is ignored)", show_default=False)] = None,
               url: UrlOption = DEFAULT_URL, token: TokenOption = None, json: JsonOption = False) -> int:
    """Send a message to one of the actor's queues (creating the actor if needed).

    Exit code 0 when the message is queued (or, with --wait, answered or received without an answer), 1 when
    --wait timed out, 3 when the actor's workflow has stopped or ended, so the message is not processed."""
    payload = parse_json(body, "the body")
    async with client(url, token) as http:
        result = await http.get_or_create(actor, key_parts(key)).send(queue, payload, wait=wait, timeout=timeout,
                                                                       message_id=message_id)
    if json:
        print_json(result)
    elif result.status == "completed":
        out.print(f"completed (message {shown(result.id)}); response:")
        out.print_json(jsonlib.dumps(result.response))
    else:
        out.print(send_outcome(result, timeout))
    if result.workflow is not None:
        return 3
    return 1 if result.status == "timedOut" else 0


def send_outcome(result: SendResult, timeout: float) -> str:
    """One line saying what became of a message that got no response."""
    line = f"{result.status} (message {shown(result.id)})"
    stopped = result.workflow.value if result.workflow is not None else None
    if stopped in ("completed", "terminated"):
        if result.status == "queued":
            return (f"{line}: the actor's workflow has ended ({stopped}); the message was not processed and never "
                    "will be")
        return f"{line}: the workflow took the message, then ended ({stopped}) without answering it"
    if stopped == "paused":
        if result.status == "queued":
            return (f"{line}: the actor is paused; the message waits in its inbox and runs once an operator "
                    "unpauses it (dormant unpause)")
        return f"{line}: the workflow took the message, then was paused before answering it"
    if stopped is not None:
        if result.status == "queued":
            return (f"{line}: the actor's workflow is {stopped}; the message waits in its inbox and runs after an "
                    "operator resumes the actor (dormant resume)")
        return f"{line}: the workflow took the message, then stopped ({stopped}) before answering it"
    if result.status == "received":
        return (f"{line}: the workflow took it without answering (a receive without completable=True, or its loop "
                "iteration ended before complete()): no response will come")
    if result.status == "timedOut":
        return (f"{line}: no answer within {timeout:g} s; the message is stored and may still be answered "
                f"(send again with --id {shown(result.id)} --wait to keep waiting)")
    return line


@command
async def call(actor: ActorArgument, key: KeyArgument,
               action: Annotated[str, typer.Argument(help="The action's name", show_default=False)],
               args: Annotated[list[str] | None, typer.Argument(
                   help="Its arguments, each JSON (a word that is not JSON is a string)", show_default=False)] = None,
               url: UrlOption = DEFAULT_URL, token: TokenOption = None, json: JsonOption = False) -> int:
    """Call one of the actor's actions and print its result."""
    values: list[Any] = []
    for arg in args or []:
        try:
            values.append(jsonlib.loads(arg))
        except ValueError:
            values.append(arg)
    async with client(url, token) as http:
        result = await http.get_or_create(actor, key_parts(key)).call(action, *values)
    if json:
        print_json({"result": result})
    else:
        out.print_json(jsonlib.dumps(result))
    return 0
