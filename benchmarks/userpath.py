"""Dormant measured through the public API as a user's tests run it: TestEnv, `send` (or create) then
`run_until_idle`, process CPU time. The workloads of `make bench-check` (benchmarks/bench_check.py) and of Dormant's
column in `make bench-peers` (benchmarks/peers.py).

Each function returns seconds of CPU (or bytes) for the whole workload; callers divide by the items.
"""

from __future__ import annotations

import asyncio
import gc
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel

import dormant
from dormant import StepContext, WorkflowContext, actor, queue, setup
from dormant.actor import Registry

try:
    from dormant.memory.store import MemoryEventStore
except ModuleNotFoundError:  # a tree from before dormant.memory became a package (benchmarks/userpath_ab.py)
    from dormant.memory import MemoryEventStore  # type: ignore[attr-defined,no-redef]
from dormant.testing import TestEnv


class Spec(BaseModel):
    steps: int
    limited: bool = False
    wait: bool = False
    size: int = 0  # bytes of state (the large-state case): a list of 100 parts


def _one(_: StepContext) -> int:
    return 1


steps_actor = actor("u-steps", queues={"go": queue(dict)})


@steps_actor.workflow
async def run_steps(ctx: WorkflowContext) -> int:
    """N sequential steps (under limit "lim" when `limited`); with `wait`, then a queue wait (the replay case)."""
    spec = Spec.model_validate(ctx.input)
    total = 0
    if spec.limited:
        for i in range(spec.steps):
            total += await ctx.step(f"s{i}", _one, limit="lim")
    else:
        for i in range(spec.steps):
            total += await ctx.step(f"s{i}", _one)
    if spec.wait:
        await ctx.queue.next("go")
    return total


class Tally(BaseModel):
    processed: int = 0


drain_actor = actor("u-drain", state=Tally, queues={"inc": queue(dict)})


@drain_actor.workflow
async def run_drain(ctx: WorkflowContext) -> None:
    """The DESIGN counter's shape: a loop, per message a queue receive and a step that changes the state."""
    async def iteration(loop: WorkflowContext) -> None:
        await loop.queue.next("next")

        def apply(s: StepContext) -> None:
            s.state.processed += 1
        await loop.step("apply", apply)
    await ctx.loop("loop", iteration)


class Big(BaseModel):
    parts: list[str] = []


big_actor = actor("u-big", state=Big, queues={"change": queue(dict)})


@big_actor.workflow
async def run_big(ctx: WorkflowContext) -> None:
    """State of 100 parts; each message changes one part in a step."""
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("next")

        def apply(s: StepContext) -> None:
            if not s.state.parts:
                s.state.parts = ["x" * message.body["part"]] * 100
            else:
                s.state.parts[message.body["i"] % 100] = "y" * message.body["part"]
        await loop.step("apply", apply)
    await ctx.loop("loop", iteration)


async def _map_item(item_ctx: WorkflowContext, item: int) -> int:
    return int(await item_ctx.step("work", _one)) + item


map_actor = actor("u-map")


@map_actor.workflow
async def run_map(ctx: WorkflowContext) -> int:
    items = int(ctx.input["items"])
    result = await ctx.map("items", list(range(items)), _map_item, max_concurrency=50)
    return len(result.values)


# A tree from before flow control (benchmarks/userpath_ab.py measures one) has no Limit: no limited row there.
HAS_LIMITS = hasattr(dormant, "Limit")
HAS_MAP = hasattr(WorkflowContext, "map")  # nor, before it, ctx.map: no map rows there
_limits = {"lim": dormant.Limit(concurrency=1000)} if HAS_LIMITS else None
registry: Registry = (setup(steps_actor, drain_actor, big_actor, map_actor, limits=_limits) if HAS_LIMITS
                      else setup(steps_actor, drain_actor, big_actor, map_actor))


def env() -> TestEnv:
    # No commit log: a test feature (the crash tests read it), a heap a real store does not keep.
    return TestEnv(registry, store=MemoryEventStore(keep_commit_log=False))


async def cpu(work: Callable[[], Awaitable[Any]]) -> float:
    gc.collect()
    start = time.process_time()
    await work()
    return time.process_time() - start


# ---- the workloads: each builds what it needs untimed, then times the user's calls -----------------------------
async def fresh_steps(n: int, limited: bool = False) -> float:
    """CPU of one wake-up running n new steps: create, then run_until_idle."""
    async with env() as e:
        return await create_and_run(e, steps_actor.name, Spec(steps=n, limited=limited).model_dump())


async def create(e: TestEnv, name: str, key: list[str], input: Any = None) -> Any:
    """`client.create`; on a tree from before it (benchmarks/userpath_ab.py), the creation it stands for."""
    made = getattr(e.client, "create", None)
    if made is not None:
        return await made(name, key, input=input)
    await e.service.ensure_created(e.service.ref(name, key), input)
    return e.client.get_or_create(name, key, input=input)


async def create_and_run(e: TestEnv, name: str, input: dict[str, Any]) -> float:
    key = str(uuid.uuid4())

    async def work() -> None:
        await create(e, name, [key], input=input)
        await e.run_until_idle()
    seconds = await cpu(work)
    assert not e.failures, e.failures
    return seconds


async def replay(n: int) -> float:
    """CPU of one wake-up that replays n completed steps up to a queue wait (a message it does not take)."""
    async with env() as e:
        key = str(uuid.uuid4())
        await create(e, steps_actor.name, [key], input=Spec(steps=n, wait=True).model_dump())
        await e.run_until_idle()
        ref = e.service.ref(steps_actor.name, [key])

        async def work() -> None:
            await e.transport.wake(ref)
            await e.run_until_idle()
        return await cpu(work)


async def send_drain(n: int) -> float:
    """CPU of n sends and the wake-up(s) that drain them (sends included)."""
    async with env() as e:
        handle = await create(e, drain_actor.name, [str(uuid.uuid4())])
        await e.run_until_idle()

        async def work() -> None:
            for _ in range(n):
                await handle.send("inc", {"d": 1})
            await e.run_until_idle()
        seconds = await cpu(work)
        assert (await handle.state()).processed == n
        return seconds


async def drain(n: int) -> float:
    """CPU of the one wake-up that drains n messages already queued (sends not included)."""
    async with env() as e:
        key = str(uuid.uuid4())
        handle = await create(e, drain_actor.name, [key])
        await e.run_until_idle()
        ref = e.service.ref(drain_actor.name, [key])
        for _ in range(n):
            await e.store.enqueue(ref, queued_message())

        async def work() -> None:
            await e.transport.wake(ref)
            await e.run_until_idle()
        seconds = await cpu(work)
        assert (await handle.state()).processed == n
        return seconds


def queued_message() -> Any:
    from dormant.ports import InboxMessage
    return InboxMessage(id=str(uuid.uuid4()), queue="inc", body={"d": 1}, created_at=0.0)


async def loop_wake(age: int) -> float:
    """CPU of one send and the wake-up that processes it, after `age` messages processed."""
    async with env() as e:
        handle = await create(e, drain_actor.name, [str(uuid.uuid4())])
        for _ in range(age):
            await handle.send("inc", {"d": 1})
        await e.run_until_idle()

        async def work() -> None:
            await handle.send("inc", {"d": 1})
            await e.run_until_idle()
        return await cpu(work)


async def mapped(items: int) -> float:
    async with env() as e:
        return await create_and_run(e, map_actor.name, {"items": items})


async def big_state(size: int, changes: int) -> float:
    """CPU per message changing one of 100 parts of a `size`-byte state (the first message builds it)."""
    async with env() as e:
        handle = await create(e, big_actor.name, [str(uuid.uuid4())])
        await handle.send("change", {"part": size // 100, "i": 0})
        await e.run_until_idle()

        async def work() -> None:
            for i in range(changes):
                await handle.send("change", {"part": size // 100, "i": i + 1})
                await e.run_until_idle()
        return await cpu(work)


# ---- memory: tracemalloc's peak of one wake-up, per step or entry beyond a 100-step run's -----------------------
async def _peak(work: Callable[[], Awaitable[Any]]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        await work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


async def fresh_peak(n: int) -> int:
    async with env() as e:
        key = str(uuid.uuid4())
        ref = e.service.ref(steps_actor.name, [key])
        await e.service.ensure_created(ref, Spec(steps=n).model_dump())

        async def work() -> None:
            await e.transport.wake(ref)
            await e.run_until_idle()
        return await _peak(work)


async def replay_peak(n: int) -> int:
    async with env() as e:
        key = str(uuid.uuid4())
        await create(e, steps_actor.name, [key], input=Spec(steps=n, wait=True).model_dump())
        await e.run_until_idle()
        ref = e.service.ref(steps_actor.name, [key])

        async def work() -> None:
            await e.transport.wake(ref)
            await e.run_until_idle()
        return await _peak(work)


def _base_for(n: int, base: int) -> int:
    """The smaller run a memory row subtracts: `base` steps, or half of `n` when `n` is not larger (`--n 100`)."""
    if n < 2:
        raise ValueError(f"a memory row needs at least 2 steps, not {n}")
    return base if base < n else n // 2


async def memory_per_step(n: int = 1000, base: int = 100) -> float:
    base = _base_for(n, base)
    return (await fresh_peak(n) - await fresh_peak(base)) / (n - base)


async def memory_per_entry(n: int = 1000, base: int = 100) -> float:
    base = _base_for(n, base)
    return (await replay_peak(n) - await replay_peak(base)) / (n - base)


def run(coro: Awaitable[Any]) -> Any:
    async def main() -> Any:
        return await coro
    return asyncio.run(main())
