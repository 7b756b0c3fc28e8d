"""Deletion is final (issue 21, item 6): a delete wins over every request made before it. A send that created an
actor leaves a wake-up carrying the creation and the message; deleting the actor before that wake-up runs must
not bring it back, nor deliver the message to a later life — in memory (TestEnv) and on DynamoDB Local + SQS."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from dormant.settings import Settings
from dormant.testing import TestEnv
from examples.counter import registry
from tests.aws_env import AwsTestEnv


@pytest.fixture(params=["memory", "aws"])
async def env(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    if request.param == "memory":
        async with TestEnv(registry) as created:
            yield created
    else:
        async with AwsTestEnv(registry, settings=Settings(**request.getfixturevalue("aws_endpoints"))) as created:
            yield created


async def test_a_deleted_actor_does_not_come_back_from_the_wake_up_of_the_send_that_created_it(env: Any) -> None:
    handle = env.client.get_or_create("workflow-counter", ["gone"])
    await handle.send("counter", {"delta": 5})  # creates it; its wake-up waits (nothing has run it yet)
    assert await env.store.exists(handle.ref)
    assert (await handle.delete()).outcome == "deleted"
    await env.run_until_idle()
    assert not await env.store.exists(handle.ref)  # before: the wake-up created it again with the message applied
    assert await env.store.load(handle.ref) is None


async def test_a_later_life_gets_only_what_was_sent_to_it(env: Any) -> None:
    handle = env.client.get_or_create("workflow-counter", ["reborn"])
    await handle.send("counter", {"delta": 5})
    env.clock.advance(1)  # the test's clock stands still: the delete comes a second after the send
    await handle.delete()
    env.clock.advance(1)
    again = env.client.get_or_create("workflow-counter", ["reborn"])
    await again.send("counter", {"delta": 7})  # a new life, made after the delete
    await env.run_until_idle()
    state = await again.state()
    assert (state.value, state.processed) == (7, 1)
