"""A running wake-up's look at its inbox while it waits in process for a message (EventStore.wait_inbox).

DynamoDB has no change notification the wake-up could wait on, so it polls the `pending` index: one
strongly consistent Query per look, every INBOX_POLL seconds, only while an in-process queue wait lasts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from collections.abc import Set as AbstractSet

from dormant.core.records import ActorRef, ActorSnapshot, InboxMessage
from dormant.dynamodb.messages import InboxItems
from dormant.dynamodb.ring import HeadCache
from dormant.s3.large_values import LargeValues

INBOX_POLL = 0.05  # seconds between looks


class InboxWaiter:
    """Polls the inbox for messages a wake-up has not seen (`load`: the store's, for an actor it has not read)."""

    def __init__(self, messages: InboxItems, heads: HeadCache, values: LargeValues,
                 load: Callable[[ActorRef], Awaitable[ActorSnapshot | None]]) -> None:
        self.messages = messages
        self.heads = heads
        self.values = values
        self.load = load

    async def wait_inbox(self, ref: ActorRef, known: AbstractSet[str], timeout: float) -> list[InboxMessage]:
        loop = asyncio.get_running_loop()
        give_up = loop.time() + timeout
        while True:
            pending = await self.messages.pending(ref)
            head = self.heads.newest(ref)
            if head is None:  # never read through this store: a load knows the commit chain
                snapshot = await self.load(ref)
                inbox = snapshot.inbox if snapshot is not None else []
            else:  # consumed messages whose pending items may still be read: the head's hidden ones
                inbox = self.messages.live(ref, pending, head.hidden())[0]
            fresh = await self.values.resolve_inbox(ref, [message for message in inbox if message.id not in known],
                                                    whole=False)
            remaining = give_up - loop.time()
            if fresh or remaining <= 0:
                return fresh
            await asyncio.sleep(min(INBOX_POLL, remaining))
