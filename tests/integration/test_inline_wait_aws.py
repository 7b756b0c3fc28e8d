"""The in-process wait limit on the AWS handler path: the worker (open_worker, as the Lambda function opens it) takes
DORMANT_INLINE_WAIT, or the break-even wait for AWS_LAMBDA_FUNCTION_MEMORY_SIZE, and a sleep under it ends in the
running wake-up while one over it suspends (a timer on the queue). The worker's clock jumps: nothing sleeps."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import pytest

from dormant.aws.worker import open_worker
from dormant.client import Client
from dormant.ports import ActorRef
from tests.integration.test_worker import Aws, open_aws, servers, wake_event
from tests.unit.test_inline_wait import JumpingClock, napper

__all__ = ["servers"]  # the fixture, used by name


@pytest.fixture
async def aws(servers: dict[str, str]) -> AsyncIterator[Aws]:
    async for opened in open_aws(servers, "dynamodb_local"):
        yield opened


@pytest.mark.parametrize(("setting", "memory_mb", "nap", "in_process"), [
    (None, 1024, 0.2, True),  # the break-even at 1 GB: 0.26 s
    (None, 1024, 0.4, False),  # (at the default 512 MB 0.4 s would be waited for)
    (3.0, None, 2.5, True),  # DORMANT_INLINE_WAIT=3
])
async def test_the_worker_waits_a_sleep_under_its_limit_and_suspends_one_over_it(
        aws: Aws, setting: float | None, memory_mb: int | None, nap: float, in_process: bool) -> None:
    registry = napper(nap)
    ref = ActorRef(name="napper", key=(uuid.uuid4().hex[:8],))
    handle = Client(aws.service(registry)).get_or_create("napper", list(ref.key))
    await handle.status()  # created
    settings = aws.settings.model_copy(update={"inline_wait": setting, "function_memory_mb": memory_mb})
    clock = JumpingClock(start=time.time())
    async with open_worker(settings, registry, clock=clock) as worker:
        assert await worker.handle(wake_event(ref)) == {"batchItemFailures": []}
    report = worker.reports[-1]
    if in_process:
        assert report.outcome == "completed" and report.next_wake is None
        assert clock.slept == [pytest.approx(nap)] and (await handle.state()).log == ["after"]
    else:
        assert report.outcome == "sleeping" and clock.slept == []
        assert report.next_wake == pytest.approx(clock.now() + nap)
        assert (await handle.status()).waiting_for.deadline == pytest.approx(clock.now() + nap)
