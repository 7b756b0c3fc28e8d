"""What every `dormant` command shares: the API options (--url, --token, --json), the client, the consoles,
actor keys on the command line (read and shown), and turning errors into one red line and an exit code.

Everything printed passes through dormant.core.safetext: keys, values and errors come from whoever called the API.
The one place that makes sure of it is `SafeConsole` (`out` and `err`): whatever a command hands it, no control
character but the line feed, no bidi control, no line or paragraph separator reaches the terminal; each is
written as its escape (``\\u009b``). A line feed in the data cannot be told from one of the layout there, so
commands show data with `render.shown` (one line: line feeds escaped too) and keys with `key_text`. The --json
outputs (`print_json`) are JSON with those characters written as escapes (``\\u001b``) inside its strings
(`safetext.json_text`): the same values, valid JSON, safe on a terminal."""

from __future__ import annotations

import asyncio
import json as jsonlib
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from enum import StrEnum
from functools import wraps
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from pydantic import BaseModel
from rich.console import (
    Console,
    ConsoleOptions,
    ConsoleRenderable,
    HighlighterType,
    JustifyMethod,
    OverflowMethod,
    RenderHook,
    RenderResult,
)
from rich.highlighter import JSONHighlighter
from rich.markup import escape
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from dormant.actor import Registry, load_registry
from dormant.core.safetext import json_text, printable, printable_lines
from dormant.errors import InvalidKeyError
from dormant.http.client import HttpClient
from dormant.http.keys import ESCAPE, SEPARATOR, decode_key
from dormant.workflow.errors import DormantError

P = ParamSpec("P")
T = TypeVar("T")
DEFAULT_URL = "http://127.0.0.1:8787"


class SafeConsole(Console):
    """A Rich console that writes no character a terminal acts on (C0 controls but the line feed, DEL, C1
    controls, bidi controls, line and paragraph separators: dormant.core.safetext), whatever it is given: every string
    is escaped before Rich lays it out (so tables keep their widths), and every segment of every renderable is
    checked again as it is written (a `Text` made elsewhere). `print_json` likewise. It never turns `:name:` in
    printed text into an emoji."""

    def __init__(self, **options: Any) -> None:
        super().__init__(soft_wrap=True, emoji=False, **options)
        self.push_render_hook(_PrintableSegments())

    def render_str(self, text: str, *, style: str | Style = "", justify: JustifyMethod | None = None,
                   overflow: OverflowMethod | None = None, emoji: bool | None = None, markup: bool | None = None,
                   highlight: bool | None = None, highlighter: HighlighterType | None = None) -> Text:
        """Every string Rich prints or measures (markup, table cells, tree labels) comes through here."""
        return super().render_str(printable_lines(text), style=style, justify=justify, overflow=overflow,
                                  emoji=emoji, markup=markup, highlight=highlight, highlighter=highlighter)

    def print_json(self, json: str | None = None, *, data: Any = None, indent: int | str | None = 2,
                   highlight: bool = True, skip_keys: bool = False, ensure_ascii: bool = False,
                   check_circular: bool = True, allow_nan: bool = True, default: Callable[[Any], Any] | None = None,
                   sort_keys: bool = False) -> None:
        value = jsonlib.loads(json) if json is not None else data
        text = Text(json_text(jsonlib.dumps(value, indent=indent, skipkeys=skip_keys, ensure_ascii=ensure_ascii,
                                            check_circular=check_circular, allow_nan=allow_nan, default=default,
                                            sort_keys=sort_keys)))
        self.print(JSONHighlighter()(text) if highlight else text, soft_wrap=True)


class _Escaped:
    """A renderable whose segments are written with every unsafe character but the line feed escaped."""

    def __init__(self, renderable: ConsoleRenderable) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.renderable, options):
            if segment.control or printable_lines(segment.text) == segment.text:
                yield segment  # (cursor moves and the like are Rich's own)
            else:
                yield Segment(printable_lines(segment.text), segment.style)


class _PrintableSegments(RenderHook):
    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Escaped(renderable) for renderable in renderables]


out = SafeConsole()
err = SafeConsole(stderr=True)

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
    """The parts of a key typed on the command line (the URL form of docs/http-api.md)."""
    try:
        return decode_key(text)
    except InvalidKeyError as error:
        raise CliError(f"bad actor key {text!r}: {error}") from None


def key_text(key: Sequence[str]) -> str:
    """The key as every command takes it back (`key_parts(key_text(k)) == k`), readable where it can be: the
    parts joined by ',', and inside a part each ',', '~', whitespace and invisible character (controls, bidi
    and other format characters) written ~XX as in URLs, a leading '-' too (it would read as an option), and a
    part '.' or '..' as ~2E. So ["sales,emea"] is `sales~2Cemea`, ["sales", "emea"] is `sales,emea`, and
    ["José"] stays `José`."""
    return SEPARATOR.join(_shown_part(part, first=index == 0) for index, part in enumerate(key))


def _shown_part(part: str, *, first: bool) -> str:
    if part in (".", ".."):
        return "~2E" * len(part)
    text = "".join(_key_escape(ch) if ch in (SEPARATOR, ESCAPE) or ch.isspace() or not ch.isprintable() else ch
                   for ch in part)
    return _key_escape("-") + text[1:] if first and text.startswith("-") else text


def _key_escape(char: str) -> str:
    return "".join(f"{ESCAPE}{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))


class ApiAuth(StrEnum):
    """How the CLI authenticates to the API (`dormant --auth`, DORMANT_AUTH): as the deployment's auth mode asks."""

    none = "none"
    sigv4 = "sigv4"
    jwt = "jwt"


_auth: list[ApiAuth] = [ApiAuth.none]  # set once per invocation by the root command (`use_auth`)


def use_auth(auth: ApiAuth) -> None:
    _auth[0] = auth


def client(url: str, token: str | None) -> HttpClient:
    """The API client for a command: with `--auth sigv4` every request is signed with the caller's AWS credentials
    (the deployment's IAM mode), with `--auth jwt` it carries DORMANT_JWT as its bearer token (JWT mode); the
    operator token then travels in its own header (operator routes need both: docs/http-api.md, "Auth")."""
    if _auth[0] is ApiAuth.sigv4:
        from dormant.http.signing import SigV4

        return HttpClient(url, token=token or None, auth=SigV4())
    if _auth[0] is ApiAuth.jwt:
        from dormant.http.signing import BearerToken

        jwt = os.environ.get("DORMANT_JWT", "")
        if not jwt:
            raise CliError("--auth jwt needs the token in DORMANT_JWT")
        return HttpClient(url, token=token or None, auth=BearerToken(jwt))
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
    sys.stdout.write(json_text(jsonlib.dumps(value, indent=2, ensure_ascii=False)) + "\n")


def parse_json(text: str, what: str) -> Any:
    try:
        return jsonlib.loads(text)
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
        err.print(f"[red]error:[/red] {escape(printable(name + str(error)))}", markup=True, highlight=False)
        raise typer.Exit(2) from None
    except Exception as error:  # httpx transport errors and the like: one line, no traceback
        err.print(f"[red]error:[/red] {escape(printable(f'{type(error).__name__}: {error}'))}", markup=True,
                  highlight=False)
        raise typer.Exit(2) from None
