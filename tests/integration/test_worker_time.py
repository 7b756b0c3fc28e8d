"""Wake-ups that take long stay owned (issue 9): the worker reads its invocation's remaining time, starts no
wake-up too close to the end and gives each the rest as its budget; a wake-up longer than the visibility
timeout keeps its message invisible; a poison message reaches the DLQ after the configured receives, within
seconds here (minutes with the deployed timings), carrying the actor, error type and message."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from pydantic import BaseModel

from dormant import StepContext, WorkflowContext, actor, queue, setup
from dormant.aws import worker as worker_module
from dormant.aws.redelivery import backoff_seconds
from dormant.aws.worker import open_worker
from dormant.settings import Settings
from dormant.sqs.poller import LambdaContext, SqsPoller
from tests.aws_env import AwsTestEnv
from tests.integration.test_worker import poison_registry


class SlowState(BaseModel):
    runs: int = 0


slow = actor("slow", state=SlowState, queues={"go": queue(float)})


@slow.workflow
async def run_slow(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        seconds = (await loop.queue.next("wait-go")).body

        async def work(s: StepContext) -> None:
            s.state.runs += 1
            await asyncio.sleep(seconds)

        await loop.step("work", work)

    await ctx.loop("slow-loop", iteration)


slow_registry = setup(slow)


def test_the_pollers_lambda_context_counts_down() -> None:
    began = time.monotonic()
    context = LambdaContext(timeout_ms=2_000)
    first = context.get_remaining_time_in_millis()
    counted = (time.monotonic() - began) * 1000  # however slow the machine: the countdown counts only what passed
    time.sleep(0.3)  # 300 ms pass (a sleep lasts at least that long)
    second = context.get_remaining_time_in_millis()
    assert 2_000 - counted - 1 <= first <= 2_000 and first - second >= 299
    assert LambdaContext(timeout_ms=10, started=time.monotonic() - 1).get_remaining_time_in_millis() == 0


async def test_a_wake_up_longer_than_the_visibility_timeout_is_delivered_once(stack_endpoints: dict[str, str]) -> None:
    async with AwsTestEnv(slow_registry, settings=Settings(**stack_endpoints), visibility_timeout=1,
                          autorun=True) as env:
        handle = env.client.get_or_create("slow", ["s"])
        await handle.status()
        await env.run_until_idle()
        wake_ups_before = len(env.reports)
        await handle.send("go", 3.5)  # 3.5 times the visibility timeout
        await env.run_until_idle()
        assert (await handle.state()).runs == 1
        received = sum(len(result.message_ids) for poller in env.pollers for result in poller.results)
        assert len(env.reports) - wake_ups_before == 1 and env.failures == []
        assert env.worker.redelivery.extended >= 3  # kept invisible, about every third of a second
        assert received == 2  # the create wake-up and the message's: nothing delivered twice


async def test_no_wake_up_starts_in_the_last_seconds_of_an_invocation(stack_endpoints: dict[str, str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    budgets: list[float | None] = []
    real_wake = worker_module.wake_actor

    async def recording(service: Any, ref: Any, **kwargs: Any) -> Any:
        budgets.append(kwargs.get("budget"))
        return await real_wake(service, ref, **kwargs)

    monkeypatch.setattr(worker_module, "wake_actor", recording)
    settings = Settings(**stack_endpoints, worker_reserve_seconds=5.0)
    async with AwsTestEnv(slow_registry, settings=settings, visibility_timeout=30) as env:
        handle = env.client.get_or_create("slow", ["t"])
        await handle.send("go", 0.0)
        poller = SqsPoller(env._sqs, env.urls.wake, env.worker.handle, wait_seconds=1, function_timeout=4.0)
        result = await poller.poll_once()  # 4 s left, 5 s reserved: handed back unstarted
        assert result is not None and result.failed == result.message_ids and result.deleted == []
        assert env.worker.deferred == len(result.message_ids) and budgets == []
        again = SqsPoller(env._sqs, env.urls.wake, env.worker.handle, wait_seconds=1, function_timeout=60.0)
        retried = await again.poll_once()  # back at once (visibility 0), not after the 30 s timeout
        assert retried is not None and retried.failed == [] and set(retried.message_ids) == set(result.message_ids)
        # (Received twice without failing, it is replaced by a fresh wake-up rather than run: see the refresh test.)
        started = time.monotonic()
        while (await handle.state()).runs == 0:
            assert time.monotonic() - started < 20
            await again.poll_once()
        assert len(budgets) == 1 and budgets[0] is not None and 50 < budgets[0] <= 55  # 60 s - 5 s reserved


async def test_a_poison_message_reaches_the_dlq_with_its_reason_in_seconds(stack_endpoints: dict[str, str]) -> None:
    settings = Settings(**stack_endpoints, wake_retry_base=0.3, wake_retry_max=2)
    async with AwsTestEnv(poison_registry, settings=settings, max_receives=3, visibility_timeout=30) as env:
        handle = env.client.get_or_create("fragile", ["p"])
        started = time.monotonic()
        await handle.status()  # creates the actor: its wake-up fails on every receive (on_wake raises)
        assert env.urls.wake_dlq is not None
        async with env.running():
            for _ in range(300):
                if (await env.queue_counts(env.urls.wake_dlq))["visible"]:
                    break
                await asyncio.sleep(0.05)
        took = time.monotonic() - started
        assert took < 15  # backoffs 0.3 + 0.6 s here; the queue's 30 s visibility timeout never waited for
        response = await env._sqs.receive_message(QueueUrl=env.urls.wake_dlq, MessageAttributeNames=["All"])
        [dead] = response["Messages"]
        attributes = {name: value["StringValue"] for name, value in dead["MessageAttributes"].items()}
        assert attributes["dormant-actor"] == handle.ref.id and attributes["dormant-actor-type"] == "fragile"
        assert attributes["dormant-error-type"] == "RuntimeError"
        assert attributes["dormant-error-message"] == "boom: the session cannot be opened"
        assert attributes["dormant-receives"] == "3"
        assert json.loads(dead["Body"])["actor"] == "fragile"  # the wake-up itself, to redrive after a fix
        assert env.worker.redelivery.moved == 1
        assert await env.queue_counts(env.urls.wake) == {"visible": 0, "in_flight": 0, "delayed": 0}
        status = await handle.status()
        assert status.error is not None and "boom" in status.error


def test_deployed_timings_reach_the_dlq_in_minutes() -> None:
    settings = Settings()  # what template.yaml and infra/ leave at their defaults
    waits = [backoff_seconds(n, settings.wake_retry_base, settings.wake_retry_max)
             for n in range(1, settings.max_receives)]
    assert sum(waits) <= 180, waits  # (the queue's 360 s visibility timeout only applies to crashed workers)


async def test_messages_that_ran_out_of_receives_without_failing_are_refreshed(stack_endpoints: dict[str, str]) -> None:
    """A worker killed while holding a message uses up a receive each time; on the last one, a wake-up that
    never failed by the actor's own error is re-sent fresh instead of reaching the DLQ."""
    # The "worker" that dies holds the message for 1 s; the one after it gets the queue's 30 s. With 1 s for both,
    # a busy machine's wake-up outlasted it and the delete came too late: a FIFO queue refuses an expired receipt
    # handle (AWS and LocalStack do; moto deletes anyway), the message came back and went to the DLQ.
    async with AwsTestEnv(slow_registry, settings=Settings(**stack_endpoints), max_receives=2,
                          visibility_timeout=30) as env:
        handle = env.client.get_or_create("slow", ["r"])
        await handle.send("go", 0.0)
        for _ in range(1):  # received, then the "worker" dies without answering: the receive is spent
            for _ in range(60):
                if (await env._sqs.receive_message(QueueUrl=env.urls.wake, MaxNumberOfMessages=10,
                                                   VisibilityTimeout=1)).get("Messages"):
                    break
                await asyncio.sleep(0.1)
        await asyncio.sleep(1.2)
        async with open_worker(env.settings, slow_registry) as worker:
            poller = SqsPoller(env._sqs, env.urls.wake, worker.handle, wait_seconds=1)
            result = None
            for _ in range(30):
                result = await poller.poll_once()
                if result is not None:
                    break
            assert result is not None and result.failed == []  # deleted: a fresh copy went back
            assert worker.redelivery.refreshed == len(result.message_ids)
        await env.run_until_idle()
        assert (await handle.state()).runs == 1
        assert env.urls.wake_dlq is not None and (await env.queue_counts(env.urls.wake_dlq))["visible"] == 0
