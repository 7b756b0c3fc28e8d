"""AwsTestEnv's idle check holds where SQS's queue counts lag: LocalStack's ReceiveMessage takes a message out of
the visible count before adding it to the in-flight one (docs/localstack.md), and AWS calls its counts approximate.
Here a wrapper of the moto server's SQS client plays that window: while a receive is under way, the counts say the
queues are empty."""

from __future__ import annotations

import asyncio
from typing import Any

from dormant.settings import Settings
from examples.counter import registry as counter_registry
from tests.aws_env import AwsTestEnv


class CountsLagBehindReceives:
    """An SQS client whose queue counts show nothing while one of its receives is under way (and which takes a
    moment to answer a receive, so the window is wide enough to land in)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.receiving = 0
        self.hidden = 0  # counts answered during a receive

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def receive_message(self, **kwargs: Any) -> Any:
        self.receiving += 1
        try:
            await asyncio.sleep(0.2)
            return await self.inner.receive_message(**kwargs)
        finally:
            self.receiving -= 1

    async def get_queue_attributes(self, **kwargs: Any) -> Any:
        if not self.receiving:
            return await self.inner.get_queue_attributes(**kwargs)
        self.hidden += 1
        return {"Attributes": {"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0",
                               "ApproximateNumberOfMessagesDelayed": "0"}}


async def test_idle_is_not_declared_while_a_receive_may_be_taking_a_message(moto_server: str) -> None:
    async with AwsTestEnv(counter_registry, settings=Settings(endpoint_url=moto_server)) as env:
        lagging = CountsLagBehindReceives(env._sqs)
        env._sqs = lagging
        for poller in env.pollers:
            poller.sqs = lagging
        handle = env.client.get_or_create("workflow-counter", ["idle"])
        for delta in (2, 3):
            await handle.send("counter", {"delta": delta})
            await env.run_until_idle()
            assert lagging.hidden > 0  # the counts were read inside the window
        state = await handle.get_state()
        assert (state.value, state.processed) == (5, 2)
