"""A send is either processed or not stored (issue 9), on a real moto server behind a fault-injecting proxy
(tests/faultproxy.py) and with the API process killed (-9) between its two storage calls.

The API runs as deployed (create_app opening its own DynamoDB and SQS clients) and the worker plays Lambda's
event source all the time (AwsTestEnv with autorun), both through the proxy. Each outage test measures what
the report quotes: messages sent during the outage, stored, processed after it, the time to process them,
duplicates (`OUTAGE_FIGURES`; written to $DORMANT_OUTAGE_REPORT when set)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest

from dormant.http.app import create_app
from dormant.settings import Settings
from examples.counter import registry
from tests.api.support import serve
from tests.aws_env import AwsTestEnv
from tests.faultproxy import FaultProxy, Outcome, passing

ROOT = Path(__file__).resolve().parents[2]
SENT_DURING_OUTAGE = 12
PROCESS_BOUND = 60.0  # seconds after the outage within which every stored message must have run
OUTAGE_FIGURES: dict[str, dict[str, Any]] = {}


@pytest.fixture(scope="module", autouse=True)
def report_figures() -> Iterator[None]:
    """With DORMANT_OUTAGE_REPORT=path, the figures are written there as JSON after the module's tests."""
    yield
    path = os.environ.get("DORMANT_OUTAGE_REPORT")
    if path:
        Path(path).write_text(json.dumps(OUTAGE_FIGURES, indent=2) + "\n")


@asynccontextmanager
async def stack(moto: str, clients: Literal["aiobotocore", "threads"] = "aiobotocore",
                ) -> AsyncIterator[tuple[AwsTestEnv, FaultProxy, httpx.AsyncClient]]:
    """The HTTP app and a worker behind the fault proxy; `clients`: how both make their AWS clients (`threads`:
    botocore's in threads, what the Lambda functions run)."""
    async with FaultProxy(moto) as proxy:
        settings = Settings(endpoint_url=proxy.url, region="us-east-1", dev=True, wake_retry_base=0.5,
                            wake_retry_max=4, aws_clients=clients)
        async with AwsTestEnv(registry, settings=settings, autorun=True, visibility_timeout=2) as env, \
                serve(create_app(registry, env.settings)) as url, \
                httpx.AsyncClient(base_url=url, timeout=60) as http:
            yield env, proxy, http


async def send(http: httpx.AsyncClient, key: str, message_id: str, delta: int = 1) -> httpx.Response:
    return await http.post(f"/actors/workflow-counter/{key}/queues/counter", json={"delta": delta},
                           headers={"Idempotency-Key": message_id})


async def timed_send(http: httpx.AsyncClient, key: str, message_id: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = await send(http, key, message_id)
    return response, time.monotonic() - started


async def processed(http: httpx.AsyncClient, key: str, count: int, timeout: float = PROCESS_BOUND) -> float:
    """Seconds until the counter has processed `count` messages (fails after `timeout`)."""
    start = time.monotonic()
    while True:
        response = await http.get(f"/actors/workflow-counter/{key}/state")
        if response.status_code == 200 and response.json()["processed"] >= count:
            return time.monotonic() - start
        assert time.monotonic() - start < timeout, f"not processed within {timeout} s: {response.text}"
        await asyncio.sleep(0.1)


async def test_sqs_down_a_send_stores_nothing_and_its_retry_is_processed_once(moto_server: str) -> None:
    # threads: the API and the worker on botocore's clients in threads, as the Lambda functions run
    async with stack(moto_server, "threads") as (env, proxy, http):
        assert (await send(http, "k", "warm")).status_code == 202
        await processed(http, "k", 1)

        def sqs_down(operation: str, body: bytes) -> Outcome:
            return "reset" if operation.startswith("AmazonSQS") else "pass"

        proxy.rule = sqs_down
        timed = await asyncio.gather(*(timed_send(http, "k", f"m{n}") for n in range(SENT_DURING_OUTAGE)),
                                     timed_send(http, "fresh", "f1"))  # the last: an actor that does not exist yet
        slowest = max(seconds for _, seconds in timed)
        answers = [answer for answer, _ in timed[:-1]]
        fresh = timed[-1][0]
        for answer in [*answers, fresh]:
            assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
            error = answer.json()["error"]
            assert (error["code"], error["detail"]["stored"]) == ("send_failed", False)
        snapshot = await env.store.load(env.service.ref("workflow-counter", ["k"]))
        assert snapshot is not None and snapshot.inbox == [] and snapshot.held_ids == {"warm"}  # nothing stored
        assert not await env.store.exists(env.service.ref("workflow-counter", ["fresh"]))
        proxy.rule = passing
        back = time.monotonic()
        for n in range(SENT_DURING_OUTAGE):  # the client retries, with the same keys
            assert (await send(http, "k", f"m{n}")).json()["id"] == f"m{n}"
        assert (await send(http, "fresh", "f1")).status_code == 202
        took = await processed(http, "k", SENT_DURING_OUTAGE + 1)
        await processed(http, "fresh", 1)
        state = (await http.get("/actors/workflow-counter/k/state")).json()
        assert state == {"value": SENT_DURING_OUTAGE + 1, "processed": SENT_DURING_OUTAGE + 1}  # none twice
        OUTAGE_FIGURES["sqs-down"] = {
            "sent during the outage": SENT_DURING_OUTAGE + 1, "answered 503 stored=false": len(answers) + 1,
            "stored during the outage": 0, "processed after (client retried)": SENT_DURING_OUTAGE + 1,
            "seconds to the slowest 503": round(slowest, 2),
            "seconds from SQS back to all processed": round(time.monotonic() - back, 2),
            "seconds from the retries to all processed": round(took, 2), "duplicates": 0,
            "refused SQS requests": proxy.outcomes("AmazonSQS")["reset"]}


async def test_inbox_writes_failing_after_the_wake_up_went_out_are_processed_without_any_traffic(
        moto_server: str) -> None:
    async with stack(moto_server) as (env, proxy, http):
        assert (await send(http, "k", "warm")).status_code == 202
        await processed(http, "k", 1)

        def inbox_writes_fail(operation: str, body: bytes) -> Outcome:
            return "reset" if operation.endswith(".PutItem") and b'"i#' in body else "pass"

        proxy.rule = inbox_writes_fail
        answers = await asyncio.gather(*(send(http, "k", f"m{n}") for n in range(SENT_DURING_OUTAGE)))
        for answer in answers:
            error = answer.json()["error"]
            assert (answer.status_code, error["code"], error["detail"]["stored"]) == (503, "send_failed", True)
        refused = proxy.outcomes("DynamoDB_20120810.PutItem")["reset"]  # the API's attempts
        deadline = time.monotonic() + PROCESS_BOUND
        while proxy.outcomes("DynamoDB_20120810.PutItem")["reset"] == refused:  # the outage goes on: the worker's
            assert time.monotonic() < deadline, "the worker never tried to store them"  # own attempts fail too
            await asyncio.sleep(0.05)
        ref = env.service.ref("workflow-counter", ["k"])
        snapshot = await env.store.load(ref)
        assert snapshot is not None and snapshot.inbox == []
        proxy.rule = passing
        took = await processed(http, "k", SENT_DURING_OUTAGE + 1)  # no client retried: the wake-ups carry them
        figures = "inbox-writes-down"
        OUTAGE_FIGURES[figures] = {
            "sent during the outage": SENT_DURING_OUTAGE, "answered 503 stored=true": len(answers),
            "stored by the worker after it": SENT_DURING_OUTAGE, "processed after it": SENT_DURING_OUTAGE,
            "seconds from the store back to all processed": round(took, 2),
            "refused inbox writes": proxy.outcomes("DynamoDB_20120810.PutItem")["reset"]}
        for n in range(SENT_DURING_OUTAGE):  # a late client retry is the same message
            assert (await send(http, "k", f"m{n}")).status_code == 202
        # A new message after the retries: once it is processed, so would be any retry stored again (one inbox).
        assert (await send(http, "k", "after-the-retries")).status_code == 202
        await processed(http, "k", SENT_DURING_OUTAGE + 2)
        state = (await http.get("/actors/workflow-counter/k/state")).json()
        assert state == {"value": SENT_DURING_OUTAGE + 2, "processed": SENT_DURING_OUTAGE + 2}
        OUTAGE_FIGURES[figures]["duplicates"] = state["processed"] - SENT_DURING_OUTAGE - 2


@pytest.mark.parametrize("existing", [True, False], ids=["existing-actor", "new-actor"])
async def test_a_send_killed_between_its_wake_up_and_its_write_is_processed_once(moto_server: str,
                                                                                 existing: bool) -> None:
    async with stack(moto_server) as (env, _, http):
        if existing:
            assert (await send(http, "k", "before")).status_code == 202
            await processed(http, "k", 1)
        fields = {"endpoint_url", "region", "table", "queue_url", "timer_queue_url", "queue_name", "timer_queue_name"}
        settings = env.settings.model_copy(update={"queue_url": env.urls.wake, "timer_queue_url": env.urls.timers})
        process = await asyncio.create_subprocess_exec(  # (asynchronously: the proxy runs on this event loop)
            sys.executable, "-m", "tests.integration.send_and_die", settings.model_dump_json(include=fields),
            "workflow-counter", "k", "killed-1", cwd=ROOT, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == -9, (out + err).decode()
        assert out.decode().strip() == ("killed at enqueue" if existing else "killed at create")
        total = 2 if existing else 1
        await processed(http, "k", total)  # nobody sends anything more: the wake-up stored and ran it
        assert (await send(http, "k", "killed-1")).json()["id"] == "killed-1"  # the client's retry: same one
        # A new message after the retry: once it is processed, so would be the retry had it been stored again.
        assert (await send(http, "k", "after-the-retry")).status_code == 202
        await processed(http, "k", total + 1)
        state = (await http.get("/actors/workflow-counter/k/state")).json()
        assert state == {"value": total + 1, "processed": total + 1}
