"""The worker Lambda on real servers: SQS on moto, the event store on moto or dynalite.

Proves: concurrent invocations for one actor commit each version once and lose nothing; a message delivered
twice, or redelivered after a crash between commit and delete, is consumed once; a crash before or after
any storage call (EventStore call or DynamoDB request) of a wake-up ends in the fault-free final state;
a poison message ends in the DLQ with its error on the actor's status; AwsTestEnv runs examples.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from aiobotocore.session import get_session  # type: ignore[import-untyped]
from pydantic import BaseModel

from dormant import StepContext, WorkflowContext, actor, queue, setup
from dormant.actor import Registry
from dormant.aws.metering import Meter
from dormant.aws.worker import LambdaWorker, Worker, open_worker
from dormant.client import Client
from dormant.dynamodb.store import DynamoEventStore, client_config, create_table
from dormant.errors import StorageError, VersionConflict, WakeFailedError
from dormant.ports import ActorRef, EventStore
from dormant.runtime.attention import attention_list
from dormant.runtime.clocks import SystemClock
from dormant.runtime.service import ActorService
from dormant.settings import Settings
from dormant.sqs.poller import SqsPoller, lambda_event
from dormant.sqs.transport import QueueUrls, SqsTransport, WakeMessage, create_queues
from examples.counter import registry as counter_registry
from examples.request_response import registry as doubler_registry
from examples.timers import registry as timers_registry
from tests.aws_env import AwsTestEnv
from tests.localstack import ON_LOCALSTACK
from tests.servers import DynamoDBLocal, MotoServer

STORE_CALLS = frozenset({"create", "exists", "load", "commit", "enqueue", "wait_response", "read_events",
                         "wait_events", "record_wake_error"})


class InjectedCrash(StorageError):
    """The fault a test asked for."""


# -- fixtures ------------------------------------------------------------------------------------------

@dataclass
class Aws:
    """SQS on moto, the store on `server`; clients for the test side (the worker makes its own)."""

    settings: Settings
    dynamodb: Any
    sqs: Any
    urls: QueueUrls
    store: DynamoEventStore
    server: str

    def service(self, registry: Registry, store: EventStore | None = None) -> ActorService:
        clock = SystemClock()
        return ActorService(registry, store or self.store, SqsTransport(self.sqs, self.urls, clock), clock)


@pytest.fixture
def servers(moto_server_process: MotoServer, dynamodb_local_server_process: DynamoDBLocal
            ) -> Iterator[dict[str, str]]:
    yield {"moto": moto_server_process.endpoint, "dynamodb_local": dynamodb_local_server_process.endpoint}
    moto_server_process.reset()
    dynamodb_local_server_process.reset()


async def open_aws(servers: dict[str, str], store_server: str, **overrides: Any) -> AsyncIterator[Aws]:
    suffix = uuid.uuid4().hex[:10]
    settings = Settings(**{
        "endpoint_url": servers["moto"], "dynamodb_endpoint_url": servers[store_server], "region": "us-east-1",
        "table": f"dormant-{suffix}", "queue_name": f"wake-{suffix}.fifo", "timer_queue_name": f"timers-{suffix}",
        "dlq_name": f"dlq-{suffix}", "fifo_dlq_name": f"dlq-{suffix}.fifo", "max_receives": 3, **overrides})
    session = get_session()
    async with session.create_client("dynamodb", config=client_config(),
                                     **settings.client_kwargs("dynamodb")) as dynamodb, \
            session.create_client("sqs", **settings.client_kwargs("sqs")) as sqs:
        await create_table(dynamodb, settings)
        urls = await create_queues(sqs, settings, visibility_timeout=1)
        settings = settings.model_copy(update={"queue_url": urls.wake, "timer_queue_url": urls.timers})
        yield Aws(settings, dynamodb, sqs, urls, DynamoEventStore(dynamodb, settings), store_server)


@pytest.fixture(params=["dynamodb_local", "moto", "dynamodb_local-threads",
                        pytest.param("localstack-threads", marks=ON_LOCALSTACK)])
async def aws(request: pytest.FixtureRequest, servers: dict[str, str]) -> AsyncIterator[Aws]:
    """DynamoDB on DynamoDB Local or moto (SQS on moto); `-threads`: the worker's clients are botocore's in threads
    (the Lambda functions' kind, dormant.aws.clients), the test side's stay aiobotocore's; `localstack-threads`: the
    same on LocalStack (its SQS and, behind its gateway, DynamoDB Local). (dynalite, a third DynamoDB without SQS,
    runs the store's own tests: tests/contract/.)"""
    server, _, kind = request.param.partition("-")
    if server == "localstack":
        localstack = request.getfixturevalue("localstack_server_process")
        servers = {**servers, "moto": localstack.endpoint, "localstack": localstack.endpoint}
    async for opened in open_aws(servers, server, aws_clients=kind or "aiobotocore"):
        yield opened
    if server == "localstack":
        localstack.reset()


@pytest.fixture
async def aws_moto(servers: dict[str, str]) -> AsyncIterator[Aws]:
    async for opened in open_aws(servers, "moto", max_receives=2):
        yield opened


class ObservedStore:
    """Delegates to a store, calling `before(name, n)` / `after(name, n, result)` around each EventStore call."""

    def __init__(self, inner: EventStore, *, before: Callable[[str, int], None] | None = None,
                 after: Callable[[str, int, Any], None] | None = None,
                 failed: Callable[[str, BaseException], None] | None = None) -> None:
        self.inner = inner
        self.before = before
        self.after = after
        self.failed = failed
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if name not in STORE_CALLS:
            return attribute

        async def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.calls.append(name)
                number = len(self.calls)
            if self.before is not None:
                self.before(name, number)
            try:
                result = await attribute(*args, **kwargs)
            except Exception as error:
                if self.failed is not None:
                    self.failed(name, error)
                raise
            if self.after is not None:
                self.after(name, number, result)
            return result

        return call


def wake_event(ref: ActorRef, *, message_id: str | None = None, receive_count: int = 1) -> dict[str, Any]:
    """A Lambda SQS event with one wake-up record for `ref` (as the event source would deliver it)."""
    message = {"MessageId": message_id or str(uuid.uuid4()), "ReceiptHandle": "handle",
               "Body": WakeMessage.for_ref(ref).model_dump_json(exclude_defaults=True),
               "Attributes": {"ApproximateReceiveCount": str(receive_count)}}
    return lambda_event([message], arn="arn:aws:sqs:us-east-1:123456789012:wake.fifo", region="us-east-1")


async def redeliver_until_done(worker: Worker, event: dict[str, Any], limit: int = 10) -> int:
    """Deliver `event` again while the worker reports it failed, as SQS would; returns the deliveries."""
    for delivery in range(1, limit + 1):
        response = await worker.handle(event)
        if not response["batchItemFailures"]:
            return delivery
    raise AssertionError(f"still failing after {limit} deliveries")


# -- (b) two invocations for one actor at the same moment ---------------------------------------------

async def test_two_invocations_for_one_actor_commit_each_version_once(aws: Aws) -> None:
    handle = Client(aws.service(counter_registry)).get_or_create("workflow-counter", [f"race-{aws.server}"])
    for delta in (1, 10):
        await handle.send("counter", {"delta": delta})
    committed: list[int] = []
    conflicts: list[str] = []
    barrier = threading.Barrier(2, timeout=10)
    first_load: set[int] = set()

    def after(name: str, number: int, result: Any) -> None:
        if name == "commit":
            committed.append(result)
        if name == "load" and threading.get_ident() not in first_load:
            first_load.add(threading.get_ident())
            barrier.wait()  # both invocations have read the same version: now they race to commit it

    def failed(name: str, error: BaseException) -> None:
        if isinstance(error, VersionConflict):
            conflicts.append(name)

    def observing(store: EventStore) -> EventStore:
        return ObservedStore(store, after=after, failed=failed)  # type: ignore[return-value]

    workers = [LambdaWorker(settings=aws.settings, registry=counter_registry, wrap_store=observing) for _ in "ab"]
    try:
        responses = await asyncio.gather(*(asyncio.to_thread(w, wake_event(handle.ref), None) for w in workers))
    finally:
        await asyncio.gather(*(asyncio.to_thread(w.close) for w in workers))

    assert responses == [{"batchItemFailures": []}] * 2
    state = await handle.get_state()
    assert (state.value, state.processed) == (11, 2)  # both messages applied, each once
    assert conflicts, "the two invocations did not race"
    assert sorted(committed) == list(range(2, max(committed) + 1))  # every version committed exactly once
    assert (await handle.status()).version == max(committed)
    snapshot = await aws.store.load(handle.ref)
    assert snapshot is not None and snapshot.inbox == []


# -- (c) duplicate delivery, and a crash between commit and SQS delete -------------------------------

async def test_the_same_message_delivered_twice_is_consumed_once(aws: Aws) -> None:
    handle = Client(aws.service(doubler_registry)).get_or_create("request-response", [f"dup-{aws.server}"])
    sent = await handle.send("requests", {"value": 21}, message_id="req-1")
    again = await handle.send("requests", {"value": 21}, message_id="req-1")  # a client retry: same id
    assert (sent.id, again.id) == ("req-1", "req-1")
    event = wake_event(handle.ref, message_id="sqs-1")
    async with open_worker(aws.settings, doubler_registry) as worker:
        assert await worker.handle(event) == {"batchItemFailures": []}
        assert await worker.handle(event) == {"batchItemFailures": []}  # SQS delivered it again
        await asyncio.gather(worker.handle(event), worker.handle(event))  # and twice more at once
    assert (await handle.get_state()).handled == 1
    assert await aws.store.wait_response(handle.ref, "req-1", 0.1) == (True, {"doubled": 42})


async def test_a_crash_between_commit_and_sqs_delete_consumes_once(aws: Aws) -> None:
    handle = Client(aws.service(doubler_registry)).get_or_create("request-response", [f"crash-{aws.server}"])
    async with open_worker(aws.settings, doubler_registry) as worker:
        crashes = 0

        async def crash_after_commit(event: dict[str, Any], context: Any) -> Any:
            nonlocal crashes
            response = await worker.handle(event, context)
            if crashes == 0:
                crashes += 1
                raise RuntimeError("the container died before the event source deleted the batch")
            return response

        poller = SqsPoller(aws.sqs, aws.urls.wake, crash_after_commit, wait_seconds=1)
        result = await handle.send("requests", {"value": 4}, message_id="req-9")
        first = await poller.poll_once()
        assert first is not None and first.deleted == [] and len(worker.reports) == 1
        assert (await handle.get_state()).handled == 1  # committed before the crash
        deleted: list[str] = []
        for _ in range(40):  # redelivered after the 1 s visibility timeout
            batch = await poller.poll_once()
            deleted += batch.deleted if batch else []
            counts = (await aws.sqs.get_queue_attributes(QueueUrl=aws.urls.wake, AttributeNames=["All"]))
            if deleted and counts["Attributes"]["ApproximateNumberOfMessages"] == "0" and \
                    counts["Attributes"]["ApproximateNumberOfMessagesNotVisible"] == "0":
                break
        assert set(first.message_ids) <= set(deleted)
    assert (await handle.get_state()).handled == 1
    assert await aws.store.wait_response(handle.ref, result.id, 0.1) == (True, {"doubled": 8})
    assert len(worker.reports) >= 2  # it really was woken again


# -- (d) a crash before and after each storage call ---------------------------------------------------

Fault = tuple[Literal["store", "request"], int, Literal["before", "after"]]


@dataclass
class FaultRun:
    fault: Fault | None
    fired: list[Fault] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {"store": 0, "request": 0})


class FaultInjector:
    """Crashes the worker's Nth EventStore call or Nth DynamoDB request of a run, before or after it.

    Each run is a task with its own counts (a ContextVar), so runs for different actors go concurrently."""

    def __init__(self) -> None:
        self.run: ContextVar[FaultRun | None] = ContextVar("fault_run", default=None)

    def counts(self) -> dict[str, int]:
        run = self.run.get()
        return run.counts if run is not None else {"store": 0, "request": 0}

    def crash(self, level: Literal["store", "request"], number: int, when: Literal["before", "after"]) -> None:
        run = self.run.get()
        if run is not None and run.fault == (level, number, when):
            run.fired.append(run.fault)
            raise InjectedCrash(f"crash {when} {level} call {number}")

    def wrap(self, store: EventStore) -> EventStore:
        def before(_: str, __: int) -> None:
            counts = self.counts()
            counts["store"] += 1
            self.crash("store", counts["store"], "before")

        def after(_: str, __: int, ___: Any) -> None:
            self.crash("store", self.counts()["store"], "after")

        client = store.client  # type: ignore[attr-defined]
        client.meta.events.register("before-call.dynamodb", self._before_request)
        client.meta.events.register("after-call.dynamodb", self._after_request)
        return ObservedStore(store, before=before, after=after)  # type: ignore[return-value]

    def _before_request(self, context: dict[str, Any], **_: Any) -> None:
        counts = self.counts()
        counts["request"] += 1
        context["fault-number"] = counts["request"]  # requests of one load may run concurrently
        self.crash("request", counts["request"], "before")

    def _after_request(self, context: dict[str, Any], **_: Any) -> None:
        self.crash("request", context["fault-number"], "after")


async def run_with_fault(aws: Aws, worker: Worker, faults: FaultInjector, key: str,
                         fault: Fault | None) -> tuple[dict[str, Any], dict[str, int]]:
    """Send a request, deliver the wake-up until it succeeds; returns the final state and the calls made."""
    handle = Client(aws.service(doubler_registry)).get_or_create("request-response", [key])
    await handle.send("requests", {"value": 5}, message_id="m1")
    run = FaultRun(fault)
    token = faults.run.set(run)
    try:
        await redeliver_until_done(worker, wake_event(handle.ref))
    finally:
        faults.run.reset(token)
    assert fault is None or run.fired == [fault], f"fault {fault} never fired"
    snapshot = await aws.store.load(handle.ref)
    assert snapshot is not None
    return {
        "state": snapshot.state, "inbox": snapshot.inbox, "workflow": snapshot.workflow.model_dump(),
        "history": sorted((e.location, e.kind, e.status, repr(e.output)) for e in snapshot.history),
        "response": await aws.store.wait_response(handle.ref, "m1", 0.05),
    }, run.counts


async def test_a_crash_around_any_storage_call_ends_in_the_fault_free_state(aws: Aws) -> None:
    faults = FaultInjector()
    async with open_worker(aws.settings, doubler_registry, wrap_store=faults.wrap) as worker:
        # botocore's clients in threads: requests made on the loop's thread, as a Lambda container's worker makes them
        # (no server runs on this loop; the runs' own concurrency only waits on each other)
        worker.loop_owned = aws.settings.aws_clients == "threads"
        baseline, calls = await run_with_fault(aws, worker, faults, "baseline", None)
        assert (baseline["state"], baseline["inbox"]) == ({"handled": 1}, [])
        assert baseline["response"] == (True, {"doubled": 10})
        assert calls["store"] >= 3 and calls["request"] >= 5, f"too few calls to prove anything: {calls}"
        plan: list[Fault] = [(level, number, when) for level in ("store", "request")  # type: ignore[misc]
                             for number in range(1, calls[level] + 1) for when in ("before", "after")]
        gate = asyncio.Semaphore(8)

        async def one(fault: Fault) -> tuple[Fault, dict[str, Any]]:
            async with gate:
                return fault, (await run_with_fault(aws, worker, faults, "-".join(map(str, fault)), fault))[0]

        for fault, observation in await asyncio.gather(*(asyncio.create_task(one(f)) for f in plan)):
            assert observation == baseline, f"{fault}: the final state differs"


# -- (e) a poison message --------------------------------------------------------------------------------

class FragileState(BaseModel):
    opened: int = 0


fragile = actor("fragile", state=FragileState, queues={"jobs": queue(FragileState)})


@fragile.on_wake
def refuse(c: Any) -> None:
    raise RuntimeError("boom: the session cannot be opened")


@fragile.workflow
async def fragile_run(ctx: WorkflowContext) -> None:
    await ctx.queue.next("wait-job")


sturdy = actor("sturdy", state=FragileState, queues={"jobs": queue(FragileState)})


@sturdy.workflow
async def sturdy_run(ctx: WorkflowContext) -> None:
    message = await ctx.queue.next("wait-job")

    def record(s: StepContext) -> None:
        s.state.opened = message.body.opened

    await ctx.step("record", record)


poison_registry = setup(fragile, sturdy)


async def test_a_failing_actor_fails_only_its_own_messages(aws_moto: Aws) -> None:
    client = Client(aws_moto.service(poison_registry))
    bad, good = client.get_or_create("fragile", ["x"]), client.get_or_create("sturdy", ["y"])
    await bad.send("jobs", {"opened": 1})
    await good.send("jobs", {"opened": 7})
    records = wake_event(bad.ref, message_id="bad")["Records"] + wake_event(good.ref, message_id="good")["Records"]
    async with open_worker(aws_moto.settings, poison_registry) as worker:
        response = await worker.handle({"Records": records})
    assert response == {"batchItemFailures": [{"itemIdentifier": "bad"}]}
    assert (await good.state()).opened == 7
    assert "boom: the session cannot be opened" in str((await bad.status()).error)
    # the failed wake-up marks the actor for the dashboard's attention list, which confirms it on its status
    marks = (await aws_moto.store.list_attention("fragile")).marks
    assert [(m.key, m.reason) for m in marks] == [(("x",), "wake_error")]
    found = await attention_list(poison_registry, aws_moto.store, "fragile", limit=10)
    assert [(a.key, a.reason) for a in found.actors] == [(["x"], "wake_error")]
    assert "boom: the session cannot be opened" in str(found.actors[0].detail)
    assert (await aws_moto.store.list_attention("sturdy")).marks == []


async def test_a_warm_container_keeps_only_the_current_invocations_records(aws_moto: Aws) -> None:
    """A Lambda container runs invocation after invocation: the worker's reports, failures and metrics must not
    grow with each one (they did: one of each per wake-up, for the container's life)."""
    client = Client(aws_moto.service(poison_registry))
    bad = client.get_or_create("fragile", ["warm-x"])
    lambda_worker = LambdaWorker(settings=aws_moto.settings, registry=poison_registry)
    try:
        for n in range(3):
            good = client.get_or_create("sturdy", [f"warm-y{n}"])  # (a sturdy actor completes after a message)
            await good.send("jobs", {"opened": n})
            await bad.send("jobs", {"opened": n})
            records = (wake_event(good.ref, message_id=f"good-{n}")["Records"]
                       + wake_event(bad.ref, message_id=f"bad-{n}")["Records"])
            response = await asyncio.to_thread(lambda_worker, {"Records": records}, None)
            assert response == {"batchItemFailures": [{"itemIdentifier": f"bad-{n}"}]}
            worker = lambda_worker.worker
            assert worker is not None
            assert [r.ref.key for r in worker.reports] == [(f"warm-y{n}",)]  # this invocation's, not all so far
            assert [f.ref.key for f in worker.failures] == [("warm-x",)]
            assert len(worker.metrics) == 2
    finally:
        await asyncio.to_thread(lambda_worker.close)


async def test_a_worker_reuses_an_actors_ref_and_still_refuses_an_invalid_key(aws_moto: Aws,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The wake-ups of one actor share one ActorRef (made, and its key validated, once per worker); a message whose
    key is invalid still fails alone; past REFS_KEPT the worker forgets its refs and makes them again."""
    import dormant.aws.worker as worker_module

    monkeypatch.setattr(worker_module, "REFS_KEPT", 2)
    refs = [ActorRef(name="workflow-counter", key=(f"refs-{n}",)) for n in range(3)]
    bad = wake_event(refs[0], message_id="bad")["Records"][0]
    bad["body"] = json.dumps({"actor": "workflow-counter", "key": []})
    async with open_worker(aws_moto.settings, counter_registry) as worker:
        for ref in (refs[0], refs[0], refs[1]):
            event = wake_event(ref, message_id=str(uuid.uuid4()))
            assert await worker.handle({"Records": [bad, *event["Records"]]}) == {
                "batchItemFailures": [{"itemIdentifier": "bad"}]}
        first, again, other = (report.ref for report in worker.reports)
        assert first is again and first == refs[0] and other == refs[1] and other is not first
        await worker.handle(wake_event(refs[2]))  # a third actor: the two kept are forgotten
        await worker.handle(wake_event(refs[0]))
        assert worker.reports[-1].ref == refs[0] and worker.reports[-1].ref is not first


class CallThreads(Counter[str]):
    """A Meter's `calls`, also noting which thread asked for each call (the metering hook runs in the thread that
    makes the request: the event loop's, or a pool thread's)."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[tuple[str, int]] = []

    def __setitem__(self, operation: str, count: int) -> None:
        self.threads.append((operation, threading.get_ident()))
        super().__setitem__(operation, count)


async def test_a_one_actor_batch_makes_its_requests_on_the_loop_thread_in_threads_mode(servers: dict[str, str]
                                                                                        ) -> None:
    """With botocore's clients in threads (the Lambda functions'), a batch of one actor's messages makes its DynamoDB
    requests on the event loop's thread where the worker owns its loop (dormant.core.clients.inline_calls: no pool
    hand-off per request, the load's two reads one after the other); a batch of two actors' overlaps its requests in
    the pool, and so does a worker that shares its loop. All process their messages. LambdaWorker owns its loop."""
    async for aws in open_aws(servers, "dynamodb_local", aws_clients="threads"):
        client = Client(aws.service(counter_registry))
        one, other = client.get_or_create("workflow-counter", ["inline-a"]), client.get_or_create(
            "workflow-counter", ["inline-b"])
        for handle in (one, other):
            await handle.send("counter", {"delta": 2})
        here = threading.get_ident()
        calls = CallThreads()
        async with open_worker(aws.settings, counter_registry, meter=Meter(calls=calls)) as worker:
            assert await worker.handle(wake_event(one.ref)) == {"batchItemFailures": []}
            shared = [thread == here for operation, thread in calls.threads if operation.startswith("dynamodb.")]
            calls.threads.clear()
            await one.send("counter", {"delta": 1})
            worker.loop_owned = True  # (as LambdaWorker's: these servers run in processes of their own)
            assert await worker.handle(wake_event(one.ref)) == {"batchItemFailures": []}
            alone = [(operation, thread == here) for operation, thread in calls.threads
                     if operation.startswith("dynamodb.")]
            calls.threads.clear()
            await one.send("counter", {"delta": 3})
            records = wake_event(one.ref)["Records"] + wake_event(other.ref)["Records"]
            assert await worker.handle({"Records": records}) == {"batchItemFailures": []}
            together = [(operation, thread == here) for operation, thread in calls.threads
                        if operation.startswith("dynamodb.")]
        assert shared and not any(shared)
        assert ("dynamodb.PutItem", True) in alone and ("dynamodb.Query", True) in alone  # a commit, a load
        assert all(on_loop for _, on_loop in alone)
        assert together and not any(on_loop for _, on_loop in together)
        assert (await one.get_state()).value == 6 and (await other.get_state()).value == 2
        lambda_worker = LambdaWorker(settings=aws.settings, registry=counter_registry)
        try:
            await one.send("counter", {"delta": 1})
            assert await asyncio.to_thread(lambda_worker, wake_event(one.ref), None) == {"batchItemFailures": []}
            assert lambda_worker.worker is not None and lambda_worker.worker.loop_owned
        finally:
            await asyncio.to_thread(lambda_worker.close)
        assert (await one.get_state()).value == 7


async def test_a_poison_message_ends_in_the_dlq_and_its_error_shows_on_status(servers: dict[str, str]) -> None:
    settings = Settings(endpoint_url=servers["moto"], dynamodb_endpoint_url=servers["dynamodb_local"],
                        region="us-east-1")
    async with AwsTestEnv(poison_registry, settings=settings, max_receives=2, visibility_timeout=1) as env:
        handle = env.client.get_or_create("fragile", ["poison"])
        await handle.status()  # creates the actor: one wake-up message, whose every wake-up fails
        with pytest.raises(WakeFailedError, match="boom"):
            await env.run_until_idle()
        status = await handle.status()
        assert status.error is not None and "boom: the session cannot be opened" in status.error
        assert "2 receive" in status.error
        assert env.urls.wake_dlq is not None
        async with env.running():  # SQS moves it when the next receive finds it received twice already
            for _ in range(100):
                if (await env.queue_counts(env.urls.wake_dlq))["visible"]:
                    break
                await asyncio.sleep(0.05)
        assert (await env.queue_counts(env.urls.wake_dlq))["visible"] == 1
        assert await env.queue_counts(env.urls.wake) == {"visible": 0, "in_flight": 0, "delayed": 0}
        assert all(f.ref == handle.ref for f in env.failures) and len(env.failures) >= 2


# -- AwsTestEnv runs examples as TestEnv does -------------------------------------------------------------

async def test_aws_env_runs_a_queue_loop_and_a_redeploy_continues_it(servers: dict[str, str]) -> None:
    settings = Settings(endpoint_url=servers["moto"], dynamodb_endpoint_url=servers["dynamodb_local"])
    async with AwsTestEnv(counter_registry, settings=settings) as env:
        handle = env.client.get_or_create("workflow-counter", ["main"])
        for delta in (1, 2, 3):
            await handle.send("counter", {"delta": delta})
        await env.run_until_idle()
        assert (await handle.get_state()).value == 6
    async with AwsTestEnv(counter_registry, store=env.store) as again:
        handle = again.client.get_or_create("workflow-counter", ["main"])
        await handle.send("counter", {"delta": 4})
        await again.run_until_idle()
        state = await handle.get_state()
        assert (state.value, state.processed) == (10, 4)
        assert again.failures == [] and again.reports


async def test_aws_env_advances_its_clock_through_timers_in_order(servers: dict[str, str]) -> None:
    async with AwsTestEnv(timers_registry, settings=Settings(endpoint_url=servers["moto"],
                                                             dynamodb_endpoint_url=servers["dynamodb_local"])) as env:
        handle = env.client.get_or_create("reminder", ["main"])
        start = env.now()
        for text, offset in (("in an hour", 3600), ("in two hours", 7200), ("in a day", 86400)):
            await handle.send("reminders", {"text": text, "at": start + offset})
        await env.run_until_idle()
        assert (await handle.status()).waiting_for.deadline == start + 3600
        await env.advance(3590)
        assert (await handle.get_state()).fired == []
        await env.advance(7200)
        assert (await handle.get_state()).fired == ["in an hour", "in two hours"]
        await env.advance(86400)
        assert (await handle.get_state()).fired == ["in an hour", "in two hours", "in a day"]
        assert env.failures == []
