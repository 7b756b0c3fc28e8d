"""`inline_calls()`: a ThreadedClient's DynamoDB and SQS calls made on the calling thread (dormant.core.clients).

The Lambda worker runs a one-actor batch within it (tests/integration/test_worker.py checks the requests' threads
on DynamoDB Local); here a client over a plain object shows which thread makes each call.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any

import pytest

from dormant.core.clients import INLINE_SERVICES, INLINE_TOGETHER, ThreadedClient, inline_calls

_scope: contextvars.ContextVar[str] = contextvars.ContextVar("test_scope", default="none")


class Recorder:
    """A stand-in for a botocore client: each call records the thread it ran on and the context it saw."""

    meta = None
    exceptions = None

    def __init__(self) -> None:
        self.threads: list[int] = []
        self.scopes: list[str] = []

    def get_item(self, **kwargs: Any) -> dict[str, Any]:
        self.threads.append(threading.get_ident())
        self.scopes.append(_scope.get())
        return {"Item": kwargs}

    def fail(self) -> None:
        raise LookupError("refused")


def test_dynamodb_and_sqs_calls_may_be_made_inline_and_s3_s_may_not() -> None:
    assert {"dynamodb", "sqs"} <= INLINE_SERVICES and "s3" not in INLINE_SERVICES


async def test_outside_the_scope_every_call_goes_to_the_pool() -> None:
    recorder = Recorder()
    client = ThreadedClient(recorder, inline=True)
    assert await client.get_item(Key=1) == {"Item": {"Key": 1}}
    assert recorder.threads and recorder.threads[0] != threading.get_ident()


async def test_within_the_scope_calls_run_on_the_calling_thread_with_its_context() -> None:
    recorder = Recorder()
    client = ThreadedClient(recorder, inline=True)
    token = _scope.set("the wake-up's")
    try:
        with inline_calls():
            assert await client.get_item(Key=1) == {"Item": {"Key": 1}}
            assert await asyncio.gather(client.get_item(Key=2), client.get_item(Key=3)) == [
                {"Item": {"Key": 2}}, {"Item": {"Key": 3}}]  # (started together: made one after the other)
        assert await client.get_item(Key=4) == {"Item": {"Key": 4}}  # (out of it again: the pool)
    finally:
        _scope.reset(token)
    here = threading.get_ident()
    assert recorder.threads[:3] == [here, here, here]
    assert recorder.threads[3] != here
    assert recorder.scopes == ["the wake-up's"] * 4  # (the pool's call carries the context too)


async def test_of_more_calls_started_together_the_first_overlap_in_the_pool() -> None:
    recorder = Recorder()
    client = ThreadedClient(recorder, inline=True)
    with inline_calls():
        found = await asyncio.gather(*(client.get_item(Key=n) for n in range(10)))  # (a batch of sends)
    assert found == [{"Item": {"Key": n}} for n in range(10)]
    assert recorder.threads.count(threading.get_ident()) == INLINE_TOGETHER == 2


async def test_a_client_not_made_for_it_stays_in_the_pool_within_the_scope() -> None:
    recorder = Recorder()
    client = ThreadedClient(recorder)  # (an S3 client: inline=False)
    with inline_calls():
        await asyncio.gather(client.get_item(Key=1), client.get_item(Key=2))
    assert threading.get_ident() not in recorder.threads


async def test_an_inline_call_s_error_is_raised_to_its_caller() -> None:
    client = ThreadedClient(Recorder(), inline=True)
    with inline_calls(), pytest.raises(LookupError, match="refused"):
        await client.fail()


async def test_a_call_cancelled_before_it_is_made_leaves_the_next_one_inline() -> None:
    recorder = Recorder()
    client = ThreadedClient(recorder, inline=True)
    with inline_calls():
        for _ in range(INLINE_TOGETHER + 1):  # (each cancelled while it waits its turn: none is made)
            cancelled = asyncio.ensure_future(client.get_item(Key=0))
            await asyncio.sleep(0)
            cancelled.cancel()
            with pytest.raises(asyncio.CancelledError):
                await cancelled
        assert await client.get_item(Key=1) == {"Item": {"Key": 1}}
    assert recorder.threads == [threading.get_ident()]
