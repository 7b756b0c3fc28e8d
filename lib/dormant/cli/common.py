"""What every `dormant` command shares: the API options (--url, --token, --json), the client, the consoles,
actor keys on the command line, and turning errors into one red line and an exit code."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine
from functools import wraps
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape

from dormant.actor import Registry, load_registry
from dormant.errors import InvalidKeyError
from dormant.http.client import HttpClient
from dormant.http.keys import decode_key
from dormant.workflow.errors import DormantError

P = ParamSpec("P")
T = TypeVar("T")
DEFAULT_URL = "http://127.0.0.1:8787"

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

UrlOption = Annotated[str, typer.Option("--url", envvar="DORMANT_URL", show_envvar=True,
                                        help="The API's base URL (`dormant dev`, API Gateway)")]
TokenOption = Annotated[str | None, typer.Option(
    "--token", envvar="DORMANT_INSPECTOR_TOKEN", show_envvar=True,
    help="The inspector bearer token (not needed against `dormant dev`)", show_default=False)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (for scripts) instead of tables")]
ActorArgument = Annotated[str, typer.Argument(help="The actor type, as registered", show_default=False)]
KeyArgument = Annotated[str, typer.Argument(
    help="The actor key as in URLs: parts joined by ',' (`main`, `tenant,42`; docs/http-api.md)",
    show_default=False)]


class CliError(Exception):
    """A failure to report as one line (exit code 2)."""


def key_parts(text: str) -> tuple[str, ...]:
    try:
        return decode_key(text)
    except InvalidKeyError as error:
        raise CliError(f"bad actor key {text!r}: {error}") from None


def client(url: str, token: str | None) -> HttpClient:
    return HttpClient(url, token=token or None)


def load_app(spec: str) -> Registry:
    """The registry `module:attribute` names; modules in the current directory are found, as users expect."""
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        return load_registry(spec)
    except (ImportError, AttributeError, ValueError, TypeError) as error:
        raise CliError(f"cannot load the registry {spec!r}: {type(error).__name__}: {error}") from None


def print_json(value: Any) -> None:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    elif isinstance(value, list):
        value = [v.model_dump(mode="json") if isinstance(v, BaseModel) else v for v in value]
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def parse_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as error:
        raise CliError(f"{what} is not valid JSON: {error}") from None


def command(fn: Callable[P, Coroutine[Any, Any, int | None]]) -> Callable[P, None]:
    """Run an async command; its errors become one line on stderr and exit code 2, its result the exit code."""

    @wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> None:
        code = guarded(lambda: asyncio.run(fn(*args, **kwargs)))
        raise typer.Exit(code or 0)

    return run


def guarded(call: Callable[[], T | Awaitable[T]]) -> Any:
    try:
        return call()
    except (CliError, DormantError, OSError) as error:
        name = "" if isinstance(error, CliError) else f"{type(error).__name__}: "
        err.print(f"[red]error:[/red] {escape(name + str(error))}", markup=True, highlight=False)
        raise typer.Exit(2) from None
    except Exception as error:  # httpx transport errors and the like: one line, no traceback
        err.print(f"[red]error:[/red] {escape(f'{type(error).__name__}: {error}')}", markup=True, highlight=False)
        raise typer.Exit(2) from None
