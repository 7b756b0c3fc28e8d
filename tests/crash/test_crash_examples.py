"""Crash safety of the examples: every storage call of every wake-up fails in turn (before it applies,
and after it applied but before the caller heard back), and the outcome never changes."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from dormant import NonRetryableError
from dormant.testing import TestEnv
from examples import (
    approval_gate,
    async_rpc,
    bounded_drain,
    bounded_map,
    counter,
    cross_actor_saga,
    join_dashboard,
    race_auction,
    request_response,
    rollback_checkout,
    timers,
)
from tests.crash.harness import Observation, Scenario, check_crash_safety

Retry = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]


async def _state(env: TestEnv, actor_name: str, key: str = "main") -> dict[str, Any]:
    state = await env.client.get_or_create(actor_name, [key]).state()
    return dict(state.model_dump(mode="json"))


async def _status(env: TestEnv, actor_name: str, key: str = "main") -> tuple[str, str | None]:
    status = await env.client.get_or_create(actor_name, [key]).status()
    # A storage fault inside a cross-actor call fails that step attempt, which is retried: the number of
    # attempts may differ from the fault-free run, the outcome may not.
    error = re.sub(r"after \d+ attempt\(s\)", "after N attempt(s)", status.error) if status.error else None
    return status.workflow.value, error


# -- counter: a queue loop -----------------------------------------------------------------------
async def drive_counter(env: TestEnv, retry: Retry) -> None:
    handle = env.client.get_or_create("workflow-counter", ["main"])
    for number, delta in enumerate([5, -2, 10]):
        await retry(lambda delta=delta, number=number: handle.send("counter", {"delta": delta},
                                                                    message_id=f"m{number}"))
    await env.run_until_idle()


async def observe_counter(env: TestEnv) -> Observation:
    return {"state": await _state(env, "workflow-counter"), "status": await _status(env, "workflow-counter")}


# -- request/response: completable messages answered by id ------------------------------------------
async def drive_request_response(env: TestEnv, retry: Retry) -> None:
    handle = env.client.get_or_create("request-response", ["main"])
    first = await retry(lambda: handle.send("requests", {"value": 21}, wait=True, timeout=5, message_id="r1"))
    assert first.status == "completed"
    await retry(lambda: handle.send("requests", {"value": 4}, message_id="r2"))
    await env.run_until_idle()


async def observe_request_response(env: TestEnv) -> Observation:
    handle = env.client.get_or_create("request-response", ["main"])
    return {"state": await _state(env, "request-response"), "responses": env.store.responses(handle.ref)}


# -- race: a bid beats a 24-hour expiry; and the expiry wins when no bid comes -----------------------
@dataclass
class AuctionLog:
    finalized: list[tuple[str, str]] = field(default_factory=list)


auction_log = AuctionLog()


def reset_auction() -> None:
    auction_log.finalized.clear()

    async def finalize(item: str, outcome: str) -> None:
        auction_log.finalized.append((item, outcome))

    async def list_item(item: str) -> None:
        return None

    race_auction.services = race_auction.Services(list_item=list_item, finalize_auction=finalize)


async def drive_race(env: TestEnv, retry: Retry) -> None:
    sold = env.client.get_or_create("auction", ["sold"])
    expired = env.client.get_or_create("auction", ["expired"])
    await retry(sold.status)
    await retry(expired.status)
    await env.advance(60)
    await retry(lambda: sold.send("bids", {"amount": 100}, message_id="bid-1"))
    await env.advance(24 * 3600 + 60)


async def observe_race(env: TestEnv) -> Observation:
    return {"sold": await _state(env, "auction", "sold"), "expired": await _state(env, "auction", "expired"),
            "finalized": sorted(set(auction_log.finalized))}


# -- join: three branches in a loop iteration -------------------------------------------------------
def reset_join() -> None:
    async def fetch_count(path: str) -> int:
        return {"/users": 3, "/orders": 5, "/revenue": 700}[path]

    join_dashboard.services = join_dashboard.Services(fetch_count=fetch_count)


async def drive_join(env: TestEnv, retry: Retry) -> None:
    handle = env.client.get_or_create("dashboard", ["main"])
    await retry(lambda: handle.send("refresh", {}, message_id="refresh-1"))
    await env.advance(60)


async def observe_join(env: TestEnv) -> Observation:
    return {"state": await _state(env, "dashboard"), "status": await _status(env, "dashboard")}


# -- rollback: a declined card compensates the reservation once ------------------------------------
@dataclass
class CheckoutLog:
    released: set[str] = field(default_factory=set)
    refunded: set[str] = field(default_factory=set)


checkout_log = CheckoutLog()


def reset_checkout() -> None:
    checkout_log.released.clear()
    checkout_log.refunded.clear()

    async def reserve(order_id: str) -> str:
        return f"res-{order_id}"

    async def release(reservation_id: str) -> None:
        checkout_log.released.add(reservation_id)  # idempotent by id, like a real inventory service

    async def charge(order_id: str) -> str:
        if order_id == "declined":
            raise NonRetryableError("card declined")
        return f"ch-{order_id}"

    async def refund(charge_id: str) -> None:
        checkout_log.refunded.add(charge_id)

    rollback_checkout.services = rollback_checkout.Services(
        reserve_inventory=reserve, release_inventory=release, charge_card=charge, refund_charge=refund)


async def drive_checkout(env: TestEnv, retry: Retry) -> None:
    handle = env.client.get_or_create("checkout", ["main"])
    await retry(lambda: handle.send("orders", {"order_id": "ok"}, message_id="o1"))
    await retry(lambda: handle.send("orders", {"order_id": "declined"}, message_id="o2"))
    await env.advance(60)


async def observe_checkout(env: TestEnv) -> Observation:
    return {"state": await _state(env, "checkout"), "status": await _status(env, "checkout"),
            "released": sorted(checkout_log.released), "refunded": sorted(checkout_log.refunded)}


# -- cross-actor saga: compensations are actions on other actors -------------------------------------
def reset_saga() -> None:
    async def charge_card(order_id: str, amount: int) -> None:
        if amount > 1000:
            raise NonRetryableError("card declined")

    cross_actor_saga.services = cross_actor_saga.Services(charge_card=charge_card)


async def drive_saga(env: TestEnv, retry: Retry) -> None:
    handle = env.client.get_or_create("checkout-saga", ["main"])
    await retry(lambda: handle.send("orders", {"order_id": "a", "amount": 10}, message_id="o1"))
    await retry(lambda: handle.send("orders", {"order_id": "b", "amount": 5000}, message_id="o2"))
    await env.advance(120)


async def observe_saga(env: TestEnv) -> Observation:
    return {"saga": await _state(env, "checkout-saga"), "status": await _status(env, "checkout-saga"),
            "inventory": await _state(env, "inventory"), "billing": await _state(env, "billing")}


# -- approval gate: a workflow waiting on a human -------------------------------------------------
def reset_gate() -> None:
    async def noop(order_id: str) -> None:
        return None

    approval_gate.services = approval_gate.Services(validate_order=noop, fulfill_order=noop, cancel_order=noop)


async def drive_gate(env: TestEnv, retry: Retry) -> None:
    approved = env.client.get_or_create("approval-gate", ["order-1"])
    rejected = env.client.get_or_create("approval-gate", ["order-2"])
    await retry(lambda: approved.send("approval", {"approved": True}, message_id="d1"))
    await retry(lambda: rejected.send("approval", {"approved": False}, message_id="d2"))
    await env.advance(60)


async def observe_gate(env: TestEnv) -> Observation:
    return {key: (await _state(env, "approval-gate", key), await _status(env, "approval-gate", key))
            for key in ("order-1", "order-2")}


# -- timers: durable sleeps -----------------------------------------------------------------------
async def drive_timers(env: TestEnv, retry: Retry) -> None:
    handle = env.client.get_or_create("reminder", ["main"])
    now = env.now()
    await retry(lambda: handle.send("reminders", {"text": "late", "at": now + 600}, message_id="t1"))
    await retry(lambda: handle.send("reminders", {"text": "soon", "at": now + 60}, message_id="t2"))
    await env.advance(3600)


async def observe_timers(env: TestEnv) -> Observation:
    return {"state": await _state(env, "reminder"), "status": await _status(env, "reminder")}


# -- async RPC: actor-to-actor request/response over a queue ----------------------------------------
async def drive_async_rpc(env: TestEnv, retry: Retry) -> None:
    handle = env.client.get_or_create("caller", ["main"])
    await retry(lambda: handle.send("jobs", {"value": 7}, message_id="j1"))
    await retry(lambda: handle.send("jobs", {"value": 8}, message_id="j2"))
    await env.advance(120)


async def observe_async_rpc(env: TestEnv) -> Observation:
    return {"caller": await _state(env, "caller"), "responder": await _state(env, "responder")}


# -- bounded drain: windows of up to 10 messages, processed 3 at a time -----------------------------
async def drive_drain(env: TestEnv, retry: Retry) -> None:
    handle = env.client.get_or_create("bounded-drain", ["main"])
    for number in range(13):
        await retry(lambda number=number: handle.send("work", {"id": f"w{number}", "value": number},
                                                      message_id=f"w{number}"))
    await env.advance(1)
    await retry(lambda: handle.send("work", {"id": "late", "value": 100}, message_id="late"))
    await env.advance(60)


async def observe_drain(env: TestEnv) -> Observation:
    state = await _state(env, "bounded-drain")
    # How the backlog splits into windows depends on when wake-ups ran; what was processed may not.
    return {"processed": state["processed"], "windows_bounded": max(state["window_sizes"]) <= 10,
            "total": sum(state["window_sizes"]), "status": await _status(env, "bounded-drain")}


# -- bounded map: quorum writes, two replicas at a time, done at three acknowledgements --------------
@dataclass
class ReplicaLog:
    down: set[str] = field(default_factory=set)
    writes: list[str] = field(default_factory=list)


replica_log = ReplicaLog()


def reset_quorum() -> None:
    replica_log.down.clear()
    replica_log.writes.clear()

    async def write_replica(replica: str, key: str, value: str) -> str:
        replica_log.writes.append(f"{replica} {key}")
        if replica in replica_log.down:
            raise ConnectionError(f"{replica} is unreachable")
        return f"{replica}:{key}"

    bounded_map.services = bounded_map.Services(write_replica=write_replica)


async def drive_quorum(env: TestEnv, retry: Retry) -> None:
    handle = env.client.get_or_create("quorum-write", ["main"])
    await retry(lambda: handle.send("writes", {"key": "doc-1", "value": "v1"}, message_id="doc-1"))
    await env.run_until_idle()
    replica_log.down.update({"replica-1", "replica-2"})
    await retry(lambda: handle.send("writes", {"key": "doc-2", "value": "v2"}, message_id="doc-2"))
    await env.run_until_idle()
    await env.advance(2)  # their retries fail too: the second failure aborts the write


async def observe_quorum(env: TestEnv) -> Observation:
    state = await _state(env, "quorum-write")
    # Which three replicas acknowledged doc-1 may depend on when wake-ups ran; that three did, and that doc-2 was
    # aborted by its second failed replica, may not; nor may a replica the quorum did not need ever be asked.
    return {"acknowledged": {key: len(replicas) for key, replicas in state["acknowledged"].items()},
            "failed": state["failed"], "asked replica-5": any(w.startswith("replica-5") for w in replica_log.writes),
            "status": await _status(env, "quorum-write")}


SCENARIOS = [
    Scenario("counter", counter.registry, drive_counter, observe_counter),
    Scenario("request_response", request_response.registry, drive_request_response, observe_request_response),
    Scenario("race_auction", race_auction.registry, drive_race, observe_race, reset_auction),
    Scenario("join_dashboard", join_dashboard.registry, drive_join, observe_join, reset_join),
    Scenario("rollback_checkout", rollback_checkout.registry, drive_checkout, observe_checkout, reset_checkout),
    Scenario("cross_actor_saga", cross_actor_saga.registry, drive_saga, observe_saga, reset_saga),
    Scenario("approval_gate", approval_gate.registry, drive_gate, observe_gate, reset_gate),
    Scenario("timers", timers.registry, drive_timers, observe_timers),
    Scenario("async_rpc", async_rpc.registry, drive_async_rpc, observe_async_rpc),
    Scenario("bounded_drain", bounded_drain.registry, drive_drain, observe_drain),
    Scenario("bounded_map", bounded_map.registry, drive_quorum, observe_quorum, reset_quorum),
]


@pytest.fixture(autouse=True)
def restore_services() -> Iterator[None]:
    """The scenarios swap the examples' injected services: put the originals back for other tests."""
    modules = [race_auction, join_dashboard, rollback_checkout, cross_actor_saga, approval_gate, bounded_drain,
               bounded_map]
    saved = {module: module.services for module in modules}
    yield
    for module, services in saved.items():
        module.services = services


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_every_storage_fault_leaves_the_outcome_unchanged(scenario: Scenario) -> None:
    checked = await check_crash_safety(scenario)
    assert checked >= 10  # every storage call of the scenario, failing before and after
