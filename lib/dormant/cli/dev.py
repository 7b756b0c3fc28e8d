"""`dormant dev`: the whole stack on this machine (dormant.dev.stack), until Ctrl-C."""

from __future__ import annotations

import asyncio
import signal
from typing import Annotated

import typer

from dormant.cli.common import CliError, err, load_app


def register(app: typer.Typer) -> None:
    app.command("dev")(dev)


def dev(app: Annotated[str | None, typer.Option(
            "--app", envvar="DORMANT_APP", show_envvar=True, show_default=False,
            help="The registry as module:attribute; modules in the current directory are found")] = None,
        host: Annotated[str, typer.Option(help="Address the API listens on")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="Port of the API")] = 8787,
        endpoint: Annotated[str | None, typer.Option(
            envvar=["DORMANT_ENDPOINT_URL", "AWS_ENDPOINT_URL"], show_default=False,
            help="Use this AWS endpoint (LocalStack, a real account) instead of an embedded moto server")] = None,
        ) -> None:
    """Run the whole stack locally: an embedded moto server (or --endpoint), the table and queues, the HTTP API
    (the dashboard at /ui, docs at /docs) and a worker polling the queues."""
    from dormant.dev.stack import run_dev_stack
    from dormant.settings import Settings

    if not app:
        err.print("dormant dev: name your registry with --app module:attribute or DORMANT_APP")
        raise typer.Exit(2)
    try:
        registry = load_app(app)
    except CliError as error:
        err.print(f"dormant dev: {error}", markup=False)
        raise typer.Exit(2) from None
    settings = Settings().model_copy(update={"app": app})

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        async with run_dev_stack(registry, host=host, port=port, endpoint_url=endpoint, settings=settings) as stack:
            print(f"dormant dev: serving {app}", flush=True)
            print(f"  API        {stack.api_url}   (OpenAPI docs at {stack.api_url}/docs)", flush=True)
            print(f"  dashboard  {stack.api_url}/ui", flush=True)
            print(f"  AWS        {stack.endpoint_url}   table {stack.settings.table}", flush=True)
            print(f"  queues     {stack.settings.queue_url}", flush=True)
            print(f"             {stack.settings.timer_queue_url}", flush=True)
            print("  Ctrl-C stops everything.", flush=True)
            await stop.wait()
            print("dormant dev: stopping", flush=True)

    asyncio.run(serve())
