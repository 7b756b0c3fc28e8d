"""Flow-control slots (acquire_slot, renew_slot, release_slot): concurrency held by at most that many holders, a
release waking the oldest waiter, leases running out on the runtime's clock, rates per window with places in line,
on every backend. Two processes competing over DynamoDB, a killed holder, and what each call costs in requests are in
tests/integration/test_flow.py."""

from __future__ import annotations

from dormant.core.slots import LimitRule, SlotLease, SlotRefusal
from dormant.ports import ActorRef, EventStore
from tests.contract.support import BOTH, RATE, SLOTS, T0, ask


async def test_slots_are_held_by_at_most_concurrency_holders_and_a_release_wakes_the_oldest_waiter(
        store: EventStore) -> None:
    a = await store.acquire_slot(ask(SLOTS, "a", lease=30))
    b = await store.acquire_slot(ask(SLOTS, "b", lease=60))
    assert isinstance(a, SlotLease) and isinstance(b, SlotLease) and {a.slot, b.slot} == {0, 1}
    late = await store.acquire_slot(ask(SLOTS, "late", T0 + 1))
    later = await store.acquire_slot(ask(SLOTS, "later", T0 + 2))
    assert isinstance(late, SlotRefusal) and late.by == "concurrency" and late.free_at == T0 + 30
    assert isinstance(later, SlotRefusal)
    assert await store.release_slot(a, T0 + 3) == [ActorRef(name="payer", key=("late",))]  # the oldest
    # The woken one asks again (its place in line kept) and gets the freed slot; the line is left with "later".
    again = await store.acquire_slot(ask(SLOTS, "late", T0 + 3, since=T0 + 1, queued=True))
    assert isinstance(again, SlotLease) and again.slot == a.slot
    assert await store.release_slot(b, T0 + 4) == [ActorRef(name="payer", key=("later",))]
    assert await store.release_slot(again, T0 + 5) == []  # nobody waits any more


async def test_a_slot_whose_lease_ran_out_is_taken_and_its_old_holder_can_neither_renew_nor_release_it(
        store: EventStore) -> None:
    one = LimitRule(name="one", concurrency=1, window=1.0, per_window=None)
    old = await store.acquire_slot(ask(one, "old", lease=10))
    assert isinstance(old, SlotLease)
    assert isinstance(await store.acquire_slot(ask(one, "new", T0 + 9.9)), SlotRefusal)
    assert await store.renew_slot(old, T0 + 20)  # renewed: still held at T0 + 15
    assert isinstance(await store.acquire_slot(ask(one, "new", T0 + 15)), SlotRefusal)
    new = await store.acquire_slot(ask(one, "new", T0 + 20, since=T0 + 15, queued=True))
    assert isinstance(new, SlotLease) and new.slot == old.slot  # at the lease's end, the slot is free
    assert not await store.renew_slot(old, T0 + 80)
    assert await store.release_slot(old, T0 + 21) == []
    assert isinstance(await store.acquire_slot(ask(one, "third", T0 + 22)), SlotRefusal)  # "new" still holds it


async def test_the_same_holder_asking_again_gets_its_own_slot_not_a_second_one(store: EventStore) -> None:
    first = await store.acquire_slot(ask(SLOTS, "crashed-step"))
    rerun = await store.acquire_slot(ask(SLOTS, "crashed-step", T0 + 5))
    assert isinstance(first, SlotLease) and isinstance(rerun, SlotLease) and rerun.slot == first.slot
    other = await store.acquire_slot(ask(SLOTS, "other", T0 + 6))
    assert isinstance(other, SlotLease) and other.slot != first.slot  # the second slot was still free


async def test_a_rate_gives_per_window_starts_and_places_the_refused_in_line(store: EventStore) -> None:
    answers = [await store.acquire_slot(ask(RATE, f"r{n}", T0 + 0.5)) for n in range(5)]
    assert [isinstance(answer, SlotLease) for answer in answers] == [True, True, False, False, False]
    refused = [answer for answer in answers if isinstance(answer, SlotRefusal)]
    assert [(r.by, r.window, r.position) for r in refused] == [("rate", int(T0), n) for n in range(3)]
    nxt = await store.acquire_slot(ask(RATE, "r2", T0 + 1.0))  # the next window starts afresh
    assert isinstance(nxt, SlotLease) and nxt.slot is None


async def test_a_rate_refusal_gives_back_the_slot_it_took(store: EventStore) -> None:
    first = await store.acquire_slot(ask(BOTH, "first", T0))
    assert isinstance(first, SlotLease)
    await store.release_slot(first, T0 + 0.1)
    refused = await store.acquire_slot(ask(BOTH, "second", T0 + 0.2))  # a free slot; this second used up
    assert isinstance(refused, SlotRefusal) and refused.by == "rate"
    third = await store.acquire_slot(ask(BOTH, "third", T0 + 1.1))
    assert isinstance(third, SlotLease)  # the slot "second" took was given back


async def test_a_release_skips_waiters_gone_stale(store: EventStore) -> None:
    one = LimitRule(name="stale", concurrency=1, window=1.0, per_window=None)
    holder = await store.acquire_slot(ask(one, "holder", lease=60))
    assert isinstance(holder, SlotLease)
    assert isinstance(await store.acquire_slot(ask(one, "gone", T0 + 1)), SlotRefusal)  # told: T0 + 60
    assert await store.renew_slot(holder, T0 + 5000)
    assert isinstance(await store.acquire_slot(ask(one, "fresh", T0 + 1000)), SlotRefusal)
    # "gone" never asked again (its actor was deleted, say): 15 minutes after the lease end it was told, its place
    # in line is dropped.
    assert await store.release_slot(holder, T0 + 1100) == [ActorRef(name="payer", key=("fresh",))]


# -- keyed and prioritized limits (docs/semantics.md, "Keyed and prioritized limits") -------------------------------

def keyed(key: str, concurrency: int = 1) -> LimitRule:
    return LimitRule(name="per-customer", concurrency=concurrency, window=1.0, per_window=None, key=key, aging=30.0)


async def test_a_keyed_limit_bounds_each_key_apart(store: EventStore) -> None:
    a = await store.acquire_slot(ask(keyed("cust-a"), "a1"))
    b = await store.acquire_slot(ask(keyed("cust-b"), "b1"))
    assert isinstance(a, SlotLease) and isinstance(b, SlotLease)  # two keys run at once
    assert (a.key, b.key) == ("cust-a", "cust-b")
    second_a = await store.acquire_slot(ask(keyed("cust-a"), "a2", T0 + 1))
    assert isinstance(second_a, SlotRefusal) and second_a.by == "concurrency"  # one key never twice at once
    unkeyed = LimitRule(name="per-customer", concurrency=1, window=1.0, per_window=None)
    assert isinstance(await store.acquire_slot(ask(unkeyed, "whole")), SlotLease)  # the unkeyed items are apart
    # A release of key b wakes no waiter of key a; key a's release does.
    assert await store.release_slot(b, T0 + 2) == []
    assert not await store.renew_slot(SlotLease(limit="per-customer", holder="a1", actor="x", slot=0,
                                                expires=T0 + 60, key="cust-b"), T0 + 90)
    assert await store.release_slot(a, T0 + 3) == [ActorRef(name="payer", key=("a2",))]
    again = await store.acquire_slot(ask(keyed("cust-a"), "a2", T0 + 3, since=T0 + 1, queued=True))
    assert isinstance(again, SlotLease) and again.key == "cust-a"


async def test_a_release_wakes_the_highest_priority_waiter_first_and_fifo_within_a_priority(
        store: EventStore) -> None:
    rule = LimitRule(name="prio", concurrency=1, window=1.0, per_window=None, aging=30.0)
    holder = await store.acquire_slot(ask(rule, "holder"))
    assert isinstance(holder, SlotLease)
    for n, (name, priority) in enumerate([("low", 5), ("high-1", 1), ("mid", 3), ("high-2", 1)]):
        refused = await store.acquire_slot(ask(rule, name, T0 + 1 + n, priority=priority))
        assert isinstance(refused, SlotRefusal)
    order = []
    lease: SlotLease = holder
    for step in range(4):
        now = T0 + 10 + step
        woken = await store.release_slot(lease, now)
        assert len(woken) == 1
        name = woken[0].key[0]
        order.append(name)
        first = {"low": 1, "high-1": 2, "mid": 3, "high-2": 4}[name]
        priority = {"low": 5, "high-1": 1, "mid": 3, "high-2": 1}[name]
        taken = await store.acquire_slot(ask(rule, name, now, since=T0 + first, queued=True, priority=priority))
        assert isinstance(taken, SlotLease)
        lease = taken
    assert order == ["high-1", "high-2", "mid", "low"]


async def test_a_waiter_is_never_passed_by_one_that_began_waiting_more_than_its_aging_bound_later(
        store: EventStore) -> None:
    # Aging 30 s a level: a priority-5 waiter is passed by a priority-1 one that began waiting less than 120 s after
    # it, never by one that began more than 120 s after it.
    for late, first in ((119.0, "eager"), (121.0, "patient")):
        rule = LimitRule(name=f"aging-{int(late)}", concurrency=1, window=1.0, per_window=None, aging=30.0)
        holder = await store.acquire_slot(ask(rule, "holder", lease=1000))
        assert isinstance(holder, SlotLease)
        assert isinstance(await store.acquire_slot(ask(rule, "patient", T0 + 1, priority=5)), SlotRefusal)
        assert isinstance(await store.acquire_slot(ask(rule, "eager", T0 + 1 + late, priority=1)), SlotRefusal)
        woken = await store.release_slot(holder, T0 + 200)
        assert [ref.key[0] for ref in woken] == [first], late
