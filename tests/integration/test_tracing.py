"""Traces on the AWS path (issue 31): the HTTP API over DynamoDB Local, moto's SQS and the real worker (`open_worker`,
as the worker Lambda composes it, fed Lambda-shaped batches by the event-source poller). One send over HTTP with a
caller's traceparent yields the request's span, the SQS send, two wake-ups (before and after a 2 s sleep), the
failing and the succeeding attempt of a step and the last step, all in the caller's trace: the context crosses SQS
in the message attribute and again in the sleep's timer message."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from dormant.aws.clients import open_clients
from dormant.aws.worker import open_worker
from dormant.dynamodb.store import create_table
from dormant.http.app import create_app
from dormant.ports import ActorRef, EventStore
from dormant.runtime import tracing
from dormant.settings import Settings
from dormant.sqs.poller import SqsPoller
from dormant.sqs.transport import QueueUrls, create_queues, dedup_id, group_id
from tests.tracing_app import registry
from tests.waiting import until_async

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    restore = tracing.install(tracing.build(exporters=[spans]))
    yield spans
    restore()


@dataclass
class Stack:
    app: Any
    sqs: Any
    urls: QueueUrls
    store: EventStore


@asynccontextmanager
async def aws_stack(endpoints: dict[str, str]) -> AsyncIterator[Stack]:
    """The API (as the API Lambda serves it) and the worker with its two pollers; yields the API's base URL."""
    suffix = uuid.uuid4().hex[:10]
    settings = Settings(**endpoints, table=f"tr-{suffix}", queue_name=f"tr-{suffix}.fifo",  # type: ignore[arg-type]
                        timer_queue_name=f"tr-timers-{suffix}", dlq_name=f"tr-dlq-{suffix}",
                        fifo_dlq_name=f"tr-dlq-{suffix}.fifo", bucket=None, auth_mode="none")
    async with open_clients(settings, "dynamodb", "sqs") as (dynamodb, sqs):
        await create_table(dynamodb, settings)
        urls = await create_queues(sqs, settings, visibility_timeout=5)
        settings = settings.model_copy(update={"queue_url": urls.wake, "timer_queue_url": urls.timers})
        async with open_worker(settings, registry) as worker:
            pollers = [SqsPoller(sqs, url, worker.handle, wait_seconds=0, idle_delay=0.05)
                       for url in (urls.wake, urls.timers)]
            tasks = [asyncio.create_task(poller.run()) for poller in pollers]
            app = create_app(registry, settings)
            try:
                yield Stack(app, sqs, urls, worker.service.store)
            finally:
                for poller in pollers:
                    poller.stop()
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                await app.state.services.aclose()


async def spans_until(exporter: InMemorySpanExporter, name: str, timeout: float = 20.0) -> list[ReadableSpan]:
    async def finished() -> list[ReadableSpan] | None:
        spans = list(exporter.get_finished_spans())
        return spans if any(span.name == name for span in spans) else None

    return await until_async(finished, timeout=timeout, what=lambda: f"no span {name!r}: "
                             f"{[s.name for s in exporter.get_finished_spans()]}")


def check_the_scenario(spans: list[ReadableSpan], actor: str, key: list[str]) -> dict[str, Any]:
    """The Done-when of issue 31, for any stack: what it found, by kind."""
    own = [s for s in spans if s.attributes and s.attributes.get("dormant.actor") == actor
           and list(s.attributes.get("dormant.key") or []) == key]  # type: ignore[arg-type]
    requests = [s for s in spans if s.name == "POST /actors/{type}/{key}/queues/{name}"]
    wakes = [s for s in own if s.name == "dormant.wake"]
    charges = sorted((s for s in own if s.name == "step charge"), key=lambda s: s.start_time or 0)
    ships = [s for s in own if s.name == "step ship"]
    sleeps = [s for s in own if s.name == "sleep cool-off"]
    assert len(requests) == 1, [s.name for s in spans]
    assert len(wakes) >= 2, [s.name for s in own]  # before and after the sleep (a redelivery may add one)
    assert [s.attributes["dormant.attempt"] for s in charges] == [1, 2]  # type: ignore[index]
    assert [s.attributes["dormant.outcome"] for s in charges] == ["retry", "completed"]  # type: ignore[index]
    assert charges[0].status.status_code.name == "ERROR"
    assert any(e.name == "exception" and "payment provider" in str((e.attributes or {}).get("exception.message"))
               for e in charges[0].events)
    assert len(ships) == 1 and len(sleeps) == 1
    assert sleeps[0].end_time - sleeps[0].start_time >= 1.9e9  # type: ignore[operator]
    for span in [*wakes, *charges, *ships]:
        assert span.attributes["dormant.actor"] == actor  # type: ignore[index]
    for span in [*charges, *ships]:
        assert span.attributes["dormant.location"] in ("charge", "ship")  # type: ignore[index]
    # One trace: the request's (which continues the caller's), through SQS and the sleep's timer.
    trace_ids = {s.context.trace_id for s in [*requests, *wakes, *charges, *ships, *sleeps]}  # type: ignore[union-attr]
    assert trace_ids == {requests[0].context.trace_id}  # type: ignore[union-attr]
    # Entry spans are children of the wake-up that committed them; the first wake-up of the request's.
    by_id = {s.context.span_id: s for s in spans}  # type: ignore[union-attr]
    assert all(s.parent is not None and by_id[s.parent.span_id].name == "dormant.wake" for s in [*charges, *ships])
    first = min(wakes, key=lambda s: s.start_time or 0)
    chain = [first]
    while chain[-1].parent is not None and chain[-1].parent.span_id in by_id:
        chain.append(by_id[chain[-1].parent.span_id])
    assert requests[0] in chain, [s.name for s in chain]  # wake <- SQS SendMessage <- the request
    assert any(s.name.startswith("SQS SendMessage") for s in chain)
    return {"requests": requests, "wakes": wakes, "charges": charges, "ships": ships}


@pytest.mark.tier2  # 7-8 s: the 2 s sleep's timer through SQS, a retry; tier 1 has the quick crossing below
async def test_one_send_is_one_trace_across_sqs_and_a_sleep(aws_endpoints: dict[str, str],
                                                            exporter: InMemorySpanExporter) -> None:
    async with aws_stack(aws_endpoints) as stack, httpx.AsyncClient(
            transport=httpx.ASGITransport(app=stack.app), base_url="http://api") as http:
        answer = await http.post("/actors/traced/t-1/queues/go", json={"order": "o-1"},
                                 headers={"traceparent": CALLER})
        assert answer.status_code == 202, answer.text
        spans = await spans_until(exporter, "step ship")
    found = check_the_scenario(spans, "traced", ["t-1"])
    assert f"{found['requests'][0].context.trace_id:032x}" == CALLER_TRACE
    assert found["requests"][0].parent.span_id == int(CALLER.split("-")[2], 16)


async def test_a_wake_up_sent_before_traces_still_runs_and_starts_a_trace(aws_endpoints: dict[str, str],
                                                                          exporter: InMemorySpanExporter) -> None:
    """A wake-up message written by a version without traces: no message attribute, a stored message without a
    traceparent (the worker stores it, as a send cut off before its write)."""
    old = {"actor": "plain", "key": ["p-1"], "message": {"id": "m-old", "queue": "go", "body": {"order": "o-9"},
                                                         "created_at": time.time(), "kind": "queue", "args": []},
           "creation": {"input": None}}
    ref = ActorRef(name="plain", key=("p-1",))
    async with aws_stack(aws_endpoints) as stack:
        await stack.sqs.send_message(QueueUrl=stack.urls.wake, MessageBody=json.dumps(old),
                                     MessageGroupId=group_id(ref), MessageDeduplicationId=dedup_id(ref, "m-old"))
        spans = await spans_until(exporter, "step ship")
        snapshot = await stack.store.load(ref)
    assert snapshot is not None and snapshot.state == {"shipped": True}
    wake = next(s for s in spans if s.name == "dormant.wake")
    assert wake.parent is None and not wake.links  # nothing carried: a trace of its own
    ship = next(s for s in spans if s.name == "step ship")
    assert ship.context.trace_id == wake.context.trace_id  # type: ignore[union-attr]


async def test_a_send_over_http_continues_the_callers_trace_across_sqs(aws_endpoints: dict[str, str],
                                                                       exporter: InMemorySpanExporter) -> None:
    ref = ActorRef(name="plain", key=("p-2",))
    async with aws_stack(aws_endpoints) as stack, httpx.AsyncClient(
            transport=httpx.ASGITransport(app=stack.app), base_url="http://api") as http:
        answer = await http.post("/actors/plain/p-2/queues/go", json={"order": "o-2"}, headers={"traceparent": CALLER})
        assert answer.status_code == 202, answer.text
        spans = await spans_until(exporter, "step ship")
        snapshot = await stack.store.load(ref)
    assert snapshot is not None and snapshot.inbox == []
    names = {s.name for s in spans if s.context.trace_id == int(CALLER_TRACE, 16)}  # type: ignore[union-attr]
    assert {"POST /actors/{type}/{key}/queues/{name}", "SQS SendMessage", "dormant.wake", "wait order",
            "step ship", "dormant.store.load", "dormant.store.commit"} <= names
