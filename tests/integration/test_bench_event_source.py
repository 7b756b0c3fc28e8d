"""The priced benchmark's SQS event source (benchmarks/functions.EventSource) counts receives as docs/performance.md
says, in Dormant's column and the floor alike: a receive that returned nothing while no batch was gathered is
polling (`idle`); the receives of a batch, the one that closes a batching window empty included, count with it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiobotocore.session import get_session  # type: ignore[import-untyped]

from benchmarks.functions import Batching, EventSource
from dormant.aws.metering import instrument
from dormant.sqs.poller import SqsPoller
from tests.servers import MotoServer
from tests.waiting import until_async

DEADLINE = 10.0


@pytest.fixture
async def sqs(moto_server_process: MotoServer) -> AsyncIterator[Any]:
    async with get_session().create_client("sqs", region_name="us-east-1", endpoint_url=moto_server_process.endpoint,
                                           aws_access_key_id="test", aws_secret_access_key="test") as client:
        instrument(client)
        yield client


async def until(condition: Callable[[], bool], what: str) -> None:
    async def holds() -> bool:
        return condition()
    await until_async(holds, timeout=DEADLINE, what=what, interval=0.01)


async def source_on(sqs: Any, batching: Batching, *, fifo: bool) -> tuple[EventSource, str, list[int]]:
    name = f"bench-es-{uuid.uuid4().hex[:8]}" + (".fifo" if fifo else "")
    attributes = {"FifoQueue": "true", "ContentBasedDeduplication": "true"} if fifo else {}
    url = (await sqs.create_queue(QueueName=name, Attributes=attributes))["QueueUrl"]
    batches: list[int] = []

    async def handler(event: dict[str, Any], _context: Any) -> None:
        batches.append(len(event["Records"]))

    source = EventSource(SqsPoller(sqs, url, handler, wait_seconds=1), batching, wait_seconds=1)
    return source, url, batches


def receives(meter: Any) -> int:
    return int(meter.requests["sqs.ReceiveMessage"])


async def running(source: EventSource, body: Callable[[], Awaitable[None]]) -> None:
    source.start()
    try:
        await body()
    finally:
        await source.stop()


async def test_a_message_is_received_while_the_long_poll_is_open_and_idle_polls_are_set_apart(sqs: Any) -> None:
    source, url, batches = await source_on(sqs, Batching(10), fifo=True)

    async def body() -> None:
        await until(lambda: source.receiving, "the first long poll")
        await sqs.send_message(QueueUrl=url, MessageBody="m", MessageGroupId="g")
        await until(lambda: batches == [1] and not source.busy, "the batch")
        assert receives(source.meter) - receives(source.idle) == 1  # the receive that returned it, no more
        assert source.meter.requests["sqs.DeleteMessageBatch"] == 1
        idle = receives(source.idle)
        await until(lambda: receives(source.idle) > idle, "an idle long poll to end")  # 1 s, empty: polling
        assert receives(source.meter) - receives(source.idle) == 1

    await running(source, body)


async def test_a_window_that_ends_unfilled_costs_its_batch_one_more_receive(sqs: Any) -> None:
    source, url, batches = await source_on(sqs, Batching(10, 1.0), fifo=False)

    async def body() -> None:
        await until(lambda: source.receiving, "the first long poll")
        await sqs.send_message(QueueUrl=url, MessageBody="m")
        await until(lambda: batches == [1] and not source.busy, "the batch")
        # The receive that returned the message, and the long poll for the rest of the window that returned nothing:
        # both the batch's, none of it polling.
        assert receives(source.meter) - receives(source.idle) == 2

    await running(source, body)


async def test_held_sources_let_messages_queue_up_into_one_batch(sqs: Any) -> None:
    source, url, batches = await source_on(sqs, Batching(10), fifo=False)

    async def body() -> None:
        await until(lambda: source.receiving, "the first long poll")
        await source.hold()  # returns once the open long poll has ended (1 s here)
        assert not source.receiving
        for n in range(3):
            await sqs.send_message(QueueUrl=url, MessageBody=f"m{n}")
        source.release()
        await until(lambda: sum(batches) == 3 and not source.busy, "the messages")
        assert len(batches) <= 2 and batches[0] >= 2, batches  # delivered together, not one by one

    await running(source, body)
