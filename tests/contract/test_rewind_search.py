"""Fork and reset carry search attributes (dormant.runtime.rewind, dormant.core.search.changes_to) on every backend:
a fork has the attributes of the version it forks (so `--where` finds it), a reset gives back those of the version it
resets to (none left over from later versions). Driven through the runtime's operator actions over each store."""

from __future__ import annotations

from datetime import datetime

from dormant import WorkflowContext, actor, queue, setup
from dormant.memory.transport import MemoryTransport
from dormant.runtime.rewind import fork, reset
from dormant.runtime.service import ActorService
from dormant.workflow.history import WorkflowState
from tests.contract.conftest import Backend
from tests.contract.support import SEARCHED, attributes, found, make_order, order, search_draft

orders = actor(SEARCHED, queues={"wait": queue(dict)},
               search={"customer": str, "amount": int, "score": float, "vip": bool, "due": datetime})


@orders.workflow
async def run(ctx: WorkflowContext) -> None:
    await ctx.queue.next("wait")  # (an empty history replays: nothing diverges)


async def test_a_fork_carries_the_attributes_of_its_version_and_a_reset_restores_them(backend: Backend) -> None:
    store = backend.store
    host = ActorService(setup(orders), store, MemoryTransport(), backend.clock)
    source = await make_order(store, "o1", customer="ann", amount=5)
    v2 = await store.commit(source, 1, search_draft(search=attributes(amount=7, vip=True)))
    v3 = await store.commit(source, v2, search_draft(search=attributes(customer="bob", vip=None, score=1.5)))

    forked = await fork(host, source, v2, ["o1-copy"], reason="look at it")
    assert forked.outcome == "forked"
    copy = await store.load(order("o1-copy"))
    assert copy is not None and copy.search == {"customer": ["s", "ann"], "amount": ["i", 7], "vip": ["b", True]}
    assert await found(store, "customer=ann") == ["o1-copy"]
    assert await found(store, "vip=true") == ["o1-copy"]

    back = await reset(host, source, v2)
    assert back.outcome == "reset"
    now = await store.load(source)
    assert now is not None and now.version == v3 + 1
    assert now.search == {"customer": ["s", "ann"], "amount": ["i", 7], "vip": ["b", True]}
    assert await found(store, "customer=ann") == ["o1", "o1-copy"]
    assert await found(store, "customer=bob") == []
    assert await found(store, "score>0") == []  # set after version 2: unset by the reset
    assert await found(store, "amount=7", status=WorkflowState.PENDING) == ["o1", "o1-copy"]
