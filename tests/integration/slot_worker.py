"""`python -m tests.integration.slot_worker SETTINGS_JSON MODE CONCURRENCY NAME ...`: a second worker process using
a limit's slots on the same table, beside the test's own.

- `contend NAME WORKERS CYCLES`: print `ready` once connected, then WORKERS tasks each take a slot CYCLES times (real
  time, a 60 s lease), hold it 30-80 ms and give it back; one JSON line per hold, `[start, end]` (epoch
  seconds, inside the hold).
- `hold NAME LEASE`: take one slot with a LEASE-second lease, print `held <slot> <lease end>`, then wait to be
  killed (kill -9: nobody releases or renews it).
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from collections.abc import Callable

from dormant.core.slots import LimitRule, SlotLease, SlotRequest
from dormant.dynamodb.store import DynamoEventStore
from dormant.ports import ActorRef
from dormant.settings import Settings


def request(rule: LimitRule, holder: str, now: float, lease: float) -> SlotRequest:
    return SlotRequest(rule=rule, ref=ActorRef(name="payer", key=(holder,)), holder=holder, now=now,
                       lease_until=now + lease, queued_since=now, queued=False)


def _print(start: float, end: float) -> None:
    sys.stdout.write(json.dumps([start, end]) + "\n")


async def contend(store: DynamoEventStore, rule: LimitRule, prefix: str, workers: int, cycles: int,
                  record: Callable[[float, float], None] = _print) -> None:
    async def worker(n: int) -> None:
        done = 0
        while done < cycles:
            now = time.time()
            answer = await store.acquire_slot(request(rule, f"{prefix}-{n}-{done}", now, 60.0))
            if not isinstance(answer, SlotLease):
                await asyncio.sleep(random.uniform(0.005, 0.03))
                continue
            start = time.time()
            # Long beside a request (a loaded moto answers in tens of ms): the holds overlap, the limit is reached.
            await asyncio.sleep(random.uniform(0.03, 0.08))
            end = time.time()
            await store.release_slot(answer, time.time())
            record(start, end)
            done += 1

    await asyncio.gather(*(worker(n) for n in range(workers)))


async def main(argv: list[str]) -> None:
    settings = Settings.model_validate_json(argv[0])
    mode, concurrency, name = argv[1], int(argv[2]), argv[3]
    rule = LimitRule(name=name, concurrency=concurrency, window=1.0, per_window=None)
    async with DynamoEventStore.connect(settings) as store:
        if mode == "contend":
            sys.stdout.write("ready\n")  # connected: the test starts its own workers now, so both compete
            sys.stdout.flush()
            await contend(store, rule, f"pid{id(store)}", int(argv[4]), int(argv[5]))
            return
        now = time.time()
        answer = await store.acquire_slot(request(rule, "the killed one", now, float(argv[4])))
        assert isinstance(answer, SlotLease), answer
        sys.stdout.write(f"held {answer.slot} {answer.expires!r}\n")
        sys.stdout.flush()
        await asyncio.sleep(3600)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
