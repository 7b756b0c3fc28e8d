"""The kill -9 fault run (issue 9): under a steady load of sends, the worker process is killed with SIGKILL
again and again and restarted. Every message is processed exactly once, and no healthy wake-up reaches a
dead-letter queue (interrupted messages use up receives; the worker refreshes them instead).

Bounded: DORMANT_RELIABILITY_SECONDS of load (default 15; 20 under `make check`; `make fuzz` runs a minute), with
the worker killed 1.5-4 s after each start and the deployment's 5 receives: each kill spends a receive of
every message in flight (or in a long poll), and the worker refreshes those before the redrive takes them.
The restarts alternate the worker's AWS clients between aiobotocore's (`dormant dev`) and botocore's in threads
(the Lambda functions'), so each kind is killed mid-request and each cleans up after the other.
With DORMANT_RELIABILITY_REPORT=path the figures are written there as JSON."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiobotocore.session import get_session  # type: ignore[import-untyped]

from dormant.actor import Registry
from dormant.dynamodb.store import DynamoEventStore, client_config, create_table
from dormant.runtime.clocks import SystemClock
from dormant.runtime.service import ActorService
from dormant.s3.blobs import S3Blobs
from dormant.settings import Settings
from dormant.sqs.transport import SqsTransport, create_queues
from examples.counter import registry
from tests.large_app import digest
from tests.large_app import registry as large_registry
from tests.references import dangling

ROOT = Path(__file__).resolve().parents[2]
DURATION = float(os.environ.get("DORMANT_RELIABILITY_SECONDS", "15"))
ACTORS = 6
VISIBILITY = 3
DRAIN_TIMEOUT = 180.0
CLIENT_KINDS = ("aiobotocore", "threads")


class WorkerProcess:
    """tests/reliability/worker_process.py as a child process, killed and restarted at will."""

    def __init__(self, settings: Settings, log: Path, app: str = "examples.counter:registry") -> None:
        self.settings = settings
        self.log = log
        self.app = app
        self.process: asyncio.subprocess.Process | None = None
        self.kills = 0
        self.starts: Counter[str] = Counter()  # by client kind

    async def start(self) -> None:
        kind = CLIENT_KINDS[sum(self.starts.values()) % len(CLIENT_KINDS)]
        self.starts[kind] += 1
        settings = self.settings.model_copy(update={"aws_clients": kind})
        with self.log.open("ab") as stderr:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "tests.reliability.worker_process", settings.model_dump_json(
                    include={"endpoint_url", "region", "table", "queue_url", "timer_queue_url", "queue_name",
                             "timer_queue_name", "dlq_name", "fifo_dlq_name", "max_receives", "wake_retry_base",
                             "wake_retry_max", "aws_clients", "bucket", "dynamodb_endpoint_url"}), self.app,
                cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=stderr)
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), 60)
        assert line.strip() == b"ready", line

    async def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()
        self.kills += 1

    async def kill_repeatedly(self, rng: random.Random, stop: asyncio.Event) -> None:
        """SIGKILL the worker 1.5-4 s after each start (the load's schedule, not a wait for anything), until `stop`."""
        while not stop.is_set():
            await asyncio.sleep(rng.uniform(1.5, 4.0))
            await self.kill()
            await self.start()

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
            await self.process.wait()


@asynccontextmanager
async def resources(endpoint: str, *, app: Registry = registry, dynamodb: str | None = None,
                    bucket: bool = False) -> AsyncIterator[tuple[Settings, ActorService, Any]]:
    """A table, queues (and with `bucket`, a bucket for large values), and the service that sends to them."""
    suffix = uuid.uuid4().hex[:8]
    settings = Settings(endpoint_url=endpoint, dynamodb_endpoint_url=dynamodb, region="us-east-1",
                        table=f"kill9-{suffix}", queue_name=f"kill9-{suffix}.fifo",
                        timer_queue_name=f"kill9-timers-{suffix}", dlq_name=f"kill9-dlq-{suffix}",
                        fifo_dlq_name=f"kill9-dlq-{suffix}.fifo", max_receives=5, wake_retry_base=0.5,
                        wake_retry_max=4, bucket=f"kill9-{suffix}" if bucket else None)
    session = get_session()
    async with session.create_client("dynamodb", config=client_config(), **settings.client_kwargs("dynamodb")) as db, \
            session.create_client("sqs", config=client_config(), **settings.client_kwargs("sqs")) as sqs, \
            session.create_client("s3", config=client_config(), **settings.client_kwargs("s3")) as s3:
        await create_table(db, settings)
        blobs = None
        if settings.bucket is not None:
            await s3.create_bucket(Bucket=settings.bucket)
            blobs = S3Blobs(s3, settings.bucket)
        urls = await create_queues(sqs, settings, visibility_timeout=VISIBILITY)
        settings = settings.model_copy(update={"queue_url": urls.wake, "timer_queue_url": urls.timers,
                                               "dlq_url": urls.timers_dlq, "fifo_dlq_url": urls.wake_dlq})
        clock = SystemClock()
        service = ActorService(app, DynamoEventStore(db, settings, blobs=blobs), SqsTransport(sqs, urls, clock), clock)
        service.s3 = s3  # type: ignore[attr-defined]  # (the check of the bucket reads it)
        yield settings, service, sqs


async def visible(sqs: Any, url: str | None) -> int:
    assert url is not None
    attributes = (await sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]))["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


async def test_healthy_wake_ups_never_reach_a_dlq_under_repeated_kill_9(moto_server: str, tmp_path: Path) -> None:
    rng = random.Random(9)
    async with resources(moto_server) as (settings, service, sqs):
        worker = WorkerProcess(settings, tmp_path / "worker.log")
        await worker.start()
        expected = {f"a{n}": [0, 0] for n in range(ACTORS)}  # actor key -> [sum of deltas, messages]
        stop = asyncio.Event()
        killing = asyncio.create_task(worker.kill_repeatedly(rng, stop))
        started = time.monotonic()
        sent = 0
        while time.monotonic() - started < DURATION:
            key = f"a{sent % ACTORS}"
            await service.send(service.ref("workflow-counter", [key]), "counter", {"delta": sent + 1},
                               message_id=f"m{sent}")
            expected[key][0] += sent + 1
            expected[key][1] += 1
            sent += 1
            await asyncio.sleep(rng.uniform(0.0, 0.03))
        stop.set()
        await killing
        load_ended = time.monotonic()
        try:
            while True:
                states = {key: (await service.state(service.ref("workflow-counter", [key]))) for key in expected}
                if all(state.processed >= expected[key][1] for key, state in states.items()):
                    break
                assert time.monotonic() - load_ended < DRAIN_TIMEOUT, {k: s.processed for k, s in states.items()}
                await asyncio.sleep(0.25)
            drained = time.monotonic() - load_ended
            await asyncio.sleep(VISIBILITY + 1)  # anything left in flight by the last kill comes back meanwhile
            states = {key: (await service.state(service.ref("workflow-counter", [key]))) for key in expected}
            dead = {"wake": await visible(sqs, settings.fifo_dlq_url),
                    "timers": await visible(sqs, settings.dlq_url)}
        finally:
            await worker.stop()
        log = worker.log.read_text(errors="replace")
        figures = {"seconds of load": DURATION, "messages sent": sent, "actors": ACTORS, "worker kills": worker.kills,
                   "worker starts by client kind": dict(worker.starts),
                   "seconds to drain after the load": round(drained, 2),
                   "refresh log lines": log.count("refreshed"),
                   "duplicates": sum(s.processed for s in states.values()) - sent,
                   "messages in the DLQs": sum(dead.values())}
        report = os.environ.get("DORMANT_RELIABILITY_REPORT")
        if report:
            Path(report).write_text(json.dumps(figures, indent=2) + "\n")
        assert worker.kills >= max(2, int(DURATION / 10)), figures  # (a restart takes seconds)
        assert set(worker.starts) == set(CLIENT_KINDS), figures  # both kinds were killed mid-run
        assert {key: (state.value, state.processed) for key, state in states.items()} == {
            key: (total, count) for key, (total, count) in expected.items()}, figures  # each exactly once
        assert dead == {"wake": 0, "timers": 0}, figures
        assert "moved" not in log and "Traceback" not in log, log[-3000:]


REPEATED = ["p" * 60_000, "q" * 90_000, "r" * 120_000]  # large bodies several messages carry (S3 objects)


async def test_repeated_large_bodies_are_each_applied_once_and_nothing_dangles_under_kill_9(
        moto_server: str, dynamodb_local_server: str, tmp_path: Path) -> None:
    """Issue 26.1 under load: messages whose large bodies repeat (the same content pending in several messages at
    once) and some unique ones, the worker killed with SIGKILL again and again; then every message was applied once,
    and no item of the table refers to an object missing from the bucket."""
    rng = random.Random(26)
    async with resources(moto_server, app=large_registry, dynamodb=dynamodb_local_server, bucket=True) as (
            settings, service, _):
        worker = WorkerProcess(settings, tmp_path / "worker.log", app="tests.large_app:registry")
        await worker.start()
        expected: dict[str, list[str]] = {f"s{n}": [] for n in range(3)}  # actor key -> digests, in send order
        stop = asyncio.Event()
        killing = asyncio.create_task(worker.kill_repeatedly(rng, stop))
        started, sent = time.monotonic(), 0
        while time.monotonic() - started < DURATION:
            key = f"s{sent % len(expected)}"
            text = rng.choice(REPEATED) if rng.random() < 0.7 else f"unique {sent} " + "u" * 50_000
            await service.send(service.ref("large-notebook", [key]), "echo", {"text": text}, message_id=f"m{sent}")
            expected[key].append(digest(text))
            sent += 1
            await asyncio.sleep(rng.uniform(0.0, 0.05))
        stop.set()
        await killing
        load_ended = time.monotonic()
        try:
            while True:
                states = {key: await service.state(service.ref("large-notebook", [key])) for key in expected}
                if all(len(state.digests) >= len(expected[key]) for key, state in states.items()):
                    break
                assert time.monotonic() - load_ended < DRAIN_TIMEOUT, {k: len(s.digests) for k, s in states.items()}
                await asyncio.sleep(0.25)
        finally:
            await worker.stop()
        figures = {"seconds of load": DURATION, "messages sent": sent, "worker kills": worker.kills,
                   "distinct large bodies": len({d for digests in expected.values() for d in digests})}
        report = os.environ.get("DORMANT_RELIABILITY_REPORT")
        if report:
            Path(report).with_suffix(".shared-values.json").write_text(json.dumps(figures, indent=2) + "\n")
        assert worker.kills >= max(2, int(DURATION / 10)), figures
        # Each applied exactly once, in send order per actor (a FIFO group per actor).
        assert {key: state.digests for key, state in states.items()} == expected, figures
        store: Any = service.store
        assert await dangling(store.client, service.s3, settings.table, settings.bucket) == {}, figures
