"""`dormant dev`: the whole stack on one machine, with no AWS account.

An embedded moto server (or any endpoint: LocalStack, a real account), the table and queues created
from the same definitions the deployment uses, the HTTP API on localhost (uvicorn) and a worker fed by
pollers that play Lambda's SQS event source — the same handlers that run on AWS.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from dormant.actor import Registry
from dormant.settings import Settings

FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "dormant-dev", "AWS_SECRET_ACCESS_KEY": "dormant-dev",
                    "AWS_SESSION_TOKEN": "dormant-dev"}


class DevStackError(RuntimeError):
    """The local stack could not start (port taken, endpoint unreachable...)."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class EmbeddedMoto:
    """`python -m dormant.dev.moto PORT` in a child process, stopped with the stack."""

    def __init__(self, port: int = 0) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> None:
        self._process = subprocess.Popen([sys.executable, "-m", "dormant.dev.moto", str(self.port)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                error = self._process.stderr.read().decode(errors="replace") if self._process.stderr else ""
                raise DevStackError(f"the embedded moto server exited at start: {error.strip()[-500:]}")
            try:
                urllib.request.urlopen(f"{self.url}/moto-api/", timeout=1).close()
                return
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        self.stop()
        raise DevStackError(f"the embedded moto server did not answer on {self.url} within {timeout} s")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
        self._process = None


@dataclass
class DevStack:
    """A running stack: where the API and the AWS endpoint are."""

    api_url: str
    endpoint_url: str
    settings: Settings
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)


@asynccontextmanager
async def run_dev_stack(registry: Registry, *, host: str = "127.0.0.1", port: int = 8787,
                        endpoint_url: str | None = None, settings: Settings | None = None,
                        moto_port: int = 0) -> AsyncIterator[DevStack]:
    """Start everything; stop it all when the block exits."""
    import uvicorn
    from aiobotocore.session import get_session  # type: ignore[import-untyped]

    from dormant.aws.poller import SqsPoller
    from dormant.aws.table import client_config, create_table
    from dormant.aws.transport import create_queues
    from dormant.aws.worker import open_worker
    from dormant.http.app import create_app

    settings = settings or Settings()
    endpoint = endpoint_url or settings.endpoint_url
    moto: EmbeddedMoto | None = None
    async with AsyncExitStack() as stack:
        if endpoint is None:
            moto = EmbeddedMoto(moto_port)
            await asyncio.to_thread(moto.start)
            stack.callback(moto.stop)
            endpoint = moto.url
            for name, value in FAKE_CREDENTIALS.items():  # a local server needs no real account
                os.environ.setdefault(name, value)
        # Dev mode: the inspector needs no token on a machine of one's own.
        settings = settings.model_copy(update={"endpoint_url": endpoint, "dev": True})
        session = get_session()
        dynamodb = await stack.enter_async_context(
            session.create_client("dynamodb", config=client_config(), **settings.client_kwargs("dynamodb")))
        sqs = await stack.enter_async_context(
            session.create_client("sqs", config=client_config(), **settings.client_kwargs("sqs")))
        try:
            await create_table(dynamodb, settings)
            urls = await create_queues(sqs, settings)
        except Exception as error:
            raise DevStackError(f"cannot create the table and queues at {endpoint}: {error}") from error
        settings = settings.model_copy(update={"queue_url": urls.wake, "timer_queue_url": urls.timers})
        worker = await stack.enter_async_context(open_worker(settings, registry))
        pollers = [SqsPoller(sqs, url, worker.handle, wait_seconds=1, region=settings.region)
                   for url in (urls.wake, urls.timers)]
        app = create_app(registry, settings)
        server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
        tasks = [asyncio.create_task(p.run(), name="poller") for p in pollers]
        serving = asyncio.create_task(server.serve(), name="api")
        while not server.started:
            if serving.done():
                for task in tasks:
                    task.cancel()
                raise DevStackError(f"the API could not listen on {host}:{port} (is the port taken?)")
            await asyncio.sleep(0.05)
        try:
            yield DevStack(api_url=f"http://{host}:{port}", endpoint_url=endpoint, settings=settings,
                           tasks=[*tasks, serving])
        finally:
            server.should_exit = True
            for poller in pollers:
                poller.stop()
            for task in tasks:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*tasks, return_exceptions=True)
            await serving
