"""`send_many` (issue 23, item 2): many messages to one queue in one request, in memory, on DynamoDB Local + SQS
(through the real HTTP API too). All checked first; in order; ids idempotent; one status read, the wake-ups sent
ten to an SQS request; a batch to a new actor creates it once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from dormant.errors import ActorFinishedError, IdempotencyConflictError, InvalidMessageError
from dormant.http.app import create_app
from dormant.http.client import HttpClient
from dormant.settings import Settings
from dormant.testing import TestEnv
from examples.counter import registry
from tests.api.support import serve
from tests.aws_env import AwsTestEnv


@pytest.fixture(params=["memory", "aws"])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    if request.param == "memory":
        async with TestEnv(registry) as created:
            yield created
    else:
        async with AwsTestEnv(registry, settings=Settings(**request.getfixturevalue("aws_endpoints"))) as created:
            yield created


async def test_a_batch_is_stored_in_order_and_processed_once(env: Any) -> None:
    handle = env.client.get_or_create("workflow-counter", ["batch"])
    results = await handle.send_many("counter", [{"delta": n} for n in range(1, 26)])
    assert [r.status for r in results] == ["queued"] * 25 and len({r.id for r in results}) == 25
    await env.run_until_idle()
    state = await handle.state()
    assert (state.value, state.processed) == (sum(range(1, 26)), 25)
    history = await handle.history()
    received = [e.messages[0].id for e in history if e.kind.value == "message" and e.messages]
    assert received == [r.id for r in results][-len(received):]  # in send order (the recent iterations kept)


async def test_one_bad_body_refuses_the_whole_batch_naming_its_index(env: Any) -> None:
    handle = env.client.get_or_create("workflow-counter", ["bad"])
    with pytest.raises(InvalidMessageError, match="message 2 of the batch"):
        await handle.send_many("counter", [{"delta": 1}, {"delta": 2}, {"delta": "x"}])
    assert await env.store.load(handle.ref) is None  # nothing created, nothing stored


async def test_ids_make_a_retried_batch_the_same_messages(env: Any) -> None:
    handle = env.client.get_or_create("workflow-counter", ["retry"])
    ids = [f"b-{n}" for n in range(5)]
    for _ in range(2):
        await handle.send_many("counter", [{"delta": 1}] * 5, message_ids=ids)
    await env.run_until_idle()
    assert (await handle.state()).processed == 5
    with pytest.raises(IdempotencyConflictError, match="message 0"):
        await handle.send_many("counter", [{"delta": 9}] * 5, message_ids=ids)
    with pytest.raises(InvalidMessageError, match="same id"):
        await handle.send_many("counter", [{"delta": 1}] * 2, message_ids=["x", "x"])


async def test_a_batch_to_a_finished_actor_is_refused(env: Any) -> None:
    handle = env.client.get_or_create("workflow-counter", ["done"])
    await handle.send("counter", {"delta": 1})
    await env.run_until_idle()
    await handle.terminate("enough")
    with pytest.raises(ActorFinishedError):
        await handle.send_many("counter", [{"delta": 1}])


async def test_the_http_route_and_its_requests(aws_endpoints: dict[str, str]) -> None:
    """Over HTTP on the AWS stack: one request, 3 SendMessageBatch for 25 messages, one inbox write each."""
    # No worker runs while the batch is counted (`run_until_idle` below): under load a slow wake-up's ownership
    # refresh sends a batch of its own (dormant.aws.redelivery), which the env's one meter would count as the send's
    async with AwsTestEnv(registry, settings=Settings(**aws_endpoints)) as env:
        settings = env.settings.model_copy(update={"auth_mode": "none", "dev": True})
        async with serve(create_app(registry, settings, service=env.service)) as url:
            before = env.meter.copy()
            async with HttpClient(url) as client:
                handle = client.get_or_create("workflow-counter", ["http"])
                results = await handle.send_many("counter", [{"delta": 2}] * 25)
            spent = env.meter - before
            assert len(results) == 25
            # 25 wake-ups in 3 calls (at most the creation's own wake-up apart: the client creates first); on a
            # loaded machine botocore may send a call again after a read timeout, so calls, not requests
            assert spent.calls["sqs.SendMessageBatch"] == 3 and spent.calls["sqs.SendMessage"] <= 1
            assert spent.requests["dynamodb.PutItem"] >= 25  # one conditional inbox write per message (+ create)
            async with httpx.AsyncClient(base_url=url) as raw:
                bad = await raw.post("/actors/workflow-counter/http/queues/counter/batch",
                                     json={"messages": [{"body": {"delta": 1}, "id": "a"}, {"body": {"delta": 1}}]})
                assert (bad.status_code, bad.json()["error"]["code"]) == (422, "invalid_body")
                too_many = await raw.post("/actors/workflow-counter/http/queues/counter/batch",
                                          json={"messages": [{"body": {"delta": 1}}] * 101})
                assert too_many.status_code == 422
            await env.run_until_idle()
            assert (await env.client.get_or_create("workflow-counter", ["http"]).state()).value == 50


async def test_a_queue_failing_part_way_says_which_messages_are_stored() -> None:
    """The second SendMessageBatch request fails: the first ten are stored (their wake-ups carry them), the rest
    are not, and the error says which; sending the batch again with the same ids completes it once."""
    from dormant.errors import BatchSendFailedError, TransportError

    async with TestEnv(registry) as env:
        real = env.service.transport
        calls = {"n": 0}

        class Flaky:
            async def wake_many(self, ref: Any, messages: Any, *, creation: Any = None) -> list[str]:
                calls["n"] += 1
                if calls["n"] == 1:  # ten went out, then the queue failed
                    for index, message in enumerate(messages[:10]):
                        await real.wake(ref, message=message, creation=creation if index == 0 else None)
                    return [message.id for message in messages[:10]]
                for message in messages:
                    await real.wake(ref, message=message)
                return [message.id for message in messages]

            async def wake(self, *args: Any, **kwargs: Any) -> None:
                raise TransportError("down")

        env.service.transport = Flaky()
        handle = env.client.get_or_create("workflow-counter", ["flaky"])
        ids = [f"m-{n}" for n in range(15)]
        with pytest.raises(BatchSendFailedError) as failed:
            await handle.send_many("counter", [{"delta": 1}] * 15, message_ids=ids)
        assert (failed.value.stored_ids, failed.value.unstored_ids) == (ids[:10], ids[10:])
        await handle.send_many("counter", [{"delta": 1}] * 15, message_ids=ids)
        env.service.transport = real
        await env.run_until_idle()
        assert (await handle.state()).processed == 15
