"""The `dormant` command: one Typer app; each command group lives in its own module."""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated

import typer

from dormant.cli import actor, actors, callbacks, dev, doctor, history, new, operate, package, replay, rewind, waiting
from dormant.cli.common import ApiAuth, use_auth

app = typer.Typer(name="dormant", help="Durable actor workflows on AWS: run them locally, inspect and operate them.",
                  no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]},
                  rich_markup_mode="markdown", pretty_exceptions_enable=False, add_completion=False)
app.add_typer(actors.app, name="actors")
app.add_typer(history.app, name="history")
for module in (dev, actor, operate, rewind, replay, waiting, callbacks, doctor, new, package):
    module.register(app)


def _version() -> str:
    try:
        return version("dormant")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"dormant {_version()}")
        raise typer.Exit()


@app.callback()
def root(show_version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                                    help="Print the version and exit")] = False,
         auth: Annotated[ApiAuth, typer.Option(
             "--auth", envvar="DORMANT_AUTH", show_envvar=True,
             help="How to authenticate to a deployed API: `sigv4` (IAM mode: your AWS credentials sign each "
                  "request), `jwt` (JWT mode: the token in DORMANT_JWT), `none` (`dormant dev`, auth mode none)")
         ] = ApiAuth.none) -> None:
    """Durable actor workflows on AWS."""
    use_auth(auth)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 a check failed, 2 an error)."""
    try:
        app(args=list(argv) if argv is not None else None, prog_name="dormant")
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 2)
    return 0
