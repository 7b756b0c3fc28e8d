"""`python -m tests.integration.slot_worker SETTINGS_JSON MODE CONCURRENCY NAME ...`: a second worker process using
a limit's slots on the same table, beside the test's own.

- `contend NAME WORKERS CYCLES TOTAL LOG`: print `ready` once connected, then hold one slot until the other process
  holds one too (the crossing), then WORKERS tasks each take a slot CYCLES times (real time, a 60 s lease) and give
  it back; one JSON line per hold, `[start, end]` (epoch seconds, inside the hold). TOTAL is the number of workers
  of both processes; LOG is the file through which both say what they hold (see `Holds`).
- `hold NAME LEASE`: take one slot with a LEASE-second lease, print `held <slot> <lease end>`, then wait to be
  killed (kill -9: nobody releases or renews it).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

from dormant.core.slots import LimitRule, SlotLease, SlotRequest
from dormant.dynamodb.store import DynamoEventStore
from dormant.ports import ActorRef
from dormant.settings import Settings

# How long a holder waits for the others (the condition below) before the test fails: nothing here depends on
# the machine being fast, this only bounds a run whose store never lets the condition come.
PATIENCE = 120.0
POLL = 0.005


def request(rule: LimitRule, holder: str, now: float, lease: float) -> SlotRequest:
    return SlotRequest(rule=rule, ref=ActorRef(name="payer", key=(holder,)), holder=holder, now=now,
                       lease_until=now + lease, queued_since=now, queued=False)


def _print(start: float, end: float) -> None:
    sys.stdout.write(json.dumps([start, end]) + "\n")


class Holds:
    """A log both processes append to (one short line per write, O_APPEND: lines never interleave): `start ID` once
    a hold began, `end ID` before it ends, `done ID` when a worker has finished. A holder gives its slot back only
    once the log shows, at or after its own start line, as many holders at once as the limit allows (or every
    worker still working holding one), so the limit is reached by force, not by timing luck. A hold's recorded
    interval is inside its lease (it starts after the acquire, before its start line; it ends after its end line,
    before the release), so every hold open at a line of the log was open at the moment that line was written."""

    def __init__(self, path: Path, concurrency: int, total: int) -> None:
        self.path, self.concurrency, self.total = path, concurrency, total
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, line: str) -> int:
        """Append a line; its index in the log."""
        os.write(self._fd, f"{line}\n".encode())
        return self.lines().index(line)

    def lines(self) -> list[str]:
        text = self.path.read_text()
        return text.split("\n")[:-1]  # a line still being written (no newline yet) is not read

    async def until(self, done: Callable[[list[str]], bool], what: str) -> None:
        deadline = time.monotonic() + PATIENCE
        while not done(self.lines()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {PATIENCE} s; the log ends with {self.lines()[-20:]}")
            await asyncio.sleep(POLL)

    def full_since(self, index: int, lines: list[str]) -> bool:
        """Whether, at some line from `index` on, the limit's worth of holders (or every working worker) held."""
        holding: set[str] = set()
        finished = 0
        for at, line in enumerate(lines):
            verb, _, who = line.partition(" ")
            if verb == "start":
                holding.add(who)
            elif verb == "end":
                holding.discard(who)
            elif verb == "done":
                finished += 1
            if at >= index and len(holding) >= min(self.concurrency, self.total - finished):
                return True
        return False


async def take(store: DynamoEventStore, rule: LimitRule, holder: str) -> SlotLease:
    """A slot, asked for again after each refusal (the others give theirs back as the log lets them)."""
    deadline = time.monotonic() + PATIENCE
    while True:
        answer = await store.acquire_slot(request(rule, holder, time.time(), 60.0))
        if isinstance(answer, SlotLease):
            return answer
        assert time.monotonic() < deadline, f"{holder}: no slot within {PATIENCE} s"
        await asyncio.sleep(random.uniform(0.005, 0.03))  # a retry's pause, not a wait for something


async def contend(store: DynamoEventStore, rule: LimitRule, prefix: str, workers: int, cycles: int, holds: Holds,
                  record: Callable[[float, float], None] = _print) -> None:
    # The crossing: one hold of each process at the same time (both hold until each has seen the other's start).
    lease = await take(store, rule, f"{prefix}-cross")
    start = time.time()
    holds.write(f"start {prefix}-cross")
    await holds.until(lambda lines: any(line.startswith("start ") and line.endswith("-cross")
                                        and line != f"start {prefix}-cross" for line in lines),
                      f"{prefix}: the other process's crossing hold")
    holds.write(f"end {prefix}-cross")
    end = time.time()
    await store.release_slot(lease, time.time())
    record(start, end)

    async def worker(n: int) -> None:
        for done in range(cycles):
            holder = f"{prefix}-{n}-{done}"
            lease = await take(store, rule, holder)
            start = time.time()
            mine = holds.write(f"start {holder}")
            await holds.until(functools.partial(holds.full_since, mine), f"{holder}: the limit's worth of holders")
            holds.write(f"end {holder}")
            end = time.time()
            await store.release_slot(lease, time.time())
            record(start, end)
        holds.write(f"done {prefix}-{n}")

    await asyncio.gather(*(worker(n) for n in range(workers)))


async def main(argv: list[str]) -> None:
    settings = Settings.model_validate_json(argv[0])
    mode, concurrency, name = argv[1], int(argv[2]), argv[3]
    rule = LimitRule(name=name, concurrency=concurrency, window=1.0, per_window=None)
    async with DynamoEventStore.connect(settings) as store:
        if mode == "contend":
            sys.stdout.write("ready\n")  # connected: the test starts its own workers now, so both compete
            sys.stdout.flush()
            holds = Holds(Path(argv[7]), concurrency, int(argv[6]))
            await contend(store, rule, f"pid{os.getpid()}", int(argv[4]), int(argv[5]), holds)
            return
        now = time.time()
        answer = await store.acquire_slot(request(rule, "the killed one", now, float(argv[4])))
        assert isinstance(answer, SlotLease), answer
        sys.stdout.write(f"held {answer.slot} {answer.expires!r}\n")
        sys.stdout.flush()
        await asyncio.sleep(3600)  # held until the test kills this process


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
