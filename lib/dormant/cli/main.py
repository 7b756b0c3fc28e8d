"""The `dormant` command."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Sequence

from dormant.actor import load_registry
from dormant.dev.stack import DEFAULT_DATA_DIR, LOG_LEVELS
from dormant.runtime.offline import parse_export, replay_snapshot


def _replay(args: argparse.Namespace) -> int:
    registry = load_registry(args.app)
    with open(args.file, encoding="utf-8") as handle:
        snapshot = parse_export(handle)
    report = asyncio.run(replay_snapshot(registry, snapshot))
    print(f"{report.ref}: {report.outcome} ({report.replayed} entries replayed)")
    print(report.detail)
    return 0 if report.outcome == "ok" else 1


def _dev(args: argparse.Namespace) -> int:
    from pathlib import Path

    from dormant.dev.console import configure_console
    from dormant.dev.stack import DevOptions, run_dev_stack
    from dormant.settings import Settings

    settings = Settings()
    app = args.app or settings.app
    if not app:
        print("dormant dev: name your registry with --app module:attribute or DORMANT_APP", file=sys.stderr)
        return 2
    configure_console(args.log_level)
    registry = load_registry(app)
    options = DevOptions(host=args.host, port=args.port, endpoint_url=args.endpoint, fresh=args.fresh,
                         data_dir=None if args.in_memory else Path(args.data_dir), log_level=args.log_level,
                         poll_wait_seconds=args.poll_wait)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        async with run_dev_stack(registry, options, settings=settings.model_copy(update={"app": app})) as stack:
            print(f"dormant dev: serving {app}", flush=True)
            print(f"  API        {stack.api_url}   (OpenAPI docs at {stack.api_url}/docs)", flush=True)
            print(f"  AWS        {stack.endpoint_url}   table {stack.settings.table}", flush=True)
            print(f"  queues     {stack.settings.queue_url}", flush=True)
            print(f"             {stack.settings.timer_queue_url}", flush=True)
            where = stack.data_dir or ("kept at the endpoint" if options.endpoint_url or settings.endpoint_url
                                       else "in memory only (lost at exit)")
            print(f"  data       {where}", flush=True)
            print("  Ctrl-C stops everything.", flush=True)
            await stop.wait()
            print("dormant dev: stopping", flush=True)

    asyncio.run(serve())
    return 0


def _export(args: argparse.Namespace) -> int:
    import httpx

    from dormant.http.keys import encode_key

    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    url = f"{args.url.rstrip('/')}/actors/{args.actor}/{encode_key(args.key)}/inspector/export"
    response = httpx.get(url, headers=headers, timeout=30)
    if response.status_code != 200:
        print(f"dormant history export: HTTP {response.status_code}: {response.text}", file=sys.stderr)
        return 1
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(response.text)
    else:
        sys.stdout.write(response.text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dormant", description="Durable actor workflows on AWS.")
    commands = parser.add_subparsers(dest="command", required=True)
    replay = commands.add_parser("replay", help="replay an exported actor history against the current code "
                                                "(offline, touches nothing); exit 1 on divergence")
    replay.add_argument("file", help="history export (JSON lines)")
    replay.add_argument("--app", required=True, help="module:attribute of the registry (as DORMANT_APP)")
    replay.set_defaults(run=_replay)
    history = commands.add_parser("history", help="actor histories")
    history_commands = history.add_subparsers(dest="history_command", required=True)
    export = history_commands.add_parser("export", help="write an actor's history as JSON lines (for replay)")
    export.add_argument("actor", help="the actor type")
    export.add_argument("key", nargs="+", help="the actor's key parts")
    export.add_argument("--url", required=True, help="the API's base URL (dormant dev or API Gateway)")
    export.add_argument("--token", default=os.environ.get("DORMANT_INSPECTOR_TOKEN"),
                        help="inspector bearer token (default: DORMANT_INSPECTOR_TOKEN)")
    export.add_argument("--out", help="file to write (default: standard output)")
    export.set_defaults(run=_export)
    dev = commands.add_parser("dev", help="run the whole stack locally: embedded moto server (or --endpoint), "
                                          "table and queues, the HTTP API and a polling worker")
    dev.add_argument("--app", help="module:attribute of the registry (default: DORMANT_APP)")
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=8787)
    dev.add_argument("--endpoint", help="use this AWS endpoint (LocalStack, a real account) instead of an embedded "
                                        "moto server (default: AWS_ENDPOINT_URL / DORMANT_ENDPOINT_URL)")
    dev.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR),
                     help=f"keep the embedded server's data here across restarts (default: {DEFAULT_DATA_DIR})")
    dev.add_argument("--fresh", action="store_true", help="start from empty data (clears the data directory)")
    dev.add_argument("--in-memory", action="store_true", help="keep nothing on disk (data is lost at exit)")
    dev.add_argument("--log-level", default="info", choices=LOG_LEVELS,
                     help="info: a line per request and per wake-up (default); warning: problems only")
    dev.add_argument("--poll-wait", type=int, default=20, choices=range(21), metavar="0-20",
                     help="the pollers' long-poll wait in seconds (default 20: the embedded server answers a long "
                          "poll as soon as a message arrives)")
    dev.set_defaults(run=_dev)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except Exception as error:  # a CLI reports errors, it does not dump tracebacks
        print(f"dormant {args.command}: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    return code


