"""`make bench-check`: fail when the engine got slower or bigger than its budget (the CI guard of issue 28).

    make bench-check                  # or: .venv/bin/python benchmarks/bench_check.py [--rounds 5]

Each round measures, in this one process, a calibration (a fixed pure-Python workload: dicts, lists, small objects,
JSON, as the engine's own work is) and then the engine's CPU per fresh step, per step under a flow-control limit
whose slot is free, per replayed entry, per drained message and per message changing one part of a 5 MB state (whole
wake-ups on the memory store, as benchmarks/engine.py's rows: `wake_actor`, the store's commit and its kept-versions
ring included). A CPU figure is checked as the median over the rounds of its CPU over the calibration measured just
before it, in the same round: load slows both alike, and a machine whose speed changes between rounds (a shared host
halving a VM's clock for seconds at a time) moves a round's two figures together, where the best of one figure over
the best of the other could pair a fast calibration with a slow workload (a CI run measured the drained message at
96 % of its budget so, while its rounds' ratios had a median of 56 %). The limited step is checked against the plain
fresh step measured just before it, as the median of the rounds' ratios too.
Memory (tracemalloc's peak of one wake-up, per step or entry beyond a 100-step one's) does not depend on load and is
checked in bytes. A row over its budget fails the run (exit status 1). The budgets have headroom over what the engine
measured when they were set (docs/performance.md); lower them when the engine gets faster, never raise them to make a
regression pass.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import engine as bench
from pydantic import BaseModel

from dormant import Limit, StepContext, WorkflowContext, actor, queue, setup
from dormant.memory.store import MemoryEventStore
from dormant.memory.transport import MemoryTransport
from dormant.ports import InboxMessage
from dormant.runtime.service import ActorService
from dormant.runtime.wake import wake_actor
from dormant.testing import VirtualClock

N = 1000  # steps, entries, messages per measured wake-up
BASE = 100  # memory: per step or entry beyond a run of this many

# Budgets: CPU as a ratio to the calibration's CPU (per item), memory in bytes per item. Set with about 25% headroom
# (15% for memory, which does not vary) over the best of 9 rounds on the 2-core CI machine, when a figure was its best
# round over the calibration's best (on a steady machine the medians of the rounds' ratios measure the same, within a
# few per cent: docs/performance.md, "The CI guard").
BUDGETS: dict[str, float] = {
    "fresh step (CPU / calibration)": 0.00095,
    "replayed entry (CPU / calibration)": 0.000105,
    "drained message (CPU / calibration)": 0.00270,
    # One part of a 5 MB state changed per message (issue 28's "5 MB state" row): its unchanged big strings are measured
    # once while they live (dormant.workflow.values.shaped_size); measuring the whole state per change is 10x this.
    "big state, one part changed (CPU / calibration)": 0.0043,
    # Issue 28 asks for 1.3; measured 1.21-1.22 since the slot calls are plain calls on the memory store (1.28-1.31
    # before, which is why this was 1.5: load alone moves it by a few hundredths). A deliberate regression (a
    # json.dumps of the lease per grant) measured 1.63 and fails, as 1.64x before the fix did.
    "limited step (CPU / fresh step)": 1.40,
    # tracemalloc's counts do not depend on the load: 480 and 286.5 B since issue 28's fourth round, 488.3 and 294.4 B
    # since its tenth (Entry's `extra` slot), so a few per cent of headroom; an `Entry.__dict__` read per step (which
    # makes the dict) measured 544 B and passed the 550 before.
    "fresh step (bytes)": 505.0,
    "replayed entry (bytes)": 305.0,
}


@dataclass(slots=True)
class _Item:
    name: str
    size: int
    tags: list[str]


def calibration() -> float:
    """CPU seconds of a fixed pure-Python workload shaped like the engine's (the yardstick of the CPU budgets)."""
    start = time.process_time()
    total = 0
    for round_ in range(40):
        items = [_Item(f"item-{i}", i, [str(i), "x"]) for i in range(1000)]
        records = [{"location": item.name, "kind": "step", "seq": item.size, "tags": item.tags} for item in items]
        total += sum(len(json.dumps(record, separators=(",", ":"))) for record in records[::10])
        index = {record["location"]: record for record in records}
        total += sum(1 for name in index if name.endswith(str(round_ % 10)))
    assert total > 0
    return time.process_time() - start


async def _cpu(work: Callable[[], Awaitable[Any]]) -> float:
    gc.collect()
    start = time.process_time()
    await work()
    return time.process_time() - start


# The fresh steps' actor has a state, as real actors do (an order of ten lines), which its steps do not touch: an
# untouched state costs a step nothing, and work on it per step (a serialization, a check) shows.
class Line(BaseModel):
    sku: str = "sku-0000"
    quantity: int = 1
    price: float = 9.99


class Order(BaseModel):
    customer: str = "customer-0000"
    status: str = "open"
    lines: list[Line] = [Line(sku=f"sku-{i:04}") for i in range(10)]
    notes: dict[str, str] = {"gift": "no", "channel": "web"}


stateful = actor("check-steps", state=Order)


@stateful.workflow
async def run_stateful(ctx: WorkflowContext) -> int:
    total = 0
    if ctx.input.get("limited"):  # each step under a flow-control limit whose slot is free
        for i in range(int(ctx.input["steps"])):
            total += await ctx.step(f"step-{i}", _one, limit="check")
    else:
        for i in range(int(ctx.input["steps"])):
            total += await ctx.step(f"step-{i}", _one)
    return total


def _one(_: StepContext) -> int:
    return 1


class Big(BaseModel):
    parts: list[str] = []


big = actor("check-big", state=Big, queues={"change": queue(dict)})
BIG_PARTS, BIG_CHANGES = 100, 20  # 100 parts of 50,000 characters: a 5 MB state; messages per measured wake-up


@big.workflow
async def run_big(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("next")

        def apply(s: StepContext) -> None:
            size = int(message.body["size"])
            if not s.state.parts:
                s.state.parts = ["x" * size] * BIG_PARTS
            else:
                s.state.parts[int(message.body["i"]) % BIG_PARTS] = message.body["c"] * size
        await loop.step("apply", apply)
    await ctx.loop("loop", iteration)


registry = setup(*bench.registry.actors.values(), stateful, big, limits={"check": Limit(concurrency=1000)})


async def fresh_step(limited: bool = False) -> float:
    service = ActorService(registry, MemoryEventStore(keep_commit_log=False), MemoryTransport(), VirtualClock())
    ref = service.ref(stateful.name, [str(uuid.uuid4())])
    await service.ensure_created(ref, {"steps": N, "limited": limited})

    async def wake() -> None:
        report = await wake_actor(service, ref)
        assert report.outcome == "completed" and report.commits >= N, report
    return await _cpu(wake) / N


async def replayed_entry() -> float:
    service, ref = await bench.replay_actor(N)

    async def wake() -> None:
        report = await wake_actor(service, ref)
        assert report.outcome == "sleeping" and report.replayed == N, report
    return await _cpu(wake) / N


async def drained_message() -> float:
    service = bench.new_service()
    ref = service.ref(bench.counter.name, [str(uuid.uuid4())])
    await service.ensure_created(ref)
    assert (await wake_actor(service, ref)).outcome == "sleeping"
    for _ in range(N):
        await service.store.enqueue(ref, InboxMessage(id=str(uuid.uuid4()), queue="counter", body={"delta": 1},
                                                      created_at=service.clock.now()))

    async def wake() -> None:
        report = await wake_actor(service, ref)
        assert report.outcome == "sleeping" and report.commits >= N, report
    return await _cpu(wake) / N


async def big_state_change() -> float:
    """CPU per message of one wake-up whose every message changes one part of a 5 MB state (built by a wake-up
    before)."""
    service = ActorService(registry, MemoryEventStore(keep_commit_log=False), MemoryTransport(), VirtualClock())
    ref = service.ref(big.name, [str(uuid.uuid4())])
    await service.ensure_created(ref)

    async def send(i: int) -> None:
        await service.store.enqueue(ref, InboxMessage(id=str(uuid.uuid4()), queue="change", created_at=0.0,
                                                      body={"size": 5_000_000 // BIG_PARTS, "i": i, "c": "yz"[i % 2]}))
    await send(0)
    assert (await wake_actor(service, ref)).outcome == "sleeping"
    for i in range(1, BIG_CHANGES + 1):
        await send(i)

    async def wake() -> None:
        report = await wake_actor(service, ref)
        assert report.outcome == "sleeping" and report.commits >= BIG_CHANGES, report
    return await _cpu(wake) / BIG_CHANGES


async def _peak(service: Any, ref: Any, outcome: str) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        report = await wake_actor(service, ref)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.outcome == outcome, report
    return peak


async def step_bytes() -> float:
    peaks = []
    for n in (BASE, N):
        service = bench.new_service()
        ref = service.ref("bench-steps", [str(uuid.uuid4())])
        await service.ensure_created(ref, bench.StepsInput(steps=n).model_dump())
        peaks.append(await _peak(service, ref, "completed"))
    return (peaks[1] - peaks[0]) / (N - BASE)


async def entry_bytes() -> float:
    peaks = []
    for n in (BASE, N):
        service, ref = await bench.replay_actor(n)
        peaks.append(await _peak(service, ref, "sleeping"))
    return (peaks[1] - peaks[0]) / (N - BASE)


async def measure(rounds: int) -> dict[str, float]:
    """Each CPU figure's median over `rounds` rounds of its ratio to the round's calibration, and the memory
    figures."""
    ratios: dict[str, list[float]] = {}  # per figure, per round: its CPU over the round's calibration
    limited: list[float] = []  # per round: a limited step's CPU over a plain one's, measured one after the other
    for round_ in range(rounds + 1):
        calibrated = calibration()
        figures = {"fresh step": await fresh_step(), "limited step": await fresh_step(limited=True),
                   "replayed entry": await replayed_entry(), "drained message": await drained_message(),
                   "big state, one part changed": await big_state_change()}
        print(f"round {round_}: calibration {calibrated * 1e3:.1f} ms, "
              + ", ".join(f"{name} {value * 1e6:.2f} us" for name, value in figures.items()) + " (CPU)",
              file=sys.stderr, flush=True)
        if round_:  # the first round warms up
            limited.append(figures.pop("limited step") / figures["fresh step"])
            for name, value in figures.items():
                ratios.setdefault(name, []).append(value / calibrated)
    best = {f"{name} (CPU / calibration)": statistics.median(values) for name, values in ratios.items()}
    # A limited step against the plain one measured next to it: the median of the rounds' ratios (issue 28: 1.3x).
    best["limited step (CPU / fresh step)"] = statistics.median(limited)
    best["fresh step (bytes)"] = await step_bytes()
    best["replayed entry (bytes)"] = await entry_bytes()
    return best


def over_budget(best: dict[str, float]) -> list[str]:
    return [name for name, budget in BUDGETS.items() if best[name] > budget]


def print_table(best: dict[str, float], rounds: int) -> None:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"bench-check: medians of {rounds} rounds' ratios, N = {N:,}, load {load}\n")
    print("| figure | measured | budget | share of budget | |\n|---|---:|---:|---:|---|")
    for name, budget in BUDGETS.items():
        value = best[name]
        print(f"| {name} | {value:.6g} | {budget:.6g} | {value / budget:.0%} | "
              f"{'**over**' if value > budget else 'ok'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    started = time.perf_counter()
    best = asyncio.run(measure(args.rounds))
    print_table(best, args.rounds)
    failed = over_budget(best)
    if failed:
        # A burst of other work during one set of rounds can slow a workload's rounds and spare the calibration's
        # (seen on a shared machine: every CPU figure about 25% up at once). A regression is over budget every time:
        # so a figure over budget is measured again, with fresh rounds, and fails only if it is over again.
        print(f"\nover budget: {', '.join(failed)}: measured again to confirm\n")
        again = asyncio.run(measure(args.rounds))
        print_table(again, args.rounds)
        failed = [name for name in failed if name in over_budget(again)]
    print(f"\n{time.perf_counter() - started:.1f} s")
    if failed:
        print(f"bench-check FAILED: over budget in both measurements: {', '.join(failed)}", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
