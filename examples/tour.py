"""`make demo`: a scripted tour of example actors, in memory with a virtual clock.

Each section drives one pattern through the client and prints every history entry the actor records,
as it is committed, followed by the result. (A later version runs the same tour over HTTP against
`dormant dev`.)
"""

from __future__ import annotations

import asyncio
from typing import Any

from dormant import NonRetryableError, setup
from dormant.backends.memory import MemoryEventStore
from dormant.testing import TestEnv
from examples import approval_gate, counter, cross_actor_saga, race_auction, request_response, timers

registry = setup(*[definition for module in (counter, request_response, approval_gate, race_auction,
                                               cross_actor_saga, timers)
                   for definition in module.registry.actors.values()])


class Printer:
    """Prints the entries of every commit since the last call."""

    def __init__(self, store: MemoryEventStore) -> None:
        self._store = store
        self._seen = 0

    def flush(self) -> None:
        for commit in self._store.commit_log[self._seen:]:
            for item in commit.draft.upserts:
                print(f"    {commit.ref}  v{commit.version:<3} {_describe(item)}")
            for name, payload in commit.draft.events:
                print(f"    {commit.ref}  v{commit.version:<3} event {name}: {payload}")
        self._seen = len(self._store.commit_log)


def _describe(item: dict[str, Any]) -> str:
    kind, location, status = item["kind"], item["location"], item.get("status", "pending")
    if kind == "step":
        if status == "completed":
            compensated = " (compensated)" if item.get("rollback_done") else ""
            return f"step   {location} -> {item.get('output')!r}{compensated}"
        error = item.get("error") or {}
        return f"step   {location} {status}: {error.get('type')}: {error.get('message')}"
    if kind == "message":
        bodies = [m["body"] for m in item.get("messages", [])]
        return f"queue  {location} received {bodies}" if bodies else f"queue  {location} waiting"
    if kind == "sleep":
        return f"sleep  {location} {status}"
    if kind == "race":
        return f"race   {location} winner={item.get('winner')}"
    if kind == "loop":
        return f"loop   {location} iteration {item.get('iteration', 0)}"
    return f"{kind:<6} {location} {status}"


async def main() -> None:
    async def declined(order_id: str, amount: int) -> None:
        if amount > 1_000:
            raise NonRetryableError(f"card declined for {amount}")

    cross_actor_saga.services = cross_actor_saga.Services(charge_card=declined)
    async with TestEnv(registry) as env:
        show = Printer(env.store)

        print("\n1. Counter: a durable queue loop")
        handle = env.client.get_or_create("workflow-counter", ["main"])
        for delta in (1, 2, 39):
            await handle.send("counter", {"delta": delta})
        await env.run_until_idle()
        show.flush()
        print(f"  => state {await handle.get_state()}")

        print("\n2. Request/response: send(wait=True) gets the workflow's answer")
        handle = env.client.get_or_create("request-response", ["main"])
        result = await handle.send("requests", {"value": 21}, wait=True, timeout=5)
        await env.run_until_idle()
        show.flush()
        print(f"  => {result.status}: {result.response}")

        print("\n3. Human approval gate: the workflow waits for a decision")
        gate = env.client.get_or_create("approval-gate", ["order-7"])
        await gate.status()
        await env.run_until_idle()
        show.flush()
        print(f"  .. waiting for {(await gate.status()).waiting_for.queues}")
        await gate.send("approval", {"approved": True})
        await env.run_until_idle()
        show.flush()
        print(f"  => {(await gate.get_state()).status}")

        print("\n4. Timer + race: an auction expires after 24 hours of virtual time")
        auction = env.client.get_or_create("auction", ["item-123"])
        await auction.status()
        await env.run_until_idle()
        show.flush()
        await env.advance(24 * 3600)
        show.flush()
        print(f"  => {await auction.get_state()}")

        print("\n5. Saga: a declined charge compensates the reservation")
        saga = env.client.get_or_create("checkout-saga", ["main"])
        await saga.send("orders", {"order_id": "ok-1", "amount": 40})
        await saga.send("orders", {"order_id": "big-2", "amount": 5_000})
        await env.advance(60)
        show.flush()
        status = await saga.status()
        inventory = await env.client.get_or_create("inventory", ["main"]).get_state()
        print(f"  => workflow {status.workflow.value}: {status.error}")
        print(f"  => inventory reservations {inventory.reservations}, released {inventory.released}")


if __name__ == "__main__":
    asyncio.run(main())
