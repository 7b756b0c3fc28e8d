"""Engine benchmarks for the goals of DESIGN section 6, all in memory.

    make bench                                   # or: .venv/bin/python benchmarks/engine.py
    .venv/bin/python benchmarks/engine.py --profile   # cProfile of the 1,000-step run and of a replay

Measures (time.perf_counter, one warm-up run, median of several runs):
1. sequential steps: one wake-up runs N steps, each committing; "wake-up" is `wake_actor` against the
   memory store, "engine only" is an `Execution` with a no-op checkpointer driven by `run_workflow`;
2. replay: N completed steps in history, then a queue wait that suspends; woken again. The store load
   (pydantic validation of the entries) and the engine replay (Execution + run_workflow) are timed apart;
3. the DESIGN counter (a queue loop): entries loaded and replayed, and the time of one wake-up that
   processes one message, after 10 and after 10,000 processed messages;
   2b. a bounded map of N items (50 in flight, a step each): the wake-up that runs it, and the replay of it
   finished (every item's entries loaded, no item run again), per item; and the entries each commit carries;
4. memory: tracemalloc's peak during a whole wake-up of N sequential steps (store included), and what
   the engine's live history holds per entry. Every timed row also reports the share of its CPU time spent
   in the garbage collector (gc.callbacks).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import os
import platform
import pstats
import statistics
import sys
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `examples` is the checkout's, not installed

import pydantic
from pydantic import BaseModel

from dormant import StepContext, WorkflowContext, actor, queue, setup
from dormant.actor import Registry
from dormant.core.search import visible
from dormant.memory.store import MemoryEventStore
from dormant.memory.transport import MemoryTransport
from dormant.ports import ActorRef, ActorSnapshot, InboxMessage
from dormant.runtime.service import ActorService
from dormant.runtime.wake import ActorHost, wake_actor
from dormant.testing import TestEnv, VirtualClock
from dormant.workflow.execution import Checkpointer, CommitDraft, Execution
from dormant.workflow.history import QueuedMessage, WorkflowRecord, WorkflowState
from dormant.workflow.runner import run_workflow
from dormant.workflow.state_cell import StateCell
from examples.counter import counter

GOAL_STEP_MS = 0.1  # DESIGN: engine CPU per step
GOAL_WAKE_STEP_MS = 0.05  # issue 11: a whole in-memory wake-up, CPU per step
GOAL_REPLAY_MS = 0.02
GOAL_STEP_BYTES = 1024  # issue 11: memory per step of a whole wake-up
RUNS = 5  # timed runs per measurement (after one warm-up)


# ---- actors under test -------------------------------------------------------------------------
class StepsInput(BaseModel):
    steps: int
    wait: bool = False


steps_actor = actor("bench-steps", queues={"go": queue(dict)})


def _one(_: StepContext) -> int:
    return 1


@steps_actor.workflow
async def run_steps(ctx: WorkflowContext) -> int:
    """N sequential steps; with `wait`, then suspend on a queue wait (the replay case)."""
    spec = StepsInput.model_validate(ctx.input)
    total = 0
    for i in range(spec.steps):
        total += await ctx.step(f"step-{i}", _one)
    if spec.wait:
        await ctx.queue.next("wait-go")
    return total


class MapInput(BaseModel):
    items: int
    bound: int = 50
    wait: bool = False


map_actor = actor("bench-map", queues={"go": queue(dict)})


async def _map_item(item_ctx: WorkflowContext, item: int) -> int:
    return int(await item_ctx.step("work", _one)) + item


@map_actor.workflow
async def run_map(ctx: WorkflowContext) -> int:
    """A map of N items, `bound` in flight, one step each; with `wait`, then suspend on a queue wait."""
    spec = MapInput.model_validate(ctx.input)
    result = await ctx.map("items", list(range(spec.items)), _map_item, max_concurrency=spec.bound)
    if spec.wait:
        await ctx.queue.next("wait")
    return len(result.values)


# The DESIGN counter (a queue loop, one step per message) is examples/counter.py.
registry: Registry = setup(steps_actor, map_actor, counter)


# ---- harness -----------------------------------------------------------------------------------
def new_service() -> ActorService:
    # No commit log: it is a test feature (the crash tests read it), a heap a real store does not keep.
    return ActorService(registry, MemoryEventStore(keep_commit_log=False), MemoryTransport(), VirtualClock())


async def no_checkpoint(_: CommitDraft) -> None:
    """The engine-only checkpointer: commits cost nothing."""


def engine_execution(service: ActorService, snapshot: ActorSnapshot,
                     checkpointer: Checkpointer = no_checkpoint) -> Execution:
    """An Execution set up exactly as the runtime does (dormant.runtime.wake), but committing to `checkpointer`
    (by default nowhere)."""
    definition = service.registry.get(snapshot.ref.name)
    state = StateCell(definition.state, snapshot.state)
    vars = definition.vars() if definition.vars else None
    search = visible(definition.search, snapshot.search)
    inbox = [QueuedMessage(id=m.id, name=m.queue, body=m.body, created_at=m.created_at)
             for m in snapshot.inbox if m.kind == "queue"]
    return Execution(host=ActorHost(service, definition, snapshot, state, vars, lambda: snapshot.version, search),
                     entries=snapshot.history, search=search,
                     record=snapshot.workflow, state=state, inbox=inbox, now=service.clock.now,
                     checkpointer=checkpointer, workflow_input=snapshot.meta.input)


async def engine_run(service: ActorService, snapshot: ActorSnapshot) -> tuple[WorkflowRecord, Execution]:
    definition = service.registry.get(snapshot.ref.name)
    assert definition.workflow_fn is not None
    execution = engine_execution(service, snapshot)
    return await run_workflow(definition.workflow_fn, execution), execution


async def load(service: ActorService, ref: ActorRef) -> ActorSnapshot:
    snapshot = await service.store.load(ref)
    assert snapshot is not None
    return snapshot


@dataclass
class Timing:
    median: float  # wall seconds (perf_counter)
    best: float
    cpu: float  # median process CPU seconds: far below `median` means the machine was busy elsewhere
    gc: float = 0.0  # median CPU seconds spent in the garbage collector


class CollectorClock:
    """CPU time spent in the garbage collector (gc.callbacks), while `running`."""

    def __init__(self) -> None:
        self.spent = 0.0
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.spent += time.process_time() - self._start


COLLECTOR = CollectorClock()


async def timed(fn: Callable[[], Awaitable[Any]], runs: int,
                setup_fn: Callable[[], Awaitable[Any]] | None = None) -> Timing:
    """`runs` calls of `fn` after one warm-up call; `setup_fn` runs untimed before each call."""
    samples: list[float] = []
    cpu: list[float] = []
    collector: list[float] = []
    for i in range(runs + 1):
        if setup_fn is not None:
            await setup_fn()
        gc.collect()
        gc_start = COLLECTOR.spent
        cpu_start, start = time.process_time(), time.perf_counter()
        await fn()
        elapsed, cpu_elapsed = time.perf_counter() - start, time.process_time() - cpu_start
        if i:  # the first call is the warm-up
            samples.append(elapsed)
            cpu.append(cpu_elapsed)
            collector.append(COLLECTOR.spent - gc_start)
    return Timing(statistics.median(samples), min(samples), statistics.median(cpu), statistics.median(collector))


@dataclass
class Row:
    case: str
    n: int
    what: str
    timing: Timing
    per_item: bool = False  # divide by n (per step / per replayed entry)
    goal_ms: float | None = None
    loaded: int | None = None
    replayed: int | None = None
    met: str = ""

    def per_ms(self, seconds: float) -> float | None:
        return seconds * 1e3 / self.n if self.per_item else None

    def verdict(self) -> str:
        """Goal met by the median wall time / by the median CPU time (DESIGN's goal is engine CPU)."""
        if self.met or not self.per_item or self.goal_ms is None:
            return self.met
        goal = self.goal_ms
        return " / ".join("yes" if (self.per_ms(t) or 0.0) <= goal else "**no**"
                          for t in (self.timing.median, self.timing.cpu))


# ---- 1. sequential steps -----------------------------------------------------------------------
async def bench_steps(n: int, runs: int) -> list[Row]:
    holder: dict[str, Any] = {}

    async def fresh_actor() -> None:
        service = new_service()
        ref = service.ref("bench-steps", [str(uuid.uuid4())])
        await service.ensure_created(ref, StepsInput(steps=n).model_dump())
        holder["service"], holder["ref"] = service, ref

    async def wake() -> None:
        report = await wake_actor(holder["service"], holder["ref"])
        assert report.outcome == "completed" and report.commits >= n and report.replayed == 0, report

    wake_t = await timed(wake, runs, fresh_actor)

    await fresh_actor()
    service, snapshot = holder["service"], await load(holder["service"], holder["ref"])

    async def engine() -> None:
        record, execution = await engine_run(service, snapshot)
        assert record.state is WorkflowState.COMPLETED and record.output == n and execution.commits >= n

    engine_t = await timed(engine, runs)
    case = "sequential steps, one wake-up"
    return [Row(case, n, "whole wake-up incl. memory store (a commit per step)", wake_t, True, GOAL_WAKE_STEP_MS,
                0, 0),
            Row(case, n, "engine only (no-op checkpointer)", engine_t, True, GOAL_STEP_MS, 0, 0)]


# ---- 2. replay ---------------------------------------------------------------------------------
async def replay_actor(n: int) -> tuple[ActorService, ActorRef]:
    """An actor with n completed steps in history, suspended on a queue wait."""
    service = new_service()
    ref = service.ref("bench-steps", [f"replay-{n}"])
    await service.ensure_created(ref, StepsInput(steps=n, wait=True).model_dump())
    report = await wake_actor(service, ref)
    assert report.outcome == "sleeping", report
    return service, ref


async def bench_replay(n: int, runs: int) -> list[Row]:
    service, ref = await replay_actor(n)
    snapshot = await load(service, ref)
    assert len(snapshot.history) == n, len(snapshot.history)

    async def load_only() -> None:
        await load(service, ref)

    async def engine() -> None:
        record, execution = await engine_run(service, snapshot)
        assert record.state is WorkflowState.SLEEPING and execution.replayed == n and execution.commits == 0

    async def wake() -> None:
        report = await wake_actor(service, ref)
        assert report.outcome == "sleeping" and report.replayed == n and report.commits == 0, report

    load_t = await timed(load_only, runs)
    engine_t = await timed(engine, runs)
    wake_t = await timed(wake, runs)
    case = "replay of N completed steps"
    return [Row(case, n, "store load (pydantic validation of entries)", load_t, True, None, n),
            Row(case, n, "engine replay (Execution + run_workflow)", engine_t, True, GOAL_REPLAY_MS, n, n),
            Row(case, n, "whole wake-up (load + replay, no commit)", wake_t, True, GOAL_REPLAY_MS, n, n)]


# ---- 3. queue loop -----------------------------------------------------------------------------
async def fill_counter(env: TestEnv, key: str, messages: int, batch: int) -> float:
    """Have counter `key` process `messages` messages: send a batch, let it drain, repeat. Returns seconds."""
    handle = env.client.get_or_create(counter.name, [key])
    start = time.perf_counter()
    sent = 0
    while sent < messages:
        for _ in range(min(batch, messages - sent)):
            await handle.send("counter", {"delta": 1})
            sent += 1
        await env.run_until_idle()
    elapsed = time.perf_counter() - start
    state = await handle.state()
    assert state.processed == messages and not env.failures, (state, env.failures)
    return elapsed


async def bench_counter(checkpoints: list[int], runs: int, batch: int = 1000) -> tuple[list[Row], list[str]]:
    """One counter actor per checkpoint, all in one store; their wake-ups are timed in alternation so
    that machine noise hits every checkpoint alike. Sub-millisecond wake-ups: 10x the runs."""
    runs *= 10
    notes: list[str] = []
    async with TestEnv(registry) as env:
        refs = [env.service.ref(counter.name, [f"after-{n}"]) for n in checkpoints]
        for n, ref in zip(checkpoints, refs, strict=True):
            fill_s = await fill_counter(env, ref.key[0], n, batch)
            notes.append(f"reaching {n:,} processed messages took {fill_s:.1f} s "
                         f"({fill_s * 1e3 / n:.3f} ms per message, sends included)")
        # The filled store (its commit log above all) is a big heap that a real wake-up process would
        # not have: freeze it so that the collections around each timed wake-up stay cheap.
        gc.collect()
        gc.freeze()
        busy: list[list[tuple[float, float, float]]] = [[] for _ in refs]  # (wall, cpu, gc) seconds
        idle: list[list[tuple[float, float, float]]] = [[] for _ in refs]
        loaded: list[set[int]] = [set() for _ in refs]
        replayed: list[set[int]] = [set() for _ in refs]
        idle_loaded: list[set[int]] = [set() for _ in refs]
        idle_replayed: list[set[int]] = [set() for _ in refs]
        # Wake-ups driven directly (no transport). A busy wake-up processes the one message enqueued
        # just before it; an idle one finds nothing and commits nothing.
        for run in range(runs + 1):
            for i, ref in enumerate(refs):
                message = InboxMessage(id=str(uuid.uuid4()), queue="counter", body={"delta": 1},
                                       created_at=env.clock.now())
                await env.store.enqueue(ref, message)
                loaded[i].add(len((await load(env.service, ref)).history))
                gc.collect()
                gc_start, cpu_start, start = COLLECTOR.spent, time.process_time(), time.perf_counter()
                report = await wake_actor(env.service, ref)
                elapsed = (time.perf_counter() - start, time.process_time() - cpu_start, COLLECTOR.spent - gc_start)
                assert report.outcome == "sleeping" and report.commits >= 1, report
                replayed[i].add(report.replayed)
                if run:  # the first round is the warm-up
                    busy[i].append(elapsed)
            for i, ref in enumerate(refs):
                idle_loaded[i].add(len((await load(env.service, ref)).history))
                gc.collect()
                gc_start, cpu_start, start = COLLECTOR.spent, time.process_time(), time.perf_counter()
                report = await wake_actor(env.service, ref)
                elapsed = (time.perf_counter() - start, time.process_time() - cpu_start, COLLECTOR.spent - gc_start)
                assert report.commits == 0, report
                idle_replayed[i].add(report.replayed)
                if run:
                    idle[i].append(elapsed)
        gc.unfreeze()
        for n, ref in zip(checkpoints, refs, strict=True):
            state = await env.client.get_or_create(counter.name, [ref.key[0]]).state()
            assert state.processed == n + runs + 1, state
    rows: list[Row] = []
    case = "queue loop (DESIGN counter)"
    for i, n in enumerate(checkpoints):
        rows.append(Row(case, n, "wake-up that processes 1 message", _timing(busy[i]), loaded=max(loaded[i]),
                        replayed=max(replayed[i])))
        rows.append(Row(case, n, "idle wake-up (nothing queued)", _timing(idle[i]), loaded=max(idle_loaded[i]),
                        replayed=max(idle_replayed[i])))
    _flat_verdicts(rows)
    return rows, notes


def _timing(samples: list[tuple[float, float, float]]) -> Timing:
    wall = [w for w, _, _ in samples]
    return Timing(statistics.median(wall), min(wall), statistics.median(c for _, c, _ in samples),
                  statistics.median(g for _, _, g in samples))


def _flat_verdicts(rows: list[Row], tolerance: float = 1.5) -> None:
    """The last checkpoint's rows are "flat" if entries match the first's and time is within `tolerance`x."""
    by_what: dict[str, list[Row]] = {}
    for row in rows:
        by_what.setdefault(row.what, []).append(row)
    for series in by_what.values():
        first, last = series[0], series[-1]
        same = (first.loaded, first.replayed) == (last.loaded, last.replayed)
        ratio = last.timing.median / first.timing.median
        last.met = f"{'yes' if same and ratio <= tolerance else '**no**'} ({ratio:.2f}x)"
        first.met = "(baseline)"


# ---- output ------------------------------------------------------------------------------------
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def table(rows: list[Row]) -> str:
    lines = ["| case | N | measured | wall ms median | wall ms best | CPU ms median | wall ms per step/entry "
             "| CPU ms per step/entry | goal ms | met (wall / CPU) | GC % of CPU | entries loaded | replayed |",
             "|---|---:|---|---:|---:|---:|---:|---:|---|---|---:|---:|---:|"]

    def num(value: float | int | None, fmt: str) -> str:
        return "" if value is None else format(value, fmt)

    for r in rows:
        goal = f"<= {r.goal_ms}" if r.goal_ms is not None else ("flat in N" if r.case.startswith("queue") else "")
        lines.append(
            f"| {r.case} | {r.n:,} | {r.what} | {r.timing.median * 1e3:.2f} | {r.timing.best * 1e3:.2f} "
            f"| {r.timing.cpu * 1e3:.2f} | {num(r.per_ms(r.timing.median), '.4f')} "
            f"| {num(r.per_ms(r.timing.cpu), '.4f')} | {goal} | {r.verdict()} "
            f"| {100 * r.timing.gc / r.timing.cpu if r.timing.cpu else 0:.0f} "
            f"| {num(r.loaded, ',')} | {num(r.replayed, ',')} |")
    return "\n".join(lines)


# ---- 4. memory ---------------------------------------------------------------------------------
async def bench_memory(n: int) -> list[str]:
    """tracemalloc: the peak of a whole wake-up of n sequential steps (fresh actor; the store's stored JSON
    included), and the live history an Execution holds after running them (engine only)."""
    service = new_service()
    ref = service.ref("bench-steps", [f"memory-{n}"])
    await service.ensure_created(ref, StepsInput(steps=n).model_dump())
    snapshot = await load(service, ref)
    gc.collect()
    tracemalloc.start()
    report = await wake_actor(service, ref)
    _, wake_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert report.outcome == "completed", report
    gc.collect()
    tracemalloc.start()
    record, execution = await engine_run(service, snapshot)
    gc.collect()
    engine_held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert record.state is WorkflowState.COMPLETED and len(execution.index) == n
    met = "yes" if wake_peak / n < GOAL_STEP_BYTES else "**no**"
    return [f"| sequential steps, one wake-up | {n:,} | whole wake-up: tracemalloc peak | {wake_peak / 1024:,.0f} KB "
            f"| {wake_peak / n:,.0f} B | < {GOAL_STEP_BYTES} B | {met} |",
            f"| sequential steps, one wake-up | {n:,} | engine: live history held after the run "
            f"| {engine_held / 1024:,.0f} KB | {engine_held / n:,.0f} B | | |"]


# ---- 2b. a bounded map -------------------------------------------------------------------------
async def bench_map(n: int, runs: int) -> tuple[list[Row], list[str]]:
    """A map of n items (50 in flight, a step each) in one wake-up; then the replay of the finished map."""
    holder: dict[str, Any] = {}

    async def fresh_actor() -> None:
        service = new_service()
        ref = service.ref("bench-map", [str(uuid.uuid4())])
        await service.ensure_created(ref, MapInput(items=n).model_dump())
        holder["service"], holder["ref"] = service, ref

    async def wake() -> None:
        report = await wake_actor(holder["service"], holder["ref"])
        assert report.outcome == "completed" and report.record.output == n, report

    wake_t = await timed(wake, runs, fresh_actor)

    service = new_service()
    ref = service.ref("bench-map", [f"replay-{n}"])
    await service.ensure_created(ref, MapInput(items=n, wait=True).model_dump())
    sizes: list[int] = []
    definition = service.registry.get("bench-map")
    assert definition.workflow_fn is not None

    async def counting(draft: CommitDraft) -> None:
        sizes.append(len(draft.upserts))

    # The engine's own drafts: how many entries each commit carries.
    execution = engine_execution(service, await load(service, ref), counting)
    await run_workflow(definition.workflow_fn, execution)
    assert (await wake_actor(service, ref)).outcome == "sleeping"
    snapshot = await load(service, ref)

    async def engine() -> None:
        record, execution = await engine_run(service, snapshot)
        assert record.state is WorkflowState.SLEEPING and execution.commits == 0

    async def replay_wake() -> None:
        report = await wake_actor(service, ref)
        assert report.outcome == "sleeping" and report.commits == 0, report

    engine_t = await timed(engine, runs)
    replay_t = await timed(replay_wake, runs)
    entries = len(snapshot.history)
    case = "bounded map (50 in flight, a step per item)"
    rows = [Row(case, n, "whole wake-up running the map, per item", wake_t, True, None, 0, 0),
            Row(case, n, "engine replay of the finished map, per item", engine_t, True, None,
                entries),
            Row(case, n, "whole wake-up replaying it (load + replay), per item", replay_t, True, None, entries)]
    note = (f"map of {n:,} items: {len(sizes)} commits, the largest {max(sizes)} entries (the map's first), "
            f"the largest of the others {max(sizes[1:])}: a commit carries what changed, never the whole map")
    return rows, [note]


def memory_table(lines: list[str]) -> str:
    return "\n".join(["| case | N | measured | total | per step | goal | met |",
                      "|---|---:|---|---:|---:|---|---|", *lines])


async def main_bench(runs: int) -> None:
    print(f"Python {platform.python_version()} ({platform.python_implementation()}), "
          f"pydantic {pydantic.VERSION}, CPU: {cpu_model()} ({os.cpu_count()} logical CPUs); "
          f"median of {runs} timed runs per row after 1 warm-up ({(runs + 1) // 2} for 10,000 sequential steps, "
          f"{runs * 10} for the loop wake-ups)\n", flush=True)
    started = time.perf_counter()
    rows: list[Row] = []
    for n in (1_000, 10_000):
        # A 10,000-step run is a long average in itself; fewer runs keep `make bench` near a minute.
        rows += await bench_steps(n, runs if n <= 1_000 else max(1, (runs + 1) // 2))
    for n in (1_000, 10_000):
        rows += await bench_replay(n, runs)
    map_notes: list[str] = []
    for n in (1_000, 10_000):
        map_rows, note = await bench_map(n, runs if n <= 1_000 else max(1, (runs + 1) // 2))
        rows += map_rows
        map_notes += note
    loop_rows, notes = await bench_counter([10, 10_000], runs)
    notes = map_notes + notes
    memory = [line for n in (1_000, 10_000) for line in await bench_memory(n)]
    print(table(rows + loop_rows))
    print()
    print(memory_table(memory))
    print()
    for note in notes:
        print(f"- {note}")
    print(f"- total benchmark time {time.perf_counter() - started:.1f} s")


# ---- profiling ---------------------------------------------------------------------------------
def profile(label: str, prepare: Callable[[], Awaitable[Any]], work: Callable[[Any], Awaitable[Any]],
            top: int) -> None:
    """cProfile `work(prepared)` only; `prepare()` runs unprofiled first."""
    profiler = cProfile.Profile()

    async def go() -> None:
        prepared = await prepare()
        await work(prepared)  # warm-up
        profiler.enable()
        await work(prepared)
        profiler.disable()

    asyncio.run(go())
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    print(f"\n===== {label} (sorted by tottime) =====")
    print(out.getvalue())


def main_profile(top: int) -> None:
    async def fresh_steps_actors() -> list[tuple[ActorService, ActorRef]]:
        actors = []
        for i in range(10):  # 5 for the warm-up, 5 profiled: creation stays outside the profile
            service = new_service()
            ref = service.ref("bench-steps", [f"profile-{i}"])
            await service.ensure_created(ref, StepsInput(steps=1_000).model_dump())
            actors.append((service, ref))
        return actors

    async def steps_wakes(actors: list[tuple[ActorService, ActorRef]]) -> None:
        for _ in range(5):
            await wake_actor(*actors.pop())

    async def replay_wakes(prepared: tuple[ActorService, ActorRef]) -> None:
        for _ in range(5):
            await wake_actor(*prepared)

    profile("5 wake-ups of 1,000 sequential steps each (memory store)", fresh_steps_actors, steps_wakes, top)
    profile("5 replay wake-ups of a 10,000-step history (load + replay)", lambda: replay_actor(10_000),
            replay_wakes, top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=RUNS, help="timed runs per measurement (median)")
    parser.add_argument("--profile", action="store_true", help="print cProfile tables instead of the benchmark")
    parser.add_argument("--top", type=int, default=25, help="rows per profile table")
    args = parser.parse_args()
    if args.profile:
        main_profile(args.top)
    else:
        asyncio.run(main_bench(args.runs))


if __name__ == "__main__":
    main()
