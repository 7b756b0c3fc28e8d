"""What the schemathesis runs share (tests/api/test_fuzz.py, tests/api/test_fuzz_operations.py): the API served over a
TestEnv on its own thread, its document as served, and the checks every generated request's answer must pass.
Bounded: `DORMANT_FUZZ_EXAMPLES` examples per operation (default 6; 10 under `make check`; `make fuzz` runs more).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from schemathesis.checks import CheckContext, not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from dormant.http.app import create_app
from dormant.settings import Settings
from dormant.testing import TestEnv
from tests.api.apps import registry
from tests.api.support import TOKEN, serve

EXAMPLES = int(os.environ.get("DORMANT_FUZZ_EXAMPLES", "6"))
# Actions of the test app that fail on purpose (one raises, one breaks the state): their declared answer is
# 500 action_failed with nothing committed.
DESIGNED_TO_FAIL = ("/actions/explode", "/actions/append_raw")


def no_server_error(ctx: CheckContext, response: Any, case: Any) -> bool | None:
    """schemathesis' not_a_server_error, except for the actions that fail on purpose."""
    if case.formatted_path.endswith(DESIGNED_TO_FAIL) and response.status_code == 500 and \
            response.json()["error"]["code"] == "action_failed":
        return None
    return not_a_server_error(ctx, response, case)


CHECKS = [no_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance]


async def follow_real_time(env: TestEnv, tick: float = 0.02) -> None:
    """Move the env's virtual clock with real time, as a deployed server's clock moves: a `wait=true` send ends at
    the API's wait cap. On a clock that stood still, a wait nothing can answer (a send to an actor asleep for an
    hour) would last until TestEnv's patience guard, which raises for the test author (docs/testing.md): a 500."""
    last = time.monotonic()
    while True:
        await asyncio.sleep(tick)  # a clock's tick, not a wait for something to have happened
        now = time.monotonic()
        env.clock.advance(now - last)
        last = now


class ServedApi:
    """The API over a TestEnv, served on a private event loop in a thread."""

    def __init__(self) -> None:
        self.url = ""
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, name="fuzzed-api", daemon=True)
        self.error: BaseException | None = None

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as error:  # shown by start()
            self.error = error
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        # A short wait cap: a generated `wait=true&timeout=1e9` must not hold the run for 25 s per request.
        app_settings = Settings(inspector_token=TOKEN, api_max_wait=0.2, max_body_bytes=64 * 1024,  # type: ignore[arg-type]
                                auth_mode="none")  # no API Gateway in front: callers are anonymous
        async with TestEnv(registry) as env, serve(create_app(registry, app_settings, service=env.service)) as url:
            await env.client.get_or_create("account", ["main"]).send("deposit", {"amount": 5})
            await env.run_until_idle()
            self.url = url
            self._ready.set()
            clock = asyncio.ensure_future(follow_real_time(env))
            try:
                await self._stop.wait()
            finally:
                clock.cancel()

    def start(self) -> str:
        self._thread.start()
        self._ready.wait(60)
        if self.error is not None or not self.url:
            raise RuntimeError(f"the fuzzed API did not start: {self.error!r}")
        return self.url

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    api = ServedApi()
    url = api.start()
    try:
        yield url
    finally:
        api.stop()


def document() -> dict[str, Any]:
    """The same document /openapi.json serves (built here: schemathesis' fixture-based loader does not run on
    this pytest; the test below checks that the served one is identical)."""
    return create_app(registry, Settings(dev=False), service=TestEnv(registry).service).openapi()  # as served


