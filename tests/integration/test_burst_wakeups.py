"""A burst of sends to one actor leaves a wake-up message per send; the first wake-up consumes them all, and
the worker lets the rest go without a read (dormant.aws.consumed). On moto (SQS and DynamoDB), with the real
messages the sends left in the FIFO queue."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from dormant.aws.metering import Meter
from dormant.aws.observability import Observer, WakeRecord
from dormant.aws.worker import Worker, open_worker
from dormant.client import Client
from dormant.sqs.poller import lambda_event, queue_arn
from examples.counter import registry as counter_registry
from tests.integration.test_worker import Aws, open_aws
from tests.servers import MotoServer

BURST = 8


@pytest.fixture
async def aws(moto_server_process: MotoServer, dynamodb_local_server: str) -> AsyncIterator[Aws]:
    servers = {"moto": moto_server_process.endpoint, "dynamodb_local": dynamodb_local_server}
    async for opened in open_aws(servers, "dynamodb_local"):
        yield opened


async def burst(aws: Aws, key: str, count: int = BURST) -> tuple[Any, list[dict[str, Any]]]:
    """`count` sends to one counter; returns its handle and the wake-up messages they left (received)."""
    handle = Client(aws.service(counter_registry)).get_or_create("workflow-counter", [key])
    for n in range(count):
        await handle.send("counter", {"delta": n + 1}, message_id=f"{key}-{n}")
    messages: list[dict[str, Any]] = []
    while len(messages) < count:
        got = (await aws.sqs.receive_message(QueueUrl=aws.urls.wake, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                             MessageSystemAttributeNames=["All"])).get("Messages", [])
        assert got, f"only {len(messages)} of {count} wake-up messages arrived"
        messages += got
    return handle, messages


def event(aws: Aws, *messages: dict[str, Any], receive_count: int | None = None) -> dict[str, Any]:
    if receive_count is not None:
        messages = tuple({**m, "Attributes": {**m["Attributes"], "ApproximateReceiveCount": str(receive_count)}}
                         for m in messages)
    return lambda_event(messages, arn=queue_arn(aws.urls.wake, "us-east-1"), region="us-east-1")


async def deliver_one_by_one(worker: Worker, aws: Aws, messages: list[dict[str, Any]]) -> None:
    """As separate batches (a queue of many actors rarely hands one actor's messages over together), each
    deleted after it succeeded, as the event source does."""
    for message in messages:
        assert await worker.handle(event(aws, message)) == {"batchItemFailures": []}
        await aws.sqs.delete_message(QueueUrl=aws.urls.wake, ReceiptHandle=message["ReceiptHandle"])


class Sink:
    """A MetricsSink that keeps what it is told (the EMF one is dormant.aws.telemetry's)."""

    def __init__(self) -> None:
        self.wakes: list[WakeRecord] = []
        self.skips: list[int] = []
        self.flushes = 0

    def wake(self, record: WakeRecord) -> None:
        self.wakes.append(record)

    def skipped(self, messages: int) -> None:
        self.skips.append(messages)

    def flush(self) -> None:
        self.flushes += 1


async def test_the_first_wake_up_of_a_burst_consumes_it_and_the_rest_cost_no_read(aws: Aws) -> None:
    handle, messages = await burst(aws, f"burst-{uuid.uuid4().hex[:6]}")
    meter, sink = Meter(), Sink()
    async with open_worker(aws.settings, counter_registry, meter=meter, observer=Observer(sink)) as worker:
        await deliver_one_by_one(worker, aws, messages[:1])
        assert [r.outcome for r in worker.reports] == ["sleeping"]
        assert sorted(worker.reports[0].consumed) == sorted(f"{handle.ref.key[0]}-{n}" for n in range(BURST))
        assert len(worker.consumed) == BURST
        requests = meter.dynamodb_requests
        await deliver_one_by_one(worker, aws, messages[1:])
        assert meter.dynamodb_requests == requests  # none of the other seven read or wrote anything
        assert (len(worker.reports), worker.skipped) == (1, BURST - 1)
        assert (len(sink.wakes), sink.skips) == (1, [1] * (BURST - 1))  # a metric of each (WakeUpsSkipped)
    state = await handle.get_state()
    assert (state.value, state.processed) == (BURST * (BURST + 1) // 2, BURST)  # each message once


async def test_a_redelivered_copy_still_wakes_the_actor(aws: Aws) -> None:
    """A redelivery may stand for a wake-up that died between its commit and its timer: it always runs."""
    handle, messages = await burst(aws, f"redelivered-{uuid.uuid4().hex[:6]}", count=2)
    async with open_worker(aws.settings, counter_registry) as worker:
        await deliver_one_by_one(worker, aws, messages[:1])
        # A second receive of an interrupted message: the worker sends a fresh copy (dormant.aws.redelivery)...
        assert await worker.handle(event(aws, messages[1], receive_count=2)) == {"batchItemFailures": []}
        await aws.sqs.delete_message(QueueUrl=aws.urls.wake, ReceiptHandle=messages[1]["ReceiptHandle"])
        copies = (await aws.sqs.receive_message(QueueUrl=aws.urls.wake, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                                MessageSystemAttributeNames=["All"],
                                                MessageAttributeNames=["All"]))["Messages"]
        # ...which counts as a redelivery too, and wakes the actor although its message was consumed
        await deliver_one_by_one(worker, aws, copies)
        assert (len(copies), len(worker.reports), worker.skipped) == (1, 2, 0)
    assert (await handle.get_state()).processed == 2


async def test_another_worker_runs_the_first_it_gets_and_learns_the_rest_from_its_load(aws: Aws) -> None:
    """The memory is the worker's own: a second container (or a restarted dev stack) runs the first wake-up it
    gets, and its load shows what the actor consumed already."""
    handle, messages = await burst(aws, f"two-workers-{uuid.uuid4().hex[:6]}", count=4)
    async with open_worker(aws.settings, counter_registry) as first, \
            open_worker(aws.settings, counter_registry) as second:
        await deliver_one_by_one(first, aws, messages[:1])
        await deliver_one_by_one(second, aws, messages[1:])
        assert (len(second.reports), second.skipped) == (1, 2)
        assert [r.outcome for r in second.reports] == ["sleeping"]
    assert (await handle.get_state()).processed == 4


async def test_a_wake_up_that_carries_a_message_sent_after_the_burst_runs(aws: Aws) -> None:
    handle, messages = await burst(aws, f"late-{uuid.uuid4().hex[:6]}", count=2)
    async with open_worker(aws.settings, counter_registry) as worker:
        await deliver_one_by_one(worker, aws, messages)
        assert (len(worker.reports), worker.skipped) == (1, 1)
        await handle.send("counter", {"delta": 100}, message_id="after")
        late = (await aws.sqs.receive_message(QueueUrl=aws.urls.wake, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                              MessageSystemAttributeNames=["All"]))["Messages"]
        await deliver_one_by_one(worker, aws, late)
        assert (len(worker.reports), worker.skipped) == (2, 1)
    state = await handle.get_state()
    assert (state.value, state.processed) == (103, 3)
