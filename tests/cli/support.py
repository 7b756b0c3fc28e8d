"""The HTTP API the CLI talks to in tests: the real FastAPI app over a TestEnv, served on a loopback port by a thread
of its own (CliRunner runs the CLI synchronously, so the app cannot share the test's event loop)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dormant.http.app import create_app
from dormant.settings import Settings
from dormant.testing import TestEnv
from tests.api.support import serve

STARTUP = 30.0  # seconds: a hang guard, not a speed bound


@contextmanager
def api_in_thread(registry: Any, *, settings: Settings | None = None,
                  prepare: Callable[[TestEnv], Awaitable[None]] | None = None) -> Iterator[str]:
    """The base URL of `registry`'s app, served until the block ends; `prepare(env)` runs first (the actors the
    commands read). A failure while starting is raised here, not left as a timeout."""
    ready, stop = threading.Event(), threading.Event()
    found: list[str] = []
    failed: list[BaseException] = []

    async def main() -> None:
        try:
            async with TestEnv(registry) as env:
                if prepare is not None:
                    await prepare(env)
                async with serve(create_app(registry, settings or Settings(dev=True), service=env.service)) as url:
                    found.append(url)
                    ready.set()
                    await asyncio.to_thread(stop.wait)  # served until the test's block ends
        except BaseException as error:
            failed.append(error)
            ready.set()
            raise

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(STARTUP), "the API did not start"
    if failed:
        raise failed[0]
    try:
        yield found[0]
    finally:
        stop.set()
        thread.join(STARTUP)
