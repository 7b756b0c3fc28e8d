"""Parity: whole workflows of examples/ run with the same inputs through TestEnv (the memory backends) and through
AwsTestEnv (DynamoDB Local, moto's SQS and S3, the poller and the real worker; tier 2: LocalStack), and everything a
user can observe comes out the same: state, status (what it waits for and until when, output, error), history
(locations, kinds, statuses, step results), events and responses.

Each scenario drives an env and returns what it observed; the examples' outside services are fakes that record
their calls (and those calls are observed too)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from dormant import NonRetryableError, setup
from dormant.settings import Settings
from dormant.testing import TestEnv
from examples import (
    bounded_map,
    counter,
    join_dashboard,
    payment_webhook,
    progress_broadcast,
    race_auction,
    request_response,
    rollback_checkout,
    timers,
)
from tests.aws_env import AwsTestEnv
from tests.localstack import ON_LOCALSTACK

registry = setup(*[definition for module in (counter, request_response, progress_broadcast, timers, race_auction,
                                             join_dashboard, payment_webhook, rollback_checkout, bounded_map)
                   for definition in module.registry.actors.values()])

Env = Any  # TestEnv or AwsTestEnv: the same interface
Calls = list[str]


async def observe(env: Env, actor_name: str, key: str) -> dict[str, Any]:
    """What a user of the actor can see (message ids and callback tokens, random by design, left out)."""
    handle = env.client.get_or_create(actor_name, [key])
    status = await handle.status()
    return {
        "state": (await handle.state()).model_dump(mode="json"),
        "status": {"workflow": status.workflow.value, "error": status.error, "output": status.output,
                   "waiting_for": status.waiting_for.model_dump(mode="json"), "paused": status.paused},
        "history": [(e.location, e.kind.value, e.status.value, e.output if e.kind.value == "step" else None,
                     e.error.type if e.error else None) for e in await handle.history()],
        "events": [(e.seq, e.name, e.payload, e.at) async for e in handle.events(follow=False)],
    }


# -- the scenarios -------------------------------------------------------------------------------------------------
async def queue_loops(env: Env, calls: Calls) -> dict[str, Any]:
    """A queue loop (counter), completable messages answered in order (request/response), events broadcast by steps
    (progress)."""
    counting = env.client.get_or_create("workflow-counter", ["main"])
    for delta in (1, 2, 3, -4, 10):
        await counting.send("counter", {"delta": delta})
    doubling = env.client.get_or_create("request-response", ["main"])
    answers = [await doubling.send("requests", {"value": value}, wait=True, timeout=60) for value in (3, 21)]
    progress = env.client.get_or_create("progress", ["job"])
    for value in (5, 6, 7):
        await progress.send("jobs", {"value": value})
    await env.run_until_idle()
    return {"counter": await observe(env, "workflow-counter", "main"),
            "answers": [(answer.status, answer.response) for answer in answers],
            "request-response": await observe(env, "request-response", "main"),
            "progress": await observe(env, "progress", "job")}


async def sleeps(env: Env, calls: Calls) -> dict[str, Any]:
    """Durable sleeps until absolute times (timers): one due in a minute, one in an hour, one already due."""
    handle = env.client.get_or_create("reminder", ["r"])
    start = env.now()
    for text, offset in (("soon", 60), ("later", 3600), ("overdue", -5)):
        await handle.send("reminders", {"text": text, "at": start + offset})
    seen = []
    await env.run_until_idle()
    seen.append(await observe(env, "reminder", "r"))
    await env.advance(61)
    seen.append(await observe(env, "reminder", "r"))
    await env.advance(3600)
    seen.append(await observe(env, "reminder", "r"))
    assert seen[-1]["state"]["fired"] == ["soon", "later", "overdue"]
    return {"reminder": seen}


async def join_and_race(env: Env, calls: Calls) -> dict[str, Any]:
    """A join of three fetches (dashboard) and races of a bid against a day's sleep (auctions): one sold, one
    expired."""
    dashboard = env.client.get_or_create("dashboard", ["d"])
    await dashboard.send("refresh", {})
    sold = env.client.get_or_create("auction", ["sold"])
    expired = env.client.get_or_create("auction", ["expired"])
    await sold.status()
    await expired.status()
    await env.run_until_idle()
    waiting = await observe(env, "auction", "expired")
    await sold.send("bids", {"amount": 75})
    await env.run_until_idle()
    await env.advance(race_auction.AUCTION_SECONDS + 1)
    return {"dashboard": await observe(env, "dashboard", "d"), "waiting": waiting,
            "sold": await observe(env, "auction", "sold"), "expired": await observe(env, "auction", "expired")}


async def callbacks(env: Env, calls: Calls) -> dict[str, Any]:
    """Callbacks an outside system completes (payment webhook): paid, declined, and expired after a day."""
    orders = ("paid", "declined", "expired")
    for order in orders:
        await env.client.get_or_create("payment-checkout", [order]).send("order", {"amount_cents": 4200})
    await env.run_until_idle()
    waiting = await observe(env, "payment-checkout", "paid")
    tokens = {order: url.rsplit("/", 1)[1] for order, url in (call.split(" ", 1) for call in calls)}
    completed = await env.client.complete_callback(tokens["paid"], {"status": "paid", "amount_cents": 4200,
                                                                     "reference": "pay_1"})
    failed = await env.client.fail_callback(tokens["declined"], "card_declined", "insufficient funds")
    await env.run_until_idle()
    await env.advance(payment_webhook.PAYMENT_TIMEOUT + 1)
    return {"waiting": waiting, "accepted": (completed.status, failed.status),
            **{order: await observe(env, "payment-checkout", order) for order in orders}}


async def rollbacks(env: Env, calls: Calls) -> dict[str, Any]:
    """Rollback: an order confirmed, then one whose confirmation fails for good after the charge: the charge is
    refunded and the reservation released, newest first, once each."""
    handle = env.client.get_or_create("checkout", ["shop"])
    await handle.send("orders", {"order_id": "o1"})
    await env.run_until_idle()
    await handle.send("orders", {"order_id": "unconfirmable-2"})
    await env.run_until_idle()
    return {"checkout": await observe(env, "checkout", "shop"), "calls": list(calls)}


async def bounded_maps(env: Env, calls: Calls) -> dict[str, Any]:
    """A bounded map (quorum write): a write acknowledged by a quorum, then one that loses two replicas and aborts
    after their retries."""
    handle = env.client.get_or_create("quorum-write", ["cluster"])
    await handle.send("writes", {"key": "k1", "value": "v1"})
    await env.run_until_idle()
    await handle.send("writes", {"key": "broken", "value": "v2"})
    await env.run_until_idle()
    await env.advance(2)  # the failed writes' retries
    return {"quorum": await observe(env, "quorum-write", "cluster"), "calls": sorted(calls)}


# -- the examples' outside services, as fakes that record their calls ------------------------------------------------
def fake_services(monkeypatch: pytest.MonkeyPatch, calls: Calls) -> None:
    async def create_payment(order_id: str, amount_cents: int, webhook_url: str, idempotency_key: str) -> str:
        calls.append(f"{order_id} {webhook_url}")
        return f"chk_{order_id}"

    async def reserve(order_id: str) -> str:
        calls.append(f"reserve {order_id}")
        return f"res-{order_id}"

    async def release(reservation_id: str) -> None:
        calls.append(f"release {reservation_id}")

    async def charge(order_id: str) -> str:
        calls.append(f"charge {order_id}")
        return f"ch-{order_id}"

    async def refund(charge_id: str) -> None:
        calls.append(f"refund {charge_id}")

    async def confirm(order_id: str) -> None:
        calls.append(f"confirm {order_id}")
        if order_id.startswith("unconfirmable"):
            raise NonRetryableError("the order service refused the order")

    async def write_replica(replica: str, key: str, value: str) -> str:
        calls.append(f"write {replica} {key}")
        if key == "broken" and replica in ("replica-1", "replica-2"):
            raise ConnectionError(f"{replica} is unreachable")
        return f"{replica}:{key}"

    monkeypatch.setattr(payment_webhook, "services", payment_webhook.Services(create_payment=create_payment))
    monkeypatch.setattr(rollback_checkout, "services",
                        rollback_checkout.Services(reserve, release, charge, refund, confirm))
    monkeypatch.setattr(bounded_map, "services", bounded_map.Services(write_replica=write_replica))


Scenario = Callable[[Env, Calls], Awaitable[dict[str, Any]]]
SCENARIOS: dict[str, Scenario] = {"queue-loops": queue_loops, "sleeps": sleeps, "join-and-race": join_and_race,
                                  "callbacks": callbacks, "rollbacks": rollbacks, "bounded-maps": bounded_maps}
# What each scenario must show (so that two runs wrong the same way still fail): (path into the observations, value).
EXPECTED: dict[str, list[tuple[tuple[Any, ...], Any]]] = {
    "queue-loops": [(("counter", "state"), {"value": 12, "processed": 5}),
                    (("answers",), [("completed", {"doubled": 6}), ("completed", {"doubled": 42})]),
                    (("progress", "state", "sum"), 18)],
    "sleeps": [(("reminder", 0, "status", "waiting_for", "queues"), [])],
    "join-and-race": [(("dashboard", "state", "summary"), {"users": 120, "orders": 45, "revenue": 9800}),
                      (("sold", "status", "output"), "sold"), (("expired", "status", "output"), "expired")],
    "callbacks": [(("accepted",), ("accepted", "accepted")), (("paid", "state", "status"), "paid"),
                  (("declined", "state", "status"), "declined"), (("expired", "state", "status"), "expired")],
    "rollbacks": [(("checkout", "status", "workflow"), "failed"),
                  (("calls",), ["reserve o1", "charge o1", "confirm o1", "reserve unconfirmable-2",
                                "charge unconfirmable-2", "confirm unconfirmable-2", "refund ch-unconfirmable-2",
                                "release res-unconfirmable-2"])],
    "bounded-maps": [(("quorum", "state", "acknowledged"), {"k1": ["replica-1", "replica-2", "replica-3"]}),
                     (("quorum", "state", "failed", "broken"),
                      "2 of 5 items failed, more than the 1 tolerated (tolerated_failures)")],
}


def at(observed: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        observed = observed[step]
    return observed


@pytest.fixture(params=["dynamodb_local", pytest.param("localstack", marks=ON_LOCALSTACK)])
def aws_settings(request: pytest.FixtureRequest) -> Settings:
    """The AWS stack the scenarios run on: DynamoDB Local with moto's SQS and S3, or (tier 2) LocalStack."""
    if request.param == "localstack":
        return Settings(endpoint_url=request.getfixturevalue("localstack_server"))
    return Settings(**request.getfixturevalue("aws_endpoints"))


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_a_workflow_runs_the_same_in_memory_and_on_aws(name: str, aws_settings: Settings,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = SCENARIOS[name]
    runs: dict[str, dict[str, Any]] = {}
    for where in ("memory", "aws"):
        calls: Calls = []
        fake_services(monkeypatch, calls)
        env = TestEnv(registry) if where == "memory" else AwsTestEnv(registry, settings=aws_settings)
        async with env:
            runs[where] = await scenario(env, calls)
            assert not env.failures, env.failures
    for path, expected in EXPECTED[name]:
        assert at(runs["memory"], path) == expected, path
    assert runs["aws"] == runs["memory"]
