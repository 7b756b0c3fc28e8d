"""A sleeping actor's timer is sent once: wake-ups for messages that arrive during the sleep do not send it
again, yet a wake-up that died between committing the deadline and sending its timer is redelivered and sends
it then (the worker on moto's SQS and DynamoDB, driven batch by batch as Lambda's event source would)."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiobotocore.session import get_session  # type: ignore[import-untyped]

from dormant.aws.worker import Worker
from dormant.client import Client
from dormant.dynamodb.store import DynamoEventStore, client_config, create_table
from dormant.runtime.clocks import SystemClock
from dormant.runtime.service import ActorService
from dormant.settings import Settings
from dormant.sqs.poller import SqsPoller
from dormant.sqs.transport import SqsTransport, WakeMessage, create_queues
from examples.timers import registry


class Rig:
    def __init__(self, settings: Settings, dynamodb: Any, sqs: Any, urls: Any) -> None:
        clock = SystemClock()
        self.sqs, self.urls = sqs, urls
        store = DynamoEventStore(dynamodb, settings)
        self.transport = SqsTransport(sqs, urls, clock)
        self.service = ActorService(registry, store, self.transport, clock)
        self.worker = Worker(self.service, self.transport)
        self.client = Client(self.service)
        self.wake_poller = SqsPoller(sqs, urls.wake, self.worker.handle, wait_seconds=0)

    async def drain_wake_queue(self, max_batches: int = 20) -> int:
        """Handle wake-up batches until the FIFO queue has nothing visible; returns the batches handled."""
        handled = 0
        for _ in range(max_batches):
            result = await self.wake_poller.poll_once(wait_seconds=0)
            if result is None:
                return handled
            handled += 1
        return handled

    async def timers(self) -> int:
        """Timer messages in the timer queue (delayed ones included), counted without consuming them."""
        attributes = (await self.sqs.get_queue_attributes(QueueUrl=self.urls.timers, AttributeNames=[
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed",
            "ApproximateNumberOfMessagesNotVisible"]))["Attributes"]
        return sum(int(value) for value in attributes.values())


@pytest.fixture
async def rig(aws_endpoints: dict[str, str]) -> AsyncIterator[Rig]:
    suffix = uuid.uuid4().hex[:10]
    settings = Settings(**aws_endpoints, region="us-east-1", table=f"timers-{suffix}",
                        queue_name=f"wake-{suffix}.fifo", timer_queue_name=f"timers-{suffix}",
                        dlq_name=f"dlq-{suffix}", fifo_dlq_name=f"dlq-{suffix}.fifo")
    session = get_session()
    async with session.create_client("dynamodb", config=client_config(),
                                     **settings.client_kwargs("dynamodb")) as dynamodb, \
            session.create_client("sqs", **settings.client_kwargs("sqs")) as sqs:
        await create_table(dynamodb, settings)
        urls = await create_queues(sqs, settings, visibility_timeout=1)
        yield Rig(settings, dynamodb, sqs, urls)


async def test_messages_that_arrive_during_a_sleep_do_not_resend_its_timer(rig: Rig) -> None:
    handle = rig.client.get_or_create("reminder", ["sleepy"])
    await handle.send("reminders", {"text": "first", "at": time.time() + 300})
    await rig.drain_wake_queue()
    assert await rig.timers() == 1  # the sleep's timer
    for n in range(3):  # each wakes the actor (it replays and is still asleep until the same deadline)
        await handle.send("reminders", {"text": f"later-{n}", "at": time.time() + 600})
        await rig.drain_wake_queue()
    reports = [r for r in rig.worker.reports if r.ref.key == ("sleepy",)]
    assert len(reports) >= 4 and all(r.outcome == "sleeping" for r in reports)
    assert await rig.timers() == 1, "a wake-up re-sent the timer of a deadline it did not change"


async def test_a_wake_up_that_died_before_its_timer_is_redelivered_and_sends_it(rig: Rig) -> None:
    handle = rig.client.get_or_create("reminder", ["crashy"])
    await handle.send("reminders", {"text": "once", "at": time.time() + 300})
    sent = rig.transport.send_timer
    failures = 0

    async def dies_before_the_timer(message: WakeMessage) -> int:
        nonlocal failures
        failures += 1
        raise ConnectionError("the worker died after its commit, before its timer")

    rig.transport.send_timer = dies_before_the_timer  # type: ignore[method-assign]
    await rig.drain_wake_queue()
    assert failures == 1 and rig.worker.failures  # the deadline is committed, its timer is not
    assert (await handle.status()).waiting_for.deadline is not None
    assert await rig.timers() == 0
    rig.transport.send_timer = sent  # type: ignore[method-assign]
    deadline = time.monotonic() + 15
    while not await rig.timers():  # after the visibility timeout the message comes back (receive 2)
        assert time.monotonic() < deadline, "the failed wake-up's message never came back"
        await rig.drain_wake_queue()
        time.sleep(0.2)
    # Sent by the redelivered wake-up (each redelivered message's wake-up may send it: a spare timer is harmless).
    assert await rig.timers() >= 1
    assert all(f.receive_count == 1 for f in rig.worker.failures)


async def test_a_refreshed_copy_of_an_interrupted_wake_up_still_sends_the_timer(rig: Rig) -> None:
    """A worker killed between the deadline's commit and its timer records no error; at the next receive the
    message is refreshed (a fresh copy, receive count 1, to keep it from the DLQ). That copy counts as a
    redelivery: its wake-up sends the timer the killed one did not."""
    handle = rig.client.get_or_create("reminder", ["killed"])
    await handle.send("reminders", {"text": "once", "at": time.time() + 300})
    sent = rig.transport.send_timer
    record_error = rig.worker._record_error

    async def killed_before_the_timer(message: WakeMessage) -> int:
        raise ConnectionError("the worker was killed after its commit, before its timer")

    async def records_nothing(*args: Any, **kwargs: Any) -> None:  # a killed worker records no error
        return None

    rig.transport.send_timer = killed_before_the_timer  # type: ignore[method-assign]
    rig.worker._record_error = records_nothing  # type: ignore[method-assign]
    await rig.drain_wake_queue()
    assert (await handle.status()).waiting_for.deadline is not None and await rig.timers() == 0
    rig.transport.send_timer = sent  # type: ignore[method-assign]
    rig.worker._record_error = record_error  # type: ignore[method-assign]
    deadline = time.monotonic() + 15
    while not await rig.timers():  # receive 2 is refreshed; the copy (receive 1) wakes the actor
        assert time.monotonic() < deadline, "the refreshed copy's wake-up did not send the missing timer"
        await rig.drain_wake_queue()
        time.sleep(0.2)
    assert rig.worker.redelivery.refreshed >= 1, "the interrupted message was not refreshed"
