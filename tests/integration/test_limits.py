"""Every limit at its edge, through the whole AWS path (client, SQS, the worker), on AWS's own DynamoDB Local and on
moto: the largest value works end to end, the smallest one past it is refused at once with nothing stored or sent,
and what a wake-up cannot store ends failed-and-resumable, never stuck (dormant.core.limits, docs/limits.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dormant.core.limits import ACTOR_ID, INDEXED_ITEM, MESSAGE_ID
from dormant.errors import InvalidKeyError, InvalidMessageIdError, ItemTooLargeError
from dormant.ports import ActorRef, InboxMessage, listed_status
from dormant.settings import Settings
from dormant.workflow.history import WorkflowState
from tests.aws_env import AwsTestEnv
from tests.limits_app import fixed_registry, registry


@pytest.fixture(params=["dynamodb_local", "moto"])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[AwsTestEnv]:
    """DynamoDB on AWS's DynamoDB Local (SQS on moto), or both on moto; no bucket (DORMANT_BUCKET unset): every
    value must fit DynamoDB's items (tests/integration/test_large_values.py has the same cases with one)."""
    sqs = request.getfixturevalue("moto_server")
    dynamodb = request.getfixturevalue("dynamodb_local_server") if request.param == "dynamodb_local" else sqs
    async with AwsTestEnv(registry, settings=Settings(endpoint_url=sqs, dynamodb_endpoint_url=dynamodb),
                          offload=False) as created:
        yield created


async def nothing_sent(env: AwsTestEnv) -> bool:
    counts = [await env.queue_counts(url) for url in (env.urls.wake, env.urls.timers)]
    return all(not any(c.values()) for c in counts)


def largest_body(env: AwsTestEnv, ref: ActorRef) -> int:
    """The longest `data` the store's own check lets through for this actor (binary search over check_message)."""
    low, high = 1, INDEXED_ITEM.maximum
    while low < high:
        middle = (low + high + 1) // 2
        message = InboxMessage(id="0" * 36, queue="put", body={"data": "d" * middle}, created_at=env.now())
        try:
            env.store.check_message(ref, message)
            low = middle
        except ItemTooLargeError:
            high = middle - 1
    return low


async def test_the_largest_message_is_processed_and_one_byte_more_is_refused_with_nothing_stored(
        env: AwsTestEnv) -> None:
    handle = env.client.get_or_create("limits-inbox", ["edge"])
    size = largest_body(env, handle.ref)
    assert 190_000 < size < INDEXED_ITEM.maximum  # an inbox item is stored twice (table + pending index)
    with pytest.raises(ItemTooLargeError, match="item in the pending index") as refused:
        await handle.send("put", {"data": "d" * (size + 1)})
    assert refused.value.limit is INDEXED_ITEM
    assert await env.store.load(handle.ref) is None and await nothing_sent(env)  # not even created
    await handle.send("put", {"data": "d" * size})
    await env.run_until_idle()
    assert (await handle.state()).sizes == [size]  # the server took it: our limit is not above DynamoDB's


async def test_messages_of_150_and_210_kb_are_processed_or_refused_up_front(env: AwsTestEnv) -> None:
    small = env.client.get_or_create("limits-inbox", ["150"])
    await small.send("put", {"data": "m" * 150_000})
    big = env.client.get_or_create("limits-inbox", ["210"])
    with pytest.raises(ItemTooLargeError):
        await big.send("put", {"data": "m" * 210_000})
    await env.run_until_idle()
    assert (await small.state()).sizes == [150_000]
    assert await env.store.load(big.ref) is None


async def test_an_actor_id_at_its_limit_works_everywhere_and_one_byte_more_is_refused(env: AwsTestEnv) -> None:
    prefix = len(ActorRef(name="limits-inbox", key=("k" * 500, "k")).id) - 1  # two parts: each is at most 512
    key = ["k" * 500, "k" * (ACTOR_ID.maximum - prefix)]
    handle = env.client.get_or_create("limits-inbox", key)
    assert len(handle.ref.id) == ACTOR_ID.maximum == 1011
    await handle.send("put", {"data": "hello"})
    await env.run_until_idle()
    assert (await handle.state()).sizes == [5]
    status = await handle.status()
    listed = await env.store.list_actors("limits-inbox", status=listed_status(status.workflow))
    assert [tuple(summary.key) for summary in listed.actors] == [tuple(key)]  # its status item was stored
    with pytest.raises(InvalidKeyError, match="1,011 bytes"):
        env.client.get_or_create("limits-inbox", ["k" * 500, "k" * (ACTOR_ID.maximum - prefix + 1)])


async def test_a_message_id_at_its_limit_works_and_one_byte_more_is_refused_with_nothing_stored(
        env: AwsTestEnv) -> None:
    handle = env.client.get_or_create("limits-inbox", ["ids"])
    longest = "i" * MESSAGE_ID.maximum
    assert MESSAGE_ID.maximum == 1003
    result = await handle.send("put", {"data": "x"}, message_id=longest)
    assert result.id == longest
    with pytest.raises(InvalidMessageIdError, match="1,004 bytes"):
        await handle.send("put", {"data": "x"}, message_id=longest + "i")
    await env.run_until_idle()
    assert (await handle.state()).sizes == [1]
    assert (await handle.send("put", {"data": "x"}, message_id=longest)).id == longest  # a duplicate, still
    await env.run_until_idle()
    assert (await handle.state()).sizes == [1]
    other = env.client.get_or_create("limits-inbox", ["ids-2"])
    with pytest.raises(InvalidMessageIdError):
        await other.send("put", {"data": "x"}, message_id="\ud800")
    assert await env.store.load(other.ref) is None and await nothing_sent(env)


async def test_state_grown_past_the_item_limit_fails_the_step_the_workflow_catches_it_and_goes_on(
        env: AwsTestEnv) -> None:
    handle = env.client.get_or_create("limits-grower", ["g"])
    for _ in range(5):  # five 100 KB appends: the fourth would make the state 400 KB
        await handle.send("grow", {"kb": 100})
        await env.run_until_idle()
        await env.advance(1)  # the failed attempt's retry
    state = await handle.state()
    assert len(state.notes) == 3 and state.errors == ["ItemTooLargeError", "ItemTooLargeError"]
    status = await handle.status()
    assert status.workflow is WorkflowState.SLEEPING and status.error is None
    await handle.send("grow", {"kb": 1})  # the actor goes on
    await env.run_until_idle()
    assert len((await handle.state()).notes) == 4
    assert not env.failures  # no wake-up ever failed


async def test_a_step_result_too_big_to_store_fails_the_workflow_visibly(env: AwsTestEnv) -> None:
    handle = env.client.get_or_create("limits-result", ["r"])
    await handle.status()  # creates it
    await env.run_until_idle()
    status = await handle.status()
    assert status.workflow is WorkflowState.FAILED
    assert status.error is not None and "StepExhaustedError" in status.error and "ItemTooLargeError" in status.error
    failed = await env.store.list_actors("limits-result", status=WorkflowState.FAILED)
    assert [summary.key for summary in failed.actors] == [("r",)]
    assert not env.failures


async def test_a_commit_of_many_entries_fails_the_actor_and_it_resumes_after_a_fix(env: AwsTestEnv) -> None:
    handle = env.client.get_or_create("limits-sleeper", ["s"])
    await handle.status()
    await env.run_until_idle()
    status = await handle.status()
    assert status.workflow is WorkflowState.FAILED and status.error is not None
    assert "ItemTooLargeError" in status.error and "live history" in status.error
    failed = await env.store.list_actors("limits-sleeper", status=WorkflowState.FAILED)
    assert [summary.key for summary in failed.actors] == [("s",)]
    assert not env.failures and await nothing_sent(env)  # no wake-up failing on every receive, no DLQ
    async with AwsTestEnv(fixed_registry, store=env.store) as fixed:
        again = fixed.client.get_or_create("limits-sleeper", ["s"])
        result = await again.resume()
        assert result.outcome == "retrying"
        await fixed.run_until_idle()
        assert (await again.status()).workflow is WorkflowState.COMPLETED
