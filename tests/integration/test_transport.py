"""The SQS transport and the poller on a real moto server and on LocalStack, and an example end to end through
SQS -> poller -> the real worker Lambda handler -> DynamoDB, with real SQS delays and timer hops."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from aiobotocore.session import get_session  # type: ignore[import-untyped]

from dormant.client import Client
from dormant.dynamodb.store import DynamoEventStore, client_config, create_table
from dormant.ports import ActorRef
from dormant.runtime.clocks import OffsetClock, SystemClock
from dormant.runtime.service import ActorService
from dormant.settings import Settings
from dormant.sqs.poller import SqsPoller, failed_ids, queue_arn
from dormant.sqs.transport import (
    QueueUrls,
    SqsTransport,
    WakeMessage,
    create_queues,
    dedup_id,
    group_id,
    timer_delay,
)
from examples.timers import registry as timers_registry
from tests.localstack import ON_LOCALSTACK
from tests.servers import ServerProcess


def unique_settings(endpoint: str, **overrides: Any) -> Settings:
    suffix = uuid.uuid4().hex[:10]
    values: dict[str, Any] = {
        "endpoint_url": endpoint, "region": "us-east-1", "table": f"dormant-{suffix}",
        "queue_name": f"wake-{suffix}.fifo", "timer_queue_name": f"timers-{suffix}",
        "dlq_name": f"dlq-{suffix}", "fifo_dlq_name": f"dlq-{suffix}.fifo", "max_receives": 3}
    return Settings(**{**values, **overrides})


@pytest.fixture(params=["moto", pytest.param("localstack", marks=ON_LOCALSTACK)])
def endpoint(request: pytest.FixtureRequest) -> Iterator[str]:
    """The moto server, then LocalStack (whose SQS is its own implementation, not moto's)."""
    server: ServerProcess = request.getfixturevalue(f"{request.param}_server_process")
    yield server.endpoint
    server.reset()


@pytest.fixture
async def sqs(endpoint: str) -> AsyncIterator[Any]:
    async with get_session().create_client("sqs", region_name="us-east-1", endpoint_url=endpoint) as client:
        yield client


async def receive_all(sqs: Any, url: str, wait: int = 0) -> list[dict[str, Any]]:
    response = await sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=wait,
                                         MessageSystemAttributeNames=["All"])
    return list(response.get("Messages", []))


# -- pure rules --------------------------------------------------------------------------------------

def test_timer_delays_round_up_and_stop_at_the_hop_limit() -> None:
    assert timer_delay(100.2, 100.0, 900) == 1  # never early: 0.2 s becomes 1 s
    assert timer_delay(100.0, 100.0, 900) == 0
    assert timer_delay(99.0, 100.0, 900) == 0
    assert timer_delay(5000.0, 100.0, 900) == 900
    assert timer_delay(5000.0, 100.0, 2) == 2
    assert timer_delay(5000.0, 100.0, 5000) == 900  # SQS's own limit


def test_group_and_dedup_ids_fit_sqs_rules() -> None:
    short = ActorRef(name="counter", key=("a b", "x/y"))
    long = ActorRef(name="counter", key=("k" * 300,))
    assert group_id(short) == short.id
    assert len(group_id(long)) <= 128 and group_id(long) != group_id(ActorRef(name="counter", key=("k" * 301,)))
    assert dedup_id(short, "message:1") == dedup_id(short, "message:1")
    assert dedup_id(short, "message:1") != dedup_id(long, "message:1")  # a message id is scoped to its actor
    assert dedup_id(short, None) != dedup_id(short, None)


def test_batch_failures_are_read_as_lambda_reads_them() -> None:
    ids = ["m1", "m2", "m3"]
    assert failed_ids(None, ids) == []
    assert failed_ids({}, ids) == []
    assert failed_ids({"batchItemFailures": []}, ids) == []
    assert failed_ids({"batchItemFailures": [{"itemIdentifier": "m2"}]}, ids) == ["m2"]
    assert failed_ids({"batchItemFailures": [{"itemIdentifier": "nope"}]}, ids) == ids  # unknown id: all failed
    assert failed_ids({"batchItemFailures": [{"itemIdentifier": ""}]}, ids) == ids
    assert failed_ids("garbage", ids) == ids
    assert queue_arn("http://127.0.0.1:5000/123456789012/wake.fifo", "eu-west-1") == \
        "arn:aws:sqs:eu-west-1:123456789012:wake.fifo"


# -- transport on SQS ------------------------------------------------------------------------------------

async def test_wake_ups_go_to_the_fifo_queue_per_actor_and_duplicates_collapse(sqs: Any, endpoint: str) -> None:
    urls = await create_queues(sqs, unique_settings(endpoint))
    transport = SqsTransport(sqs, urls, SystemClock())
    a, b = ActorRef(name="counter", key=("a",)), ActorRef(name="counter", key=("b",))
    await transport.wake(a, reason="message:1")
    await transport.wake(a, reason="message:1")  # a re-sent message: collapses
    await transport.wake(a, reason="message:2")
    await transport.wake(b, reason="message:1")  # same message id, other actor: its own wake-up
    await transport.wake(a)  # no reason: never collapsed
    await transport.wake(a)

    received = []
    while batch := await receive_all(sqs, urls.wake):
        received += batch
        await sqs.delete_message_batch(QueueUrl=urls.wake, Entries=[
            {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(batch)])
    groups = [m["Attributes"]["MessageGroupId"] for m in received]
    assert sorted(groups) == sorted([a.id] * 4 + [b.id])
    assert {WakeMessage.model_validate_json(m["Body"]).ref for m in received} == {a, b}
    assert await receive_all(sqs, urls.timers) == []


async def test_a_timer_is_a_delayed_message_carrying_its_due_time(sqs: Any, endpoint: str) -> None:
    urls = await create_queues(sqs, unique_settings(endpoint))
    clock = SystemClock()
    transport = SqsTransport(sqs, urls, clock, max_delay=1)
    ref = ActorRef(name="counter", key=("a",))
    due = clock.now() + 3600
    await transport.wake(ref, at=due)
    await transport.wake(ref, at=clock.now() - 1)  # already due: an immediate wake-up

    attributes = (await sqs.get_queue_attributes(QueueUrl=urls.timers, AttributeNames=["All"]))["Attributes"]
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"
    assert len(await receive_all(sqs, urls.wake)) == 1
    await asyncio.sleep(1.1)  # the hop limit (1 s), not the hour: the receiver hops it on
    [timer] = await receive_all(sqs, urls.timers, wait=1)
    assert WakeMessage.model_validate_json(timer["Body"]) == WakeMessage(actor="counter", key=["a"], due=due)


# -- the poller ------------------------------------------------------------------------------------------

async def test_the_poller_deletes_only_what_the_handler_did_not_fail(sqs: Any, endpoint: str) -> None:
    urls = await create_queues(sqs, unique_settings(endpoint), visibility_timeout=1)
    for n in range(3):
        await sqs.send_message(QueueUrl=urls.timers, MessageBody=json.dumps({"n": n}))
    seen: list[dict[str, Any]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:  # sync, like Lambda: runs in a thread
        assert context.get_remaining_time_in_millis() > 0
        seen.extend(event["Records"])
        return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in event["Records"]
                                      if json.loads(r["body"])["n"] == 1]}

    poller = SqsPoller(sqs, urls.timers, handler, wait_seconds=0)
    received = 0
    while received < 3:
        result = await poller.poll_once()
        received += len(result.message_ids) if result else 0
    assert {r["eventSource"] for r in seen} == {"aws:sqs"}
    assert {r["eventSourceARN"] for r in seen} == {queue_arn(urls.timers, "us-east-1")}
    failed = [r for r in seen if json.loads(r["body"])["n"] == 1]
    assert len(failed) == 1 and sum(len(r.deleted) for r in poller.results) == 2

    await asyncio.sleep(1.1)  # the failed message comes back after the visibility timeout, received twice now
    [again] = await receive_all(sqs, urls.timers, wait=1)
    assert json.loads(again["Body"]) == {"n": 1}
    assert again["Attributes"]["ApproximateReceiveCount"] == "2"


async def test_a_crashed_invocation_deletes_nothing(sqs: Any, endpoint: str) -> None:
    urls = await create_queues(sqs, unique_settings(endpoint), visibility_timeout=1)
    await sqs.send_message(QueueUrl=urls.timers, MessageBody="{}")

    async def crashing(event: dict[str, Any], context: Any) -> dict[str, Any]:
        raise RuntimeError("the function timed out")

    poller = SqsPoller(sqs, urls.timers, crashing, wait_seconds=1)
    result = await poller.poll_once()
    assert result is not None and result.deleted == [] and isinstance(result.error, RuntimeError)
    await asyncio.sleep(1.1)
    assert len(await receive_all(sqs, urls.timers, wait=1)) == 1


# -- end to end: SQS -> poller -> functions/worker/handler.py -> DynamoDB -----------------------------------

async def test_reminders_fire_on_time_through_sqs_delays_and_timer_hops(
        endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = unique_settings(endpoint, timer_hop_max_delay=2)
    session = get_session()
    async with session.create_client("dynamodb", config=client_config(), **settings.client_kwargs()) as dynamodb, \
            session.create_client("sqs", **settings.client_kwargs()) as sqs:
        await create_table(dynamodb, settings)
        urls = await create_queues(sqs, settings, visibility_timeout=5)
        for name, value in {"DORMANT_APP": "examples.timers:registry", "DORMANT_TABLE": settings.table,
                            "DORMANT_QUEUE_URL": urls.wake, "DORMANT_TIMER_QUEUE_URL": urls.timers,
                            "DORMANT_TIMER_HOP_MAX_DELAY": "2", "AWS_ENDPOINT_URL": endpoint}.items():
            monkeypatch.setenv(name, value)
        from dormant.aws.clients import function_settings
        from dormant.aws.worker import LambdaWorker
        from functions.worker import handler as lambda_module

        # A fresh container: the module's worker took its settings from the environment when it was first imported
        # (another endpoint's, when this test ran on the other server first).
        monkeypatch.setattr(lambda_module, "worker", LambdaWorker(settings=function_settings(),
                                                                  observer=lambda_module.telemetry.observer))
        pollers = [SqsPoller(sqs, url, lambda_module.handler, wait_seconds=1) for url in (urls.wake, urls.timers)]
        tasks = [asyncio.create_task(p.run()) for p in pollers]
        try:
            clock = SystemClock()
            service = ActorService(timers_registry, DynamoEventStore(dynamodb, settings),
                                   SqsTransport(sqs, urls, clock), clock)
            handle = Client(service).get_or_create("reminder", ["e2e"])
            start = clock.now()
            # 2 s: one SQS delay; then 7.5 s more, over the 2 s limit even after LocalStack shows the first delay a
            # second late (its ~1 s tick): a 2 s hop from up to +3 s is seen by +6 s, still before the call's time.
            due = {"tea": start + 2, "call": start + 9.5}
            for text, at in due.items():
                await handle.send("reminders", {"text": text, "at": at})
            fired_at: dict[str, float] = {}
            while len(fired_at) < 2 and clock.now() < start + 20:
                for text in (await handle.get_state()).fired:
                    fired_at.setdefault(text, clock.now())
                await asyncio.sleep(0.05)
        finally:
            for poller in pollers:
                poller.stop()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            worker = lambda_module.worker.worker
            await asyncio.to_thread(lambda_module.worker.close)

        assert list(fired_at) == ["tea", "call"]
        for text, at in due.items():
            assert at <= fired_at[text] < at + 3, f"{text} fired {fired_at[text] - at:+.2f} s from its time"
        assert worker is not None and worker.hops >= 1  # the long wait went through at least one hop
        assert worker.failures == []
        status = await handle.status()
        assert (status.workflow, status.waiting_for.queues) == ("sleeping", ["reminders"])
        assert [e.location for e in await handle.history() if e.kind == "sleep"][-1].endswith("wait-until-reminder")


async def test_the_queues_redrive_to_their_dead_letter_queues(sqs: Any, endpoint: str) -> None:
    urls = await create_queues(sqs, unique_settings(endpoint, max_receives=2))
    assert isinstance(urls, QueueUrls) and urls.wake_dlq and urls.timers_dlq
    for url, dlq in ((urls.wake, urls.wake_dlq), (urls.timers, urls.timers_dlq)):
        attributes = (await sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]))["Attributes"]
        policy = json.loads(attributes["RedrivePolicy"])
        dlq_arn = (await sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"]))["Attributes"]
        assert policy == {"deadLetterTargetArn": dlq_arn["QueueArn"], "maxReceiveCount": 2}
    assert urls.wake.endswith(".fifo") and urls.wake_dlq.endswith(".fifo") and not urls.timers_dlq.endswith(".fifo")


def test_offset_clock_only_moves_forward() -> None:
    clock = OffsetClock()
    before = clock.now()
    clock.advance(3600)
    assert clock.now() >= before + 3600
    with pytest.raises(ValueError):
        clock.advance(-1)
    assert time.time() + 3599 < clock.now()
