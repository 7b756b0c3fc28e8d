"""schemathesis against the served API: every operation of /openapi.json, with generated (and mutated)
requests, answers without a 5xx and with a status, content type, headers and body that the document
declares.

The app runs under uvicorn on its own thread and event loop over a TestEnv (wake-ups run as messages
arrive). Bounded: `DORMANT_FUZZ_EXAMPLES` examples per operation (default 6; 10 under `make check`; `make fuzz`
runs more).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
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


def _document() -> dict[str, Any]:
    """The same document /openapi.json serves (built here: schemathesis' fixture-based loader does not run on
    this pytest; the test below checks that the served one is identical)."""
    return create_app(registry, Settings(dev=False), service=TestEnv(registry).service).openapi()  # as served


schema = schemathesis.openapi.from_dict(_document())


def test_the_fuzzed_document_is_the_served_one(served: str) -> None:
    import httpx

    assert httpx.get(f"{served}/openapi.json", timeout=30).json() == _document()


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_no_operation_answers_5xx_or_off_its_schema(case: Any, served: str) -> None:
    case.call_and_validate(base_url=served, headers={"Authorization": f"Bearer {TOKEN}"}, checks=CHECKS,
                           timeout=30)


def test_a_hostile_timeout_on_a_wait_nothing_answers_ends_at_the_cap(served: str) -> None:
    """What the fuzzer found (`wait=true&timeout=7.7e306` to an actor asleep for an hour): capped at the API's wait
    (api_max_wait), the wait times out with its defined answer."""
    import httpx

    headers = {"Authorization": f"Bearer {TOKEN}"}
    url = f"{served}/actors/sleeper/hostile-timeout/queues/go"
    first = httpx.post(url, json=1, headers=headers, timeout=30)  # taken at once: the workflow then naps for an hour
    assert first.status_code == 202, first.text
    answer = httpx.post(f"{url}?wait=true&timeout=7.7e306", json=2, headers=headers, timeout=30)
    assert (answer.status_code, answer.json()["status"]) == (200, "timedOut"), answer.text
