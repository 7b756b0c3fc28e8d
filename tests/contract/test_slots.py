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
