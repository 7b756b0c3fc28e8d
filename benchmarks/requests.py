"""What each workflow costs on AWS, every billed item priced, beside its floor, AWS Lambda durable functions and
Step Functions; and the event source's levers (batch size, batching window).

    .venv/bin/python benchmarks/requests.py                  # every scenario (about 5 minutes)
    .venv/bin/python benchmarks/requests.py --scale 0.5 --only queue sleep
    .venv/bin/python benchmarks/requests.py --json /tmp/priced.json   # also write the numbers (benchmarks/scale.py)
    .venv/bin/python benchmarks/requests.py --from-json benchmarks/priced.json   # the tables of a saved run

The deployment runs in one process (benchmarks/functions.py): DynamoDB Local (which reports consumed capacity
by AWS's rules, indexes included), SQS on the dev stack's embedded moto server, the two Lambda functions' own
handler modules (init, clients in threads, logs, metrics), API Gateway in front of the API function and the SQS
event sources in front of the worker. Every request is counted through botocore's hooks (dormant.aws.metering);
every invocation is timed (billed duration = wall time, rounded up to the millisecond) and its log output counted.
Each scenario runs on a fresh table and fresh function containers, and is measured after a warm-up (the actor's
creation and first wake-up, and each function's first invocation, are left out: a steady state is priced).
The event sources long-poll as Lambda's do (benchmarks/functions.EventSource); their receives that found nothing while
no batch was being gathered are their polling, a fixed cost per queue: left out (the floor has none either), and
reported.
Prices: benchmarks/prices.py. What is measured and how it is priced: docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

# Run as a script, this file's folder comes first on sys.path and its name would shadow the `requests`
# package (moto needs it): put the repository root there instead (it also makes `examples` importable).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from benchmarks.functions import (  # noqa: E402
    LAMBDA_POLL_SECONDS,
    Batching,
    GatewayRequest,
    Invocation,
    Stack,
    open_stack,
    platform_logging,
    servers,
)
from benchmarks.prices import LAMBDA_PLATFORM_LOG_BYTES_BY_CONFIG, Deployment, deployment  # noqa: E402
from benchmarks.pricing import LINES, DurableFunctions, Floor, StepFunctions, Usage, bill, total  # noqa: E402
from dormant.aws.metering import Meter  # noqa: E402

APP = "benchmarks.workloads:registry"
INVOKE_AFTER = 0.02
"""Lambda's hand-over, seconds from the receive that completes a batch to the function's invocation: on AWS an
Invoke by the event source's poller ("within tens of ms"), which this machine cannot reproduce; here the worker would
start within a millisecond and overtake the API's inbox write, a race AWS's hand-over makes rare (docs/performance.md,
"The event sources as Lambda runs them": both measured). A modelled figure, not a measured one."""


def out(*parts: object) -> None:
    """Print to the real stdout (the functions' log lines go to a counter instead)."""
    print(*parts, file=sys.__stdout__, flush=True)
Run = Callable[["Probe", int], Awaitable[None]]


@dataclass(frozen=True)
class Scenario:
    name: str
    unit: str  # what one unit of work is
    steps: int  # workflow steps per unit
    run: Run  # does `units` units of work after its own warm-up (which calls `mark`)
    units: int  # by default: enough commits per actor to include a batch of tombstones (every 16 versions)
    floor: Floor
    durable: DurableFunctions
    step_functions: StepFunctions
    wake: Batching | None = None  # event-source batching, when not the deployment's
    timers: Batching | None = None
    lever: str = ""  # which table it belongs to: "" (the priced table) or a lever's name
    env: dict[str, str] = field(default_factory=dict)  # settings of the functions, when not the defaults
    durable_ms_from: str = ""  # the scenario whose worker invocations time a durable function's (default: this)
    platform_logs: str = ""  # Lambda's LoggingConfig, when not template.yaml's ("Text", "JSON INFO", "JSON WARN")
    access_log: bool = True  # the API stage writes its access log (template.yaml's format)
    gathers: bool = False  # its messages queue up before delivery (stack.hold()): its sources long-poll 1 s at a time
    invoke_after: float | None = None  # seconds from a batch's receive to the worker's invocation (None: the run's)

    def platform_log_bytes(self) -> int:
        """Lambda's own log bytes per invocation (its START/END/REPORT lines or JSON records), by the LoggingConfig:
        counted, not observed (nothing here is Lambda), at prices.LAMBDA_PLATFORM_LOG_BYTES_BY_CONFIG's sizes."""
        return LAMBDA_PLATFORM_LOG_BYTES_BY_CONFIG[self.platform_logs or platform_logging()]


@dataclass
class Window:
    """Counts at the start of the measured part of a scenario."""

    meters: dict[str, Meter]
    idle: Meter
    gateway: int
    invocations: dict[str, int]
    stdout: int
    log_kinds: dict[str, int]
    process_cpu: float
    main_cpu: float


@dataclass
class Measured:
    scenario: str
    unit: str
    units: int
    steps: int
    usage: Usage  # per unit
    api_side: Usage  # per unit: API Gateway, the API function and the requests it makes (what a send costs)
    requests: dict[str, dict[str, float]]  # per unit, by part and operation
    wall_ms: dict[str, list[float]]  # per invocation, by function
    cpu_ms: dict[str, list[float]]  # the process's CPU per invocation, by function (sequential invocations)
    batch_records: float  # SQS messages per worker invocation
    idle_receives: int
    notes: list[str] = field(default_factory=list)
    storage: dict[str, dict[str, float]] = field(default_factory=dict)  # by item kind: items, bytes (see storage)
    log_kinds: dict[str, float] = field(default_factory=dict)  # log bytes per unit by record kind (and platform)


class Probe:
    """A scenario's run: the stack, and the counts between `mark()` (after the warm-up) and `close()`."""

    def __init__(self, stack: Stack, scenario: Scenario, units: int) -> None:
        self.stack, self.scenario, self.units = stack, scenario, units
        self.window: Window | None = None
        self.result: Measured | None = None

    def mark(self) -> None:
        stack = self.stack
        self.window = Window(
            meters={"api": stack.api.meter.copy(), "worker": stack.worker.meter.copy(),
                    "event source": stack.event_source.copy()},
            idle=stack.idle.copy(), gateway=len(stack.gateway.requests),
            invocations={"api": len(stack.api.invocations), "worker": len(stack.worker.invocations)},
            stdout=stack.stdout.bytes, log_kinds=dict(stack.stdout.by_kind), process_cpu=time.process_time(),
            main_cpu=time.thread_time())

    async def close(self) -> None:
        assert self.window is not None, "mark() first"
        self.result = measure(self.stack, self.window, self.scenario, self.units)
        self.result.storage = await storage(self.stack)


async def storage(stack: Stack) -> dict[str, dict[str, float]]:
    """What the table holds at the end, by item kind (the sort key's prefix: c# commit slots, i# inbox items and
    tombstones, s# status items, r# responses, e# events): items and bytes, with DynamoDB's 100 bytes of
    overhead per item (what storage is billed on); local-index copies of pending items counted again."""
    from dormant.aws.metering import item_size

    kinds: dict[str, dict[str, float]] = {}
    paginator = stack.reader.get_paginator("scan")
    async for page in paginator.paginate(TableName=stack.settings.table):
        for item in page.get("Items", []):
            kind = item["sk"]["S"].split("#", 1)[0] + "#"
            if kind == "i#":
                kind = "i# pending" if "pq" in item else "i# tombstone"
            entry = kinds.setdefault(kind, {"items": 0, "bytes": 0})
            size = item_size(item) + 100
            entry["items"] += 1
            entry["bytes"] += size * (2 if "pq" in item else 1)
    return kinds


def _billed_ms(invocations: list[Invocation]) -> float:
    """Billed milliseconds of these invocations: their median times their number. The median, not the sum: on a
    shared machine a few invocations stall behind other processes, which is not what they cost on Lambda."""
    return statistics.median(i.billed_ms for i in invocations) * len(invocations) if invocations else 0.0


def _usage(meter: Meter, invocations: list[Invocation], function: str, gateway: list[GatewayRequest],
           platform_bytes: int) -> Usage:
    logs = sum(i.log_bytes for i in invocations) + platform_bytes * len(invocations)
    usage = Usage(write_units=meter.write_units, index_write_units=meter.index_write_units,
                  read_units=meter.read_units, sqs_fifo=meter.sqs_billed["fifo"],
                  sqs_standard=meter.sqs_billed["standard"], gateway_requests=sum(g.units for g in gateway),
                  gateway_bytes_out=sum(g.response_bytes for g in gateway),
                  log_bytes=logs + sum(g.log_bytes for g in gateway))
    if function == "api":
        usage.api_invocations, usage.api_ms = len(invocations), _billed_ms(invocations)
    else:
        usage.worker_invocations, usage.worker_ms = len(invocations), _billed_ms(invocations)
    return usage


def measure(stack: Stack, window: Window, scenario: Scenario, units: int) -> Measured:
    function_cpu = (time.process_time() - window.process_cpu) - (time.thread_time() - window.main_cpu)
    parts = {"api": stack.api.meter - window.meters["api"], "worker": stack.worker.meter - window.meters["worker"],
             "event source": (stack.event_source - window.meters["event source"]) - (stack.idle - window.idle)}
    api = stack.api.invocations[window.invocations["api"]:]
    worker = stack.worker.invocations[window.invocations["worker"]:]
    platform_bytes = scenario.platform_log_bytes()
    api_side = _usage(parts["api"], api, "api", stack.gateway.requests[window.gateway:], platform_bytes)
    downstream = parts["worker"].copy()
    downstream.add(parts["event source"])
    usage = api_side.plus(_usage(downstream, worker, "worker", [], platform_bytes))
    usage.function_cpu_ms = max(0.0, function_cpu * 1000)
    idle = stack.idle - window.idle
    logs = {kind: (n - window.log_kinds.get(kind, 0)) / units for kind, n in stack.stdout.by_kind.items()
            if n - window.log_kinds.get(kind, 0)}
    logs["Lambda platform lines"] = platform_bytes * (len(api) + len(worker)) / units
    logs["API Gateway access log"] = sum(g.log_bytes for g in stack.gateway.requests[window.gateway:]) / units
    notes = []
    counted = Meter()
    for part in parts.values():
        counted.add(part)
    if counted.dynamodb_requests and counted.capacity_reported < counted.dynamodb_requests * 0.5:
        notes.append(f"only {counted.capacity_reported} of {counted.dynamodb_requests} DynamoDB responses reported "
                     "their capacity: units are partly estimated")
    return Measured(
        scenario=scenario.name, unit=scenario.unit, units=units, steps=scenario.steps, usage=usage.per(units),
        api_side=api_side.per(units),
        requests={part: {op: n / units for op, n in sorted(m.requests.items())} for part, m in parts.items()},
        wall_ms={"api": [i.wall_ms for i in api], "worker": [i.wall_ms for i in worker]},
        cpu_ms={"api": [i.cpu_ms for i in api], "worker": [i.cpu_ms for i in worker]},
        batch_records=sum(i.records for i in worker) / max(1, len(worker)),
        idle_receives=idle.requests["sqs.ReceiveMessage"], notes=notes, log_kinds=logs)


# -- the scenarios ------------------------------------------------------------------------------------------------

async def _warm_counter(stack: Stack, client: Any, name: str = "bench") -> Any:
    handle = client.get_or_create("workflow-counter", [name])
    await handle.send("counter", {"delta": 1})
    await stack.drain()
    return handle


async def _warm_reminder(stack: Stack, client: Any, name: str) -> Any:
    """A reminder actor after a first sleep that suspended: its timer's round trip is out of the measurement (the
    worker reads each queue's visibility timeout once per container, on the first message from it)."""
    handle = client.get_or_create("reminder", [name])
    await handle.send("reminders", {"text": "warm", "at": time.time() + 1.5})

    async def fired() -> bool:
        return len((await stack.read_state(handle.ref))["fired"]) >= 1

    await stack.drain(until=fired)
    return handle


async def simple_workflow(probe: Probe, rounds: int) -> None:
    """Per unit: create an invoice actor (PUT), whose workflow runs three steps in one wake-up and completes."""
    stack = probe.stack
    async with stack.client() as client:
        await client.get_or_create("invoice", ["warm"]).create()
        await stack.drain()
        probe.mark()
        for n in range(rounds):
            await client.get_or_create("invoice", [f"inv-{n}"]).create()
            await stack.drain()
        await probe.close()
        states = [await client.get_or_create("invoice", [f"inv-{n}"]).state() for n in range(rounds)]
        assert all(s["status"] == "complete" for s in states), states


def steps_run(actor: str) -> Run:
    """Per unit: create an actor of `actor` (PUT), whose workflow runs four steps in one wake-up and completes."""

    async def run(probe: Probe, rounds: int) -> None:
        stack = probe.stack
        async with stack.client() as client:
            await client.get_or_create(actor, ["warm"]).create()
            await stack.drain()
            probe.mark()
            for n in range(rounds):
                await client.get_or_create(actor, [f"run-{n}"]).create()
                await stack.drain()
            await probe.close()
            states = [await stack.read_state(client.get_or_create(actor, [f"run-{n}"]).ref) for n in range(rounds)]
            assert all(s["status"] == "complete" and s["done"] == 4 for s in states), states

    return run


async def queue_loop(probe: Probe, rounds: int) -> None:
    """Per unit: one message to the DESIGN counter, its own wake-up, one loop iteration with one step."""
    stack = probe.stack
    async with stack.client() as client:
        handle = await _warm_counter(stack, client)
        probe.mark()
        for _ in range(rounds):
            await handle.send("counter", {"delta": 1})
            await stack.drain()
        await probe.close()
        assert (await handle.state())["processed"] == rounds + 1


async def queue_loop_batched(probe: Probe, rounds: int) -> None:
    """Per unit: one message of ten sent together to one counter: one batch, one wake-up, ten iterations."""
    stack = probe.stack
    async with stack.client() as client:
        handle = await _warm_counter(stack, client)
        probe.mark()
        for _ in range(rounds // 10 or 1):
            await stack.hold()
            for _ in range(10):
                await handle.send("counter", {"delta": 1})
            await stack.drain()
        await probe.close()
        assert (await handle.state())["processed"] == 10 * (rounds // 10 or 1) + 1


async def many_actors(probe: Probe, rounds: int) -> None:
    """Per unit: one message to each of `rounds` counters, sent first, then delivered in batches."""
    stack = probe.stack
    async with stack.client() as client:
        handles = [await _warm_counter(stack, client, f"c{n}") for n in range(rounds)]
        probe.mark()
        await stack.hold()
        for handle in handles:
            await handle.send("counter", {"delta": 1})
        await stack.drain()
        await probe.close()
        assert all([(await h.state())["processed"] == 2 for h in handles])


async def join(probe: Probe, rounds: int) -> None:
    """Per unit: one refresh of the fan-out/fan-in dashboard: three branch steps joined, a merge step. Each
    iteration's queue wait has a 30 s timeout (a timer), which fires stale later: waited for and counted, with
    the one idle iteration the last timer runs (1/units of it per unit)."""
    stack = probe.stack
    async with stack.client() as client:
        handle = client.get_or_create("fan-out-fan-in", ["bench"])
        await handle.send("refresh", {})
        await stack.drain()
        probe.mark()
        for _ in range(rounds):
            await handle.send("refresh", {})
            await stack.drain()
        # Each refresh armed a 30 s timer; the next refresh made it stale. Wait until all have fired (the last one
        # as a real timeout: an idle iteration, which arms the next timer, outside the window).
        waited = time.monotonic() + 32

        async def fired() -> bool:
            return time.monotonic() > waited

        await stack.drain(until=fired, timeout=90)
        await probe.close()
        assert (await handle.state())["refreshes"] == rounds + 1


async def _reminders(probe: Probe, rounds: int, delay: float) -> None:
    stack = probe.stack
    async with stack.client() as client:
        handle = await _warm_reminder(stack, client, "bench")
        probe.mark()
        for n in range(rounds):
            await handle.send("reminders", {"text": f"r{n}", "at": time.time() + delay})

            async def fired(count: int = n + 2) -> bool:
                return len((await stack.read_state(handle.ref))["fired"]) >= count

            await stack.drain(until=fired)
        await probe.close()


async def sleep_short(probe: Probe, rounds: int) -> None:
    """Per unit: a reminder due in 1 s: beyond the in-process limit (INLINE_WAIT, 0.52 s at 512 MB) its wake-up
    suspends (a commit and a timer) and the timer's wake-up steps; with DORMANT_INLINE_WAIT=1 (a lever) its wake-up
    waits for it in process, then steps."""
    await _reminders(probe, rounds, 1.0)


async def sleep_half(probe: Probe, rounds: int) -> None:
    """Per unit: a reminder due in 0.5 s: under the in-process limit, its wake-up waits for it, then one step."""
    await _reminders(probe, rounds, 0.5)


async def sleep_suspended(probe: Probe, rounds: int) -> None:
    """Per unit: a reminder due in 2 s: its wake-up suspends (a commit and a timer), the timer's wake-up steps."""
    await _reminders(probe, rounds, 2.0)


async def sleep_hopping(probe: Probe, rounds: int) -> None:
    """Per unit: a reminder due in 5 s with timers of at most 1 s (DORMANT_TIMER_HOP_MAX_DELAY=1): four hops, then
    the wake-up. A sleep longer than SQS's 900 s delay hops the same way every 900 s."""
    await _reminders(probe, rounds, 5.0)


async def sleep_with_arrivals(probe: Probe, rounds: int) -> None:
    """Per unit: one of four reminders due at the same moment 2 s ahead, the last three arriving during the sleep."""
    stack = probe.stack
    async with stack.client() as client:
        handle = await _warm_reminder(stack, client, "bench")
        probe.mark()
        for n in range(rounds // 4 or 1):
            at = time.time() + 2
            for k in range(4):
                await handle.send("reminders", {"text": f"r{n}-{k}", "at": at})
                await stack.drain()

            async def fired(count: int = 4 * (n + 1) + 1) -> bool:
                return len((await stack.read_state(handle.ref))["fired"]) >= count

            await stack.drain(until=fired)
        await probe.close()


async def request_response(probe: Probe, rounds: int) -> None:
    """Per unit: `send(wait=True)` to the doubler: the API holds the request and reads for the response. Noted:
    when each answer was written (the worker's settling, from the start of the API's wait) and how long after
    that the API found it (what the wait's schedule adds: dormant.runtime.reply_timing)."""
    stack = probe.stack
    async with stack.client() as client, answer_times() as times:
        handle = client.get_or_create("request-response", ["bench"])

        async def call(value: int) -> None:
            done = asyncio.Event()

            async def answered() -> bool:
                return done.is_set()

            async def send() -> None:
                result = await handle.send("requests", {"value": value}, wait=True, timeout=20)
                assert result.status == "completed" and result.response == {"doubled": 2 * value}, result
                done.set()

            await asyncio.gather(send(), stack.drain(until=answered))

        await call(0)
        probe.mark()
        first = len(times.waits)
        for n in range(1, rounds + 1):
            await call(n)
        await probe.close()
        assert probe.result is not None
        probe.result.notes.append(times.note(first))
        probe.result.notes.append(times.delivery(first, [i.started for i in stack.worker.invocations]))


@dataclass
class AnswerTimes:
    """Per message id: when its response items were made (settling) and when the API's wait began and ended."""

    written: dict[str, float] = field(default_factory=dict)
    waits: dict[str, tuple[float, float]] = field(default_factory=dict)

    def note(self, skip: int) -> str:
        ids = [mid for mid in list(self.waits)[skip:] if mid in self.written]
        if not ids:
            return "answer times: none seen"
        ready = [1000 * (self.written[mid] - self.waits[mid][0]) for mid in ids]
        late = [1000 * (self.waits[mid][1] - self.written[mid]) for mid in ids]
        return (f"answers written {statistics.median(ready):.0f} ms into the API's wait (median; p10 "
                f"{sorted(ready)[len(ready) // 10]:.0f}, p90 {sorted(ready)[9 * len(ready) // 10]:.0f}), found "
                f"{statistics.median(late):.0f} ms after that (median; mean {statistics.mean(late):.0f}) "
                f"({len(ids)} calls)")


    def delivery(self, skip: int, worker_starts: list[float]) -> str:
        """How far into each wait the worker was invoked: the event source's delivery (its long poll returns the
        message; benchmarks/functions.EventSource), against what the worker's wake-up and the wait's reads add."""
        into = []
        for mid in list(self.waits)[skip:]:
            began, ended = self.waits[mid]
            starts = [at for at in worker_starts if began <= at <= ended]
            if starts and mid in self.written:
                into.append((1000 * (starts[0] - began), 1000 * (self.written[mid] - starts[0])))
        if not into:
            return "worker invocations: none seen during the waits"
        return (f"the worker invoked {statistics.median(i for i, _ in into):.0f} ms into the API's wait (median: "
                f"the event source's delivery), the answer written {statistics.median(w for _, w in into):.0f} ms "
                f"after that (median: the wake-up) ({len(into)} calls)")


@contextlib.asynccontextmanager
async def answer_times() -> Any:
    """Time the answers of `send(wait=True)`: the store's settling and waiting code, wrapped for the scenario."""
    from dormant.dynamodb.outputs import OutputItems

    times = AnswerTimes()
    items_of, wait_response = OutputItems.items_of, OutputItems.wait_response

    def timed_items(self: Any, ref: Any, head: Any) -> Any:
        for mid in head.side.responses:
            times.written.setdefault(mid, time.monotonic())
        return items_of(self, ref, head)

    async def timed_wait(self: Any, ref: Any, message_id: str, timeout: float) -> Any:
        began = time.monotonic()
        found = await wait_response(self, ref, message_id, timeout)
        if timeout > 0 and found[0]:
            times.waits[message_id] = (began, time.monotonic())
        return found

    OutputItems.items_of, OutputItems.wait_response = timed_items, timed_wait  # type: ignore[method-assign]
    try:
        yield times
    finally:
        OutputItems.items_of, OutputItems.wait_response = items_of, wait_response  # type: ignore[method-assign]


async def timer_batches(probe: Probe, rounds: int) -> None:
    """Per unit: one of `rounds` reminders (one per actor) due at the same moment, delivered in timer batches."""
    stack = probe.stack
    async with stack.client() as client:
        handles = [client.get_or_create("reminder", [f"r{n}"]) for n in range(rounds)]
        warm = time.time() + 1.5  # a first timer for each, delivered in batches like the measured ones
        await stack.hold()
        for handle in handles:
            await handle.send("reminders", {"text": "warm", "at": warm})
        await stack.drain()
        await stack.drain(until=stack.timers_fired, timeout=60)
        probe.mark()
        at = time.time() + 3
        await stack.hold()
        for handle in handles:
            await handle.send("reminders", {"text": "due", "at": at})
        await stack.drain()  # every wake-up suspends until `at`: a timer each
        await stack.drain(until=stack.timers_fired, timeout=60)
        await probe.close()
        assert all([len((await stack.read_state(h.ref))["fired"]) == 2 for h in handles])


ONE = dict(requests=1, inbox_writes=1, sends=1, deliveries=1, loads=1, commits=1)
SCENARIOS = [
    Scenario("simple workflow (3 steps)", "workflow run", 3, simple_workflow, 16,
             Floor(requests=1, inbox_writes=1, sends=1, deliveries=1, loads=1, commits=3, messages=0),
             DurableFunctions(operations=4, operations_high=4, invocations=1), StepFunctions(3, 3)),
    Scenario("queue-loop iteration", "message", 1, queue_loop, 32, Floor(**ONE),
             DurableFunctions(operations=2, operations_high=4, invocations=1), StepFunctions(3, 1)),
    Scenario("queue loop, 10 messages per batch", "message", 1, queue_loop_batched, 160,
             Floor(requests=1, inbox_writes=1, sends=1, deliveries=0.1, loads=0.1, commits=1),
             DurableFunctions(operations=2, operations_high=4, invocations=0.1), StepFunctions(3, 1), gathers=True),
    Scenario("3-branch join + merge", "refresh", 4, join, 16,
             Floor(requests=1, inbox_writes=1, sends=1, deliveries=1, loads=1, commits=2, timers=1),
             DurableFunctions(operations=9, operations_high=11, invocations=1), StepFunctions(7, 4)),
    # A 1 s sleep's floor is a suspension's: waiting a second in process bills more (docs/performance.md "The
    # in-process wait"); since INLINE_WAIT is the break-even (0.52 s at 512 MB) it suspends.
    Scenario("sleep 1 s + step", "reminder", 1, sleep_short, 16,
             Floor(requests=1, inbox_writes=1, sends=1, deliveries=1, loads=1, commits=2, timers=1),
             DurableFunctions(operations=3, operations_high=5, invocations=2), StepFunctions(4, 1)),
    Scenario("sleep 2 s + step (suspended)", "reminder", 1, sleep_suspended, 16,
             Floor(requests=1, inbox_writes=1, sends=1, deliveries=1, loads=1, commits=2, timers=1),
             DurableFunctions(operations=3, operations_high=5, invocations=2), StepFunctions(4, 1)),
    Scenario("queue-loop iteration, commit ring of 8 (DORMANT_SNAPSHOT_EVERY=8)", "message", 1, queue_loop, 32,
             Floor(**ONE), DurableFunctions(operations=2, operations_high=4, invocations=1), StepFunctions(3, 1),
             lever="commit ring", env={"DORMANT_SNAPSHOT_EVERY": "8"}),
    Scenario("sleep 1 s + step, waited in process (DORMANT_INLINE_WAIT=1)", "reminder", 1, sleep_short, 16,
             Floor(requests=1, inbox_writes=1, sends=1, deliveries=1, loads=1, commits=1),
             DurableFunctions(operations=3, operations_high=5, invocations=2), StepFunctions(4, 1),
             durable_ms_from="sleep 2 s + step (suspended)",  # a durable wait suspends: no compute while waiting
             lever="in-process wait", env={"DORMANT_INLINE_WAIT": "1"}),
    Scenario("sleep 0.5 s + step (under the in-process limit)", "reminder", 1, sleep_half, 16,
             Floor(requests=1, inbox_writes=1, sends=1, deliveries=1, loads=1, commits=1),
             DurableFunctions(operations=3, operations_high=5, invocations=2), StepFunctions(4, 1),
             durable_ms_from="sleep 2 s + step (suspended)", lever="in-process wait"),
    Scenario("sleep 5 s in 1 s hops + step", "reminder", 1, sleep_hopping, 8,
             Floor(requests=1, inbox_writes=1, sends=1, deliveries=1, loads=1, commits=2, timers=1),
             DurableFunctions(operations=3, operations_high=5, invocations=2), StepFunctions(4, 1),
             lever="long sleeps", env={"DORMANT_TIMER_HOP_MAX_DELAY": "1"}),
    Scenario("sleep 2 s, 3 messages arrive during it", "reminder", 1, sleep_with_arrivals, 16,
             Floor(requests=1, inbox_writes=1, sends=1, deliveries=1, loads=1, commits=1.25, timers=0.25),
             DurableFunctions(operations=3, operations_high=5, invocations=1.25), StepFunctions(4, 1)),
    Scenario("request/response (send, wait=true)", "call", 1, request_response, 32,
             Floor(requests=1, inbox_writes=1, sends=1, deliveries=1, loads=1, commits=1),
             DurableFunctions(operations=2, operations_high=2, invocations=1), StepFunctions(2, 1)),
    Scenario("4 durable steps", "workflow run", 4, steps_run("four-steps"), 16,
             Floor(requests=1, inbox_writes=1, sends=1, deliveries=1, loads=1, commits=4, messages=0),
             DurableFunctions(operations=5, operations_high=5, invocations=1), StepFunctions(4, 4)),
    Scenario("3 ephemeral steps + 1 durable step", "workflow run", 4, steps_run("ephemeral-steps"), 16,
             Floor(requests=1, inbox_writes=1, sends=1, deliveries=1, loads=1, commits=1, messages=0),
             DurableFunctions(operations=5, operations_high=5, invocations=1), StepFunctions(4, 4)),
    # -- levers: the log settings (docs/observability.md "Logs"), on the queue loop ------------------------------------
    *[Scenario(f"queue-loop iteration, {label}", "message", 1, queue_loop, 32, Floor(**ONE),
               DurableFunctions(operations=2, operations_high=4, invocations=1), StepFunctions(3, 1), lever="logs",
               env=env, platform_logs=platform, access_log=access)
      for label, env, platform, access in (
          ("every request logged (DORMANT_REQUEST_LOG_SAMPLE=1)", {"DORMANT_REQUEST_LOG_SAMPLE": "1"}, "", True),
          ("DORMANT_LOG_LEVEL=DEBUG", {"DORMANT_LOG_LEVEL": "DEBUG"}, "", True),
          ("DORMANT_LOG_LEVEL=WARNING", {"DORMANT_LOG_LEVEL": "WARNING"}, "", True),
          ("Lambda's platform lines in text (LogFormat Text)", {}, "Text", True),
          ("Lambda's platform.report kept (SystemLogLevel INFO)", {}, "JSON INFO", True),
          ("no API stage access log", {}, "", False))],
    # -- levers: the event source's batch size and window (template.yaml: 10, and a 1 s window for timers) --------
    Scenario("10 actors, 1 message each, batch size 10", "message", 1, many_actors, 10,
             Floor(requests=1, inbox_writes=1, sends=1, deliveries=0.1, loads=1, commits=1),
             DurableFunctions(operations=2, operations_high=4, invocations=1), StepFunctions(3, 1),
             wake=Batching(10), lever="wake batch size", gathers=True),
    Scenario("10 actors, 1 message each, batch size 1", "message", 1, many_actors, 10, Floor(**ONE),
             DurableFunctions(operations=2, operations_high=4, invocations=1), StepFunctions(3, 1),
             wake=Batching(1), lever="wake batch size", gathers=True),
    # -- levers: how soon the worker is invoked after its message arrives (the race with the API's inbox write) -----
    Scenario("queue-loop iteration, the worker invoked at once (the race with the send)", "message", 1, queue_loop,
             32, Floor(**ONE), DurableFunctions(operations=2, operations_high=4, invocations=1), StepFunctions(3, 1),
             lever="delivery", invoke_after=0.0),
    Scenario("request/response, the worker invoked at once (the race with the send)", "call", 1, request_response,
             32, Floor(requests=1, inbox_writes=1, sends=1, deliveries=1, loads=1, commits=1),
             DurableFunctions(operations=2, operations_high=2, invocations=1), StepFunctions(2, 1),
             lever="delivery", invoke_after=0.0),
    Scenario("10 timers due together, timer batch 10, window 1 s", "reminder", 1, timer_batches, 10,
             Floor(requests=1, inbox_writes=1, sends=1, deliveries=1, loads=1, commits=2, timers=1, timer_batch=10),
             DurableFunctions(operations=3, operations_high=5, invocations=2), StepFunctions(4, 1),
             timers=Batching(10, 1.0), lever="timer batching", gathers=True),
    Scenario("10 timers due together, timer batch 1", "reminder", 1, timer_batches, 10,
             Floor(requests=1, inbox_writes=1, sends=1, deliveries=1, loads=1, commits=2, timers=1, timer_window=False),
             DurableFunctions(operations=3, operations_high=5, invocations=2), StepFunctions(4, 1),
             timers=Batching(1), lever="timer batching", gathers=True),
]


# -- running and reporting ----------------------------------------------------------------------------------------

async def run_scenario(scenario: Scenario, rounds: int, endpoints: tuple[str, str],
                       invoke_after: float = 0.0) -> Measured:
    deploy = deployment()
    wake = scenario.wake or Batching(deploy.wake_batch_size)
    timers = scenario.timers or Batching(deploy.timer_batch_size, deploy.timer_batching_window)
    after = scenario.invoke_after if scenario.invoke_after is not None else invoke_after
    wake, timers = (replace(b, invoke_after=after) for b in (wake, timers))
    async with open_stack(APP, wake=wake, timers=timers, endpoints=endpoints,
                          env=scenario.env, access_log=scenario.access_log,
                          poll_seconds=1 if scenario.gathers else LAMBDA_POLL_SECONDS) as stack:
        probe = Probe(stack, scenario, rounds)
        await scenario.run(probe, rounds)
        assert probe.result is not None, f"{scenario.name} did not close its measurement"
        return probe.result


def money(value: float) -> str:
    return f"{value:.2f}"


def priced_table(results: list[tuple[Scenario, Measured]], deploy: Deployment) -> str:
    head = "| scenario | unit | " + " | ".join(LINES) + " | **total** | at 0.29 vCPU |"
    lines = [head, "|---|---|" + "---:|" * (len(LINES) + 2)]
    for scenario, m in results:
        items = {line: usd * 1e6 for line, usd in bill(m.usage, deploy).items()}
        slow = total(m.usage.at_cpu_share(deploy), deploy) * 1e6
        lines.append(f"| {scenario.name} | {scenario.unit} | " + " | ".join(money(items[k]) for k in LINES)
                     + f" | **{money(sum(items.values()))}** | {money(slow)} |")
    return "\n".join(lines)


def durable_prices(scenario: Scenario, m: Measured, deploy: Deployment,
                   others: dict[str, Measured] | None = None) -> tuple[float, float, float]:
    """USD per unit on AWS Lambda durable functions: (full price: the fewest operations, each invocation as long
    as Dormant's worker invocation of the same workflow; lower bound: the fewest operations, 1 ms invocations;
    the SDK's documented helpers' operations at the full price's durations)."""
    timed = (others or {}).get(scenario.durable_ms_from, m)
    worker_ms = timed.usage.worker_ms / timed.usage.worker_invocations if timed.usage.worker_invocations else 1.0
    written = 1024 * m.usage.write_units  # the same workflow's checkpoint data: what Dormant writes, at most
    full = scenario.durable.price(deploy, high=False, ms_per_invocation=worker_ms, bytes_written=written)
    low = scenario.durable.price(deploy, high=False, ms_per_invocation=1, bytes_written=written)
    helpers = scenario.durable.price(deploy, high=True, ms_per_invocation=worker_ms, bytes_written=written)
    return full, low, helpers


def comparison_table(results: list[tuple[Scenario, Measured]], deploy: Deployment,
                     measured: dict[str, Measured] | None = None) -> str:
    """`measured`: every scenario of the run by name (a lever row may time durable functions by a priced one)."""
    known = measured or {s.name: r for s, r in results}
    lines = ["| scenario | Dormant | floor | Dormant / floor (goal <= 1.2) | floor with the dedupe rule | Dormant / "
             "it | durable functions: full price (lower bound; documented helpers) | Dormant / durable full (goal <= "
             "0.33) | Step Functions Standard (transitions; with Lambda tasks) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for scenario, m in results:
        mine = total(m.usage, deploy) * 1e6
        floor = total(scenario.floor.usage(), deploy) * 1e6
        ruled = total(scenario.floor.guaranteed_usage(), deploy) * 1e6
        full, low, helpers = (price * 1e6 for price in durable_prices(scenario, m, deploy, known))
        sfn = scenario.step_functions
        lines.append(f"| {scenario.name} | {money(mine)} | {money(floor)} | {mine / floor:.2f} | {money(ruled)} | "
                     f"{mine / ruled:.2f} | {money(full)} ({money(low)}; {money(helpers)}) | {mine / full:.2f} | "
                     f"{money(sfn.price(deploy, with_lambda=False) * 1e6)} "
                     f"({money(sfn.price(deploy, with_lambda=True) * 1e6)}) |")
    return "\n".join(lines)


def excess_table(results: list[tuple[Scenario, Measured]], deploy: Deployment) -> str:
    """Per scenario, what it costs over its floor with the dedupe rule, item by item (USD per million units; a
    negative item is one where the floor's rule counts more than was measured), and the quantities behind the
    largest: read units, log bytes and billed Lambda ms over the floor's."""
    lines = ["| scenario | " + " | ".join(LINES) + " | **over the floor** | RCU over | log bytes | Lambda ms over |",
             "|---|" + "---:|" * (len(LINES) + 4)]
    for scenario, m in results:
        mine, ruled = bill(m.usage, deploy), bill(scenario.floor.guaranteed_usage(), deploy)
        floor = scenario.floor.guaranteed_usage()
        items = {line: (mine[line] - ruled[line]) * 1e6 for line in LINES}
        lines.append(f"| {scenario.name} | " + " | ".join(money(items[k]) for k in LINES)
                     + f" | **{money(sum(items.values()))}** | {m.usage.read_units - floor.read_units:.2f} | "
                     f"{m.usage.log_bytes:.0f} | {m.usage.billed_ms - floor.billed_ms:.1f} |")
    return "\n".join(lines)


def send_many_table(results: list[tuple[Scenario, Measured]], deploy: Deployment, k: int = 10) -> str:
    """What a `send_many` of k messages to one actor would save per message, from the measured single sends
    (queue-loop iteration: what one send costs on the API side) and the measured batch downstream (10 messages
    per batch: one delivery, one wake-up, one commit for ten). Two readings: (a) one HTTP request, one API
    invocation, one status read, one SendMessageBatch and one BatchWriteItem for the k messages (an inbox item
    and a wake-up message each, as now); (b) also one inbox item and one wake-up message for all k."""
    found = {s.name: m for s, m in results}
    single, batch = found.get("queue-loop iteration"), found.get("queue loop, 10 messages per batch")
    if single is None or batch is None:
        return "(send_many: run both queue-loop scenarios)"
    send = single.api_side
    downstream = batch.usage.plus(Usage(**{f: -v for f, v in asdict(batch.api_side).items()}))
    per_request = 1 / k
    inbox_kb = 0.35  # an inbox item's size (docs/storage.md: enqueue 0.35 KB)
    shared = Usage(gateway_requests=send.gateway_requests * per_request, gateway_bytes_out=send.gateway_bytes_out
                   * per_request, api_invocations=send.api_invocations * per_request, api_ms=send.api_ms *
                   per_request, log_bytes=send.log_bytes * per_request, read_units=send.read_units * per_request,
                   sqs_fifo=per_request)  # one SendMessageBatch: ten small bodies are one 64 KB chunk
    a = shared.plus(Usage(write_units=send.write_units, index_write_units=send.index_write_units)).plus(downstream)
    one_item = -(-k * inbox_kb // 1) / k  # started KB of one item holding k messages, per message
    tombstones = Usage(write_units=-(1 - one_item), index_write_units=-(1 - one_item))  # one per item, not message
    b = shared.plus(Usage(write_units=one_item, index_write_units=one_item)).plus(downstream).plus(tombstones)
    now_single = total(single.usage, deploy) * 1e6
    now_batch = total(batch.usage, deploy) * 1e6
    rows = [("10 messages sent one by one, each its own wake-up (queue-loop iteration)", now_single),
            ("10 messages sent one by one, delivered in one batch (measured)", now_batch),
            (f"send_many of {k}, reading (a): one request, one invocation, batched SQS and DynamoDB calls",
             total(a, deploy) * 1e6),
            (f"send_many of {k}, reading (b): one inbox item and one wake-up message for all {k}",
             total(b, deploy) * 1e6)]
    lines = ["| per message | USD per million | saves against one by one |", "|---|---:|---:|"]
    lines += [f"| {name} | {money(value)} | {money(now_single - value)} ({(now_single - value) / now_single:.0%}) |"
              for name, value in rows]
    return "\n".join(lines)


def usage_table(results: list[tuple[Scenario, Measured]]) -> str:
    lines = ["| scenario | HTTP requests | API ms | worker invocations | worker ms | messages / batch | WCU | "
             "index WCU | RCU | SQS FIFO | SQS standard | log KB | function CPU ms |",
             "|---|" + "---:|" * 12]
    for scenario, m in results:
        u = m.usage
        api_ms = u.api_ms / max(u.api_invocations, 1e-9)
        worker_ms = u.worker_ms / max(u.worker_invocations, 1e-9)
        lines.append(f"| {scenario.name} | {u.gateway_requests:.2f} | {api_ms:.1f} | {u.worker_invocations:.2f} | "
                     f"{worker_ms:.1f} | {m.batch_records:.1f} | {u.write_units:.2f} | {u.index_write_units:.2f} | "
                     f"{u.read_units:.2f} | {u.sqs_fifo:.2f} | {u.sqs_standard:.2f} | {u.log_bytes / 1024:.2f} | "
                     f"{u.function_cpu_ms:.1f} |")
    return "\n".join(lines)


def detail(results: list[tuple[Scenario, Measured]]) -> str:
    out = []
    for scenario, m in results:
        out.append(f"- {scenario.name} ({m.units} {scenario.unit}s; per {scenario.unit}; "
                   f"{m.idle_receives} empty receives left out):")
        for part, ops in m.requests.items():
            text = ", ".join(f"{op} {n:.2f}" for op, n in ops.items()) or "none"
            out.append(f"  - {part}: {text}")
        for function, walls in m.wall_ms.items():
            if walls:
                cpu = m.cpu_ms.get(function) or [0.0]
                out.append(f"  - {function} invocations: median {statistics.median(walls):.1f} ms, "
                           f"p90 {sorted(walls)[int(0.9 * (len(walls) - 1))]:.1f} ms ({len(walls)}); "
                           f"CPU median {statistics.median(cpu):.1f} ms")
        if m.log_kinds:
            out.append("  - log bytes: " + ", ".join(f"{kind} {n:.0f}" for kind, n in
                                                     sorted(m.log_kinds.items(), key=lambda item: -item[1])))
        out.extend(f"  - note: {note}" for note in m.notes)
    return "\n".join(out)


def load(path: Path) -> list[tuple[Scenario, Measured]]:
    """Results written by --json, matched to this file's scenarios by name (for --from-json)."""
    known = {s.name: s for s in SCENARIOS}
    results = []
    for row in json.loads(path.read_text()):
        data = dict(row["scenario"])
        data["usage"], data["api_side"] = Usage(**data["usage"]), Usage(**data["api_side"])
        data.setdefault("cpu_ms", {})
        data.setdefault("log_kinds", {})
        measured = Measured(**data)
        if measured.scenario in known:
            results.append((known[measured.scenario], measured))
    return results


def report(results: list[tuple[Scenario, Measured]], deploy: Deployment, title: str) -> None:
    priced = [(s, m) for s, m in results if not s.lever]
    levers = [(s, m) for s, m in results if s.lever]
    out(f"\nUSD per million units of work ({title}; Lambda {deploy.memory_mb} MB {deploy.architecture})\n")
    for name, group in (("priced", priced), ("levers", levers)):
        if not group:
            continue
        out(f"### {name}\n")
        out(priced_table(group, deploy))
        out()
        out(comparison_table(group, deploy, {s.name: m for s, m in results}))
        out()
        out(usage_table(group))
        out()
        if name == "priced":
            out("Over the floor with the dedupe rule, item by item:\n")
            out(excess_table(group, deploy))
            out()
    if priced:
        out("### send_many (not built: what it would save, from the measured single sends and batches)\n")
        out(send_many_table(priced, deploy))
        out()
    out("Requests per unit, by part:\n")
    out(detail(results))


async def main(args: argparse.Namespace) -> None:
    deploy = deployment()
    if args.from_json:
        report(load(Path(args.from_json)), deploy, f"from {args.from_json}")
        return
    chosen = [s for s in SCENARIOS if (not args.only or any(word in s.name for word in args.only))
              and (not args.names or s.name in args.names)]
    results: list[tuple[Scenario, Measured]] = []
    with servers() as endpoints:
        for scenario in chosen:
            started = time.monotonic()
            units = max(1, round(scenario.units * args.scale))
            measured = await run_scenario(scenario, units, endpoints, args.invoke_after)
            results.append((scenario, measured))
            out(f"  {scenario.name}: {time.monotonic() - started:.0f} s, "
                f"${total(measured.usage, deploy) * 1e6:.2f} per million {scenario.unit}s")
    if args.json:
        Path(args.json).write_text(json.dumps([{"scenario": asdict(m), "floor": asdict(s.floor)}
                                               for s, m in results], indent=1))
    report(results, deploy, f"scale {args.scale:g}; invoke after {args.invoke_after:g} s; Python "
                            f"{sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply each scenario's units of work")
    parser.add_argument("--only", nargs="*", help="run the scenarios whose name contains one of these words")
    parser.add_argument("--names", nargs="*", help="run the scenarios of exactly these names")
    parser.add_argument("--json", help="also write the measured usage to this file")
    parser.add_argument("--from-json", help="print the tables of an earlier --json run (prices and rules as now)")
    parser.add_argument("--invoke-after", type=float, default=INVOKE_AFTER, metavar="SECONDS",
                        help="the event sources invoke the worker this long after a batch's last receive "
                             "(Lambda's hand-over; default %(default)s; 0: as soon as this machine can)")
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main(parser.parse_args()))
