"""Flow control across actors (`setup(limits=...)`, `ctx.step(..., limit=...)`), tried from outside in TestEnv: at
most `concurrency` limited steps run at once and at most `per_second` start a second, deployment-wide; a waiting
step suspends and a release wakes it; a dead holder's slot frees itself when its lease ends; every way an attempt
ends gives its slot back; old histories replay; undeclared limits are definition errors."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from dormant import Limit, NonRetryableError, StepContext, StepExhaustedError, WorkflowContext, actor, queue, setup
from dormant.actor import ActorDefinition, Registry
from dormant.aws.observability import ObservedStore, Observer
from dormant.aws.telemetry import EmfMetrics
from dormant.cli.render import status_words
from dormant.core.slots import SlotLease, SlotRefusal, SlotRequest
from dormant.memory.store import MemoryEventStore
from dormant.memory.transport import MemoryTransport
from dormant.ports import ActorRef
from dormant.runtime.service import ActorService
from dormant.runtime.timers import fire_next_timer
from dormant.runtime.wake import wake_actor
from dormant.testing import TestEnv, VirtualClock
from dormant.workflow.errors import WorkflowDefinitionError
from tests.unit.support import Counter as CounterState
from tests.unit.support import Item, deploy, reports_for, start


class Gauge:
    """How many step bodies run at once (and the most there ever were)."""

    def __init__(self) -> None:
        self.now = self.peak = self.total = 0

    async def hold(self, seconds: float = 0.01) -> None:
        self.now += 1
        self.total += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(seconds)  # real time: the others run meanwhile if the limit lets them
        finally:
            self.now -= 1


def charging(name: str, body: Callable[[StepContext], Awaitable[Any]], **step: Any) -> ActorDefinition:
    """An actor whose workflow is one step using limit "stripe"."""
    a = actor(name)

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        return await ctx.step("charge", body, limit="stripe", **step)

    return a


async def _true(value: bool) -> bool:
    return value


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Let the env's wake-ups run (real time) until `check()` holds."""
    for _ in range(500):
        if await check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


def held(env: TestEnv, limit: str = "stripe") -> dict[int, str]:
    return env.store.slots.held(limit, env.now())


def ghost_request(env: TestEnv, registry: Registry, holder: str, *, lease: float = 60.0) -> SlotRequest:
    """What a worker that died mid-step asked for: its slot outlives it until the lease ends."""
    ref = ActorRef(name="payer", key=("ghost",))  # never created: waking it finds nothing
    return SlotRequest(rule=registry.limits["stripe"].rule("stripe"), ref=ref, holder=holder, now=env.now(),
                       lease_until=env.now() + lease, queued_since=env.now(), queued=False)


# -- the done-when of issue 23, item 4 --------------------------------------------------------------------------------

async def test_six_actors_with_a_limit_of_two_never_run_more_than_two_steps_at_once_and_all_finish() -> None:
    gauge = Gauge()

    async def charge(s: StepContext) -> str:
        await gauge.hold()
        return s.key[0]

    registry = setup(charging("payer", charge), limits={"stripe": Limit(concurrency=2)})
    async with TestEnv(registry) as env:
        handles = [env.client.get_or_create("payer", [f"p{n}"]) for n in range(6)]
        for handle in handles:
            await handle.status()  # creates it: its first wake-up runs the step (or waits for a slot)
        await env.run_until_idle()  # no clock moves: each release hands its slot on at once
        for n, handle in enumerate(handles):
            status = await handle.status()
            assert status.workflow == "completed" and status.output == f"p{n}"
        assert held(env) == {} and env.store.slots.waiting("stripe") == []
    assert gauge.total == 6
    assert gauge.peak == 2  # they overlapped (without the limit all six run at once), never three


async def test_a_waiting_step_says_which_limit_in_status_and_runs_when_the_slot_frees() -> None:
    gate, started = asyncio.Event(), asyncio.Event()

    async def charge(s: StepContext) -> str:
        if s.key[0] == "first":
            started.set()
            await gate.wait()
        return s.key[0]

    registry = setup(charging("payer", charge), limits={"stripe": Limit(concurrency=1)})
    async with TestEnv(registry) as env:
        first, second = (env.client.get_or_create("payer", [key]) for key in ("first", "second"))
        await first.status()
        await asyncio.wait_for(started.wait(), 5)
        await second.status()
        await until(lambda: _sleeping(second), "the second actor suspends for the slot")

        status = await second.status()
        assert status.waiting_for.limits == ["stripe"] and status.waiting_for.queues == []
        assert status.waiting_for.retry_at is None  # a wait, not a failed step's retry
        # The next try is at the first lease's end (the holder may have died), plus at most 1 s of jitter.
        assert status.waiting_for.deadline is not None
        assert env.now() + 60 <= status.waiting_for.deadline <= env.now() + 61
        assert "waits for limit [bold]stripe[/bold] (next try" in status_words(status, env.now())
        entry = next(e for e in await second.history() if e.name == "charge")
        assert entry.status.value == "pending" and entry.attempts == 0  # no attempt counted
        assert entry.throttled_since == env.now()
        assert env.store.slots.waiting("stripe") == [second.ref]
        assert list(held(env).values()) == [first.ref.id]

        gate.set()
        await env.run_until_idle()
        status = await second.status()
        assert status.workflow == "completed" and status.waiting_for.limits == []
        entry = next(e for e in await second.history() if e.name == "charge")
        assert entry.attempts == 1 and entry.throttled_since is None
        assert len(reports_for(env, second)) == 2  # its first wake-up, and the one the release sent: no polling


async def _sleeping(handle: Any) -> bool:
    return bool((await handle.status()).workflow == "sleeping")


async def test_waiters_are_woken_oldest_first() -> None:
    order: list[str] = []
    gate, started = asyncio.Event(), asyncio.Event()

    async def charge(s: StepContext) -> None:
        order.append(s.key[0])
        if s.key[0] == "holder":
            started.set()
            await gate.wait()

    registry = setup(charging("payer", charge), limits={"stripe": Limit(concurrency=1)})
    async with TestEnv(registry) as env:
        await env.client.get_or_create("payer", ["holder"]).status()
        await asyncio.wait_for(started.wait(), 5)
        for key in ("d", "b", "c"):  # arriving in this order, a second apart (not the keys' order)
            handle = env.client.get_or_create("payer", [key])
            await handle.status()
            await until(lambda h=handle: _sleeping(h), f"{key} waits")
            env.clock.advance(1)
        gate.set()
        await env.run_until_idle()
    assert order == ["holder", "d", "b", "c"]


# -- per_second -----------------------------------------------------------------------------------------------------

async def test_per_second_never_starts_more_than_its_rate_in_any_second_and_spreads_the_waiters() -> None:
    starts: list[float] = []
    asks: list[str] = []

    async def charge(s: StepContext) -> None:
        starts.append(env.now())

    registry = setup(charging("payer", charge), limits={"stripe": Limit(per_second=2)})
    async with TestEnv(registry) as env:
        env.store.on_call = lambda _, operation: asks.append(operation) if operation == "acquire_slot" else None
        handles = [env.client.get_or_create("payer", [f"p{n}"]) for n in range(7)]
        for handle in handles:
            await handle.status()
        await env.run_until_idle()
        assert len(starts) == 2
        await env.advance(5)
        for handle in handles:
            assert (await handle.status()).workflow == "completed"
    per_second = Counter(int(moment) for moment in starts)
    first = min(per_second)
    assert per_second == {first: 2, first + 1: 2, first + 2: 2, first + 3: 1}
    # Each refused step came back once, in the window its place in line gave it: 7 asks and 5 retries, not a
    # crowd asking again every second.
    assert len(asks) == 12


async def test_a_rate_below_one_a_second_starts_one_per_window() -> None:
    starts: list[float] = []

    async def charge(s: StepContext) -> None:
        starts.append(env.now())

    registry = setup(charging("payer", charge), limits={"stripe": Limit(per_second=0.25)})  # one per 4 s
    async with TestEnv(registry) as env:
        for n in range(3):
            await env.client.get_or_create("payer", [f"p{n}"]).status()
        await env.advance(13)
    assert len(starts) == 3
    assert len({int(moment // 4) for moment in starts}) == 3  # three different 4-second windows


async def test_concurrency_and_rate_together_keep_both() -> None:
    gauge, starts = Gauge(), []

    async def charge(s: StepContext) -> None:
        starts.append(env.now())
        await gauge.hold()

    registry = setup(charging("payer", charge), limits={"stripe": Limit(concurrency=2, per_second=3)})
    async with TestEnv(registry) as env:
        handles = [env.client.get_or_create("payer", [f"p{n}"]) for n in range(8)]
        for handle in handles:
            await handle.status()
        await env.run_until_idle()
        await env.advance(5)
        for handle in handles:
            assert (await handle.status()).workflow == "completed"
        assert held(env) == {}
    assert gauge.peak == 2
    assert max(Counter(int(moment) for moment in starts).values()) == 3


# -- leases ---------------------------------------------------------------------------------------------------------

async def test_a_dead_holders_slot_frees_itself_when_its_lease_ends() -> None:
    ran: list[str] = []

    async def charge(s: StepContext) -> None:
        ran.append(s.key[0])

    registry = setup(charging("payer", charge), limits={"stripe": Limit(concurrency=1, lease=30)})
    async with TestEnv(registry) as env:
        ghost = await env.store.acquire_slot(ghost_request(env, registry, "a worker that was killed", lease=30))
        assert isinstance(ghost, SlotLease)  # and nobody will release or renew it
        handle = await start(env, "payer", "late")
        status = await handle.status()
        assert status.waiting_for.limits == ["stripe"]
        assert env.now() + 30 <= (status.waiting_for.deadline or 0) <= env.now() + 31
        await env.advance(29)
        assert ran == [] and (await handle.status()).workflow == "sleeping"
        await env.advance(3)  # its timer at the lease's end: the slot is free
        assert ran == ["late"] and (await handle.status()).workflow == "completed"
        assert held(env) == {}


async def test_a_step_rerun_after_a_crash_takes_back_its_own_slot_not_a_second_one() -> None:
    seen: list[dict[int, str]] = []

    async def charge(s: StepContext) -> None:
        seen.append(held(env))

    registry = setup(charging("payer", charge), limits={"stripe": Limit(concurrency=1)})
    async with TestEnv(registry) as env:
        ref = env.client.get_or_create("payer", ["again"]).ref
        # Its previous wake-up died half-way through the step, holding the only slot.
        mine = await env.store.acquire_slot(ghost_request(env, registry, f"{ref.id}|charge"))
        assert isinstance(mine, SlotLease)
        handle = await start(env, "payer", "again")
        assert (await handle.status()).workflow == "completed"  # at once: it did not wait for its own lease
        assert seen == [{mine.slot: ref.id}]  # the one slot, held once
        assert held(env) == {}


async def test_a_step_longer_than_its_lease_keeps_its_slot() -> None:
    gate, started = asyncio.Event(), asyncio.Event()
    probes: list[bool] = []

    async def charge(s: StepContext) -> None:
        started.set()
        await gate.wait()

    registry = setup(charging("payer", charge), limits={"stripe": Limit(concurrency=1, lease=3)})
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("payer", ["long"])
        await handle.status()
        await asyncio.wait_for(started.wait(), 5)
        renewals: list[float] = []
        renew_slot = env.store.renew_slot

        async def counted(lease: SlotLease, until: float) -> bool:
            renewed = await renew_slot(lease, until)
            renewals.append(until)
            return renewed

        env.store.renew_slot = counted  # type: ignore[method-assign]
        for second in range(12):  # 12 s of a 3 s lease, renewed every second
            env.clock.advance(1)
            await until(lambda second=second: _true(len(renewals) > second), "the renewal ran")
            other = await env.store.acquire_slot(ghost_request(env, registry, f"someone else {second}"))
            probes.append(isinstance(other, SlotRefusal))
        assert list(held(env).values()) == [handle.ref.id]
        gate.set()
        await env.run_until_idle()
        assert (await handle.status()).workflow == "completed"
    assert all(probes)


async def test_fire_timer_moves_a_waiting_steps_next_try_to_now_which_asks_again() -> None:
    async def charge(s: StepContext) -> None:
        return None

    registry = setup(charging("payer", charge), limits={"stripe": Limit(concurrency=1)})
    async with TestEnv(registry) as env:
        ghost = await env.store.acquire_slot(ghost_request(env, registry, "someone"))
        assert isinstance(ghost, SlotLease)
        handle = await start(env, "payer", "waiting")
        result = await fire_next_timer(env.service, handle.ref)
        assert result.outcome == "fired" and "the next try of step charge for a slot of limit stripe" in result.message
        await env.run_until_idle()
        assert (await handle.status()).waiting_for.limits == ["stripe"]  # it asked again: still held
        await env.store.release_slot(ghost, env.now())
        await fire_next_timer(env.service, handle.ref)
        await env.run_until_idle()
        assert (await handle.status()).workflow == "completed"


# -- every end of an attempt gives the slot back ------------------------------------------------------------------

async def _handover(registry: Registry, first_key: str, *, after: Callable[[TestEnv], Awaitable[None]]) -> TestEnv:
    """Start `first_key` (which takes the only slot), then "next", which waits; `after` ends the first's attempt."""
    async with TestEnv(registry) as env:
        first = env.client.get_or_create(registry.actors[next(iter(registry.actors))].name, [first_key])
        await first.status()
        await until(lambda: _holds(env), "the first step holds the slot")
        waiting = env.client.get_or_create(first.ref.name, ["next"])
        await waiting.status()
        await until(lambda: _sleeping(waiting), "the next one waits")
        await after(env)
        await env.run_until_idle()
        assert (await waiting.status()).workflow == "completed"  # handed over, the clock never moved
        assert held(env) == {}
        return env


async def _holds(env: TestEnv) -> bool:
    return bool(held(env))


async def test_a_failed_attempt_gives_its_slot_back() -> None:
    gate = asyncio.Event()

    async def charge(s: StepContext) -> str:
        if s.key[0] == "failing":
            await gate.wait()
            raise NonRetryableError("card declined")
        return "ok"

    a = actor("payer")

    @a.workflow
    async def run(ctx: WorkflowContext) -> str:
        try:
            return str(await ctx.step("charge", charge, limit="stripe"))
        except StepExhaustedError as error:
            return error.error_type

    async def fail(env: TestEnv) -> None:
        gate.set()

    env = await _handover(setup(a, limits={"stripe": Limit(concurrency=1)}), "failing", after=fail)
    assert env.failures == []


async def test_a_timed_out_attempt_gives_its_slot_back() -> None:
    async def charge(s: StepContext) -> str:
        if s.key[0] == "slow":
            await asyncio.sleep(30)
        return "ok"

    a = charging("payer", charge, timeout=0.2, max_retries=0)

    async def nothing(env: TestEnv) -> None:
        return None  # the timeout ends it

    env = await _handover(setup(a, limits={"stripe": Limit(concurrency=1)}), "slow", after=nothing)
    del env


async def test_a_race_loser_gives_its_slot_back() -> None:
    a = actor("payer", queues={"cancel": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> str:
        async def charge(b: WorkflowContext) -> str:
            async def call(s: StepContext) -> str:
                if s.key[0] == "racing":
                    await asyncio.sleep(30)  # cancelled when the other branch wins
                return "charged"

            return str(await b.step("charge", call, limit="stripe"))

        async def cancel(b: WorkflowContext) -> str:
            await b.queue.next("wait-cancel")
            return "cancelled"

        result = await ctx.race("charge-or-cancel", {"charge": charge, "cancel": cancel})
        return str(result.value)

    async def cancel_it(env: TestEnv) -> None:
        await env.client.get_or_create("payer", ["racing"]).send("cancel", {"n": 1})

    env = await _handover(setup(a, limits={"stripe": Limit(concurrency=1)}), "racing", after=cancel_it)
    assert (await env.client.get_or_create("payer", ["racing"]).status()).output == "cancelled"


async def test_a_race_lost_while_asking_for_the_slot_gives_back_what_the_store_granted() -> None:
    a = actor("payer")

    @a.workflow
    async def run(ctx: WorkflowContext) -> str:
        async def limited(b: WorkflowContext) -> str:
            return str(await b.step("charge", lambda s: "charged", limit="stripe"))

        async def fast(b: WorkflowContext) -> str:
            return str(await b.step("fast", lambda s: "fast"))

        return str((await ctx.race("r", {"limited": limited, "fast": fast})).value)

    async with TestEnv(setup(a, limits={"stripe": Limit(concurrency=1)})) as env:
        granted = env.store.acquire_slot

        async def slow_answer(request: SlotRequest) -> SlotLease | SlotRefusal:
            answer = await granted(request)  # the store has granted it...
            await asyncio.sleep(0.05)  # ...but the answer is slow to come back: the other branch wins meanwhile
            return answer

        env.store.acquire_slot = slow_answer  # type: ignore[method-assign]
        env.store.acquire_slot_now = None  # type: ignore[assignment]  # (not answered at once: by the coroutine)
        handle = await start(env, "payer")
        assert (await handle.status()).output == "fast"
        assert held(env) == {}  # given back at once, not held until its lease ends


async def test_two_branches_of_one_wake_up_share_a_limit_of_one_without_suspending() -> None:
    gauge = Gauge()
    a = actor("payer")

    @a.workflow
    async def run(ctx: WorkflowContext) -> dict[str, Any]:
        async def branch(b: WorkflowContext) -> None:
            async def call(s: StepContext) -> None:
                await gauge.hold()

            await b.step("charge", call, limit="stripe")

        return await ctx.join("both", {"left": branch, "right": branch})

    async with TestEnv(setup(a, limits={"stripe": Limit(concurrency=1)})) as env:
        handle = await start(env, "payer")
        assert (await handle.status()).workflow == "completed"
        # The second waited in process beside the first and took the slot it freed: the first wake-up finished the
        # workflow, with no suspension. (The release also woke the actor, as the waiter it was: a wake-up with
        # nothing to do.)
        first, *rest = reports_for(env, handle)
        assert first.outcome == "completed"
        assert all(report.commits == 0 for report in rest)
    assert gauge.total == 2 and gauge.peak == 1


# -- replay and definitions -------------------------------------------------------------------------------------------

def two_steps(*, limited: bool, body: Callable[[StepContext], Any] | None = None) -> Registry:
    a = actor("payer", state=CounterState, queues={"go": queue(Item)})
    limit = "stripe" if limited else None

    @a.workflow
    async def run(ctx: WorkflowContext) -> list[Any]:
        first = await ctx.step("first", body or (lambda s: 1), limit=limit)
        await ctx.queue.next("wait-go")
        second = await ctx.step("second", lambda s: 2, limit=limit)
        return [first, second]

    return setup(a, limits={"stripe": Limit(concurrency=1)} if limited else None)


async def test_a_history_recorded_without_limits_replays_under_code_that_adds_them() -> None:
    asks: list[str] = []
    async with TestEnv(two_steps(limited=False)) as env:
        handle = await start(env, "payer")
        store = env.store
    async with deploy(two_steps(limited=True), store) as env:
        store.on_call = lambda _, operation: asks.append(operation) if operation.endswith("_slot") else None
        await handle.send("go", {"n": 1})
        await env.run_until_idle()
        assert (await env.client.get_or_create("payer", ["k"]).status()).output == [1, 2]
    assert asks == ["acquire_slot", "release_slot"]  # for "second" only: the replayed "first" took no slot


async def test_a_step_waiting_for_a_limit_runs_after_a_deploy_that_takes_the_limit_away() -> None:
    registry = two_steps(limited=True)
    async with TestEnv(registry) as env:
        await env.store.acquire_slot(ghost_request(env, registry, "someone"))
        handle = await start(env, "payer")
        assert (await handle.status()).waiting_for.limits == ["stripe"]
        store = env.store
    async with deploy(two_steps(limited=False), store) as env:  # wakes every actor once
        await env.run_until_idle()
        handle = env.client.get_or_create("payer", ["k"])
        status = await handle.status()
        assert status.workflow == "sleeping" and status.waiting_for.queues == ["go"]
        assert status.waiting_for.limits == []
        first = next(e for e in await handle.history() if e.name == "first")
        assert first.status.value == "completed" and first.throttled_since is None


async def test_an_undeclared_limit_fails_the_workflow_before_the_step_runs() -> None:
    ran: list[str] = []
    for limit, registry_limits in (("nope", {"stripe": Limit(concurrency=1)}), ("stripe", None), (7, None)):
        a = actor("payer")

        @a.workflow
        async def run(ctx: WorkflowContext, limit: Any = limit) -> None:
            await ctx.step("charge", lambda s: ran.append("charge"), limit=limit)

        async with TestEnv(setup(a, limits=registry_limits)) as env:
            handle = await start(env, "payer")
            status = await handle.status()
            assert status.workflow == "failed"
            assert status.error is not None and status.error.startswith("WorkflowDefinitionError: ")
            assert 'step "charge"' in status.error
            if isinstance(limit, str):
                assert repr(limit) in status.error and ("'stripe'" in status.error or "none" in status.error)
            assert await handle.history() == []  # nothing recorded, nothing asked
    assert ran == []


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Limit(), "needs concurrency="),
    (lambda: Limit(concurrency=0), "concurrency must be 1 to 1000"),
    (lambda: Limit(concurrency=1001), "concurrency must be 1 to 1000"),
    (lambda: Limit(concurrency=2.5), "whole number"),  # type: ignore[arg-type]
    (lambda: Limit(concurrency=True), "whole number"),
    (lambda: Limit(per_second=0), "above 0"),
    (lambda: Limit(per_second=-1), "above 0"),
    (lambda: Limit(per_second=301), "sharding a limit is not supported"),
    (lambda: Limit(per_second=2.5), "whole number"),
    (lambda: Limit(per_second=float("nan")), "finite"),
    (lambda: Limit(per_second="5"), "finite"),  # type: ignore[arg-type]
    (lambda: Limit(concurrency=1, lease=0.5), "lease must be"),
    (lambda: setup(limits={"": Limit(concurrency=1)}), "limit name"),
    (lambda: setup(limits={"has space": Limit(concurrency=1)}), "limit name"),
    (lambda: setup(limits={"a/b": Limit(concurrency=1)}), "limit name"),
    (lambda: setup(limits={"x" * 65: Limit(concurrency=1)}), "limit name"),
    (lambda: setup(limits={"stripe": {"concurrency": 1}}), "must be a dormant.Limit"),  # type: ignore[dict-item]
    (lambda: setup(limits=[("stripe", Limit(concurrency=1))]), "mapping"),  # type: ignore[arg-type]
])
def test_limits_are_checked_where_they_are_declared(make: Callable[[], Any], message: str) -> None:
    with pytest.raises(WorkflowDefinitionError, match=message):
        make()


def test_good_limits_are_kept() -> None:
    registry = setup(limits={"stripe": Limit(concurrency=5, per_second=20), "ses.v2:eu-1": Limit(per_second=0.5)})
    assert registry.limits["stripe"].rule("stripe").per_window == 20
    slow = registry.limits["ses.v2:eu-1"]
    assert (slow.window, slow.per_window, slow.concurrency) == (2.0, 1, None)
    assert slow.lease_for(None) == 60 and slow.lease_for(2) == 7 and slow.lease_for(600) == 60


# -- what the worker measures -----------------------------------------------------------------------------------------

async def test_the_wake_up_record_counts_throttled_steps_and_names_the_limit() -> None:
    from aws_lambda_powertools import Metrics

    async def charge(s: StepContext) -> None:
        return None

    registry = setup(charging("payer", charge), limits={"stripe": Limit(concurrency=1)})
    memory = MemoryEventStore()
    metrics = Metrics(namespace="DormantTest", service="worker")
    observer = Observer(EmfMetrics(metrics))
    clock = VirtualClock()
    service = ActorService(registry, ObservedStore(memory, observer), MemoryTransport(), clock)  # type: ignore[arg-type]
    blocker = ghost_request_for(registry, clock.now())
    assert isinstance(await memory.acquire_slot(blocker), SlotLease)
    ref = ActorRef(name="payer", key=("k",))
    await service.create_actor(ref, None, wake=False)
    watch = observer.begin(ref, [])
    record = observer.finished(watch, await wake_actor(service, ref))
    assert record.throttled == 1 and record.limits == ["stripe"]
    assert "1 step throttled (limit stripe)" in record.line()
    assert metrics.metric_set["StepsThrottled"]["Value"] == [1.0]
    metrics.clear_metrics()


def ghost_request_for(registry: Registry, now: float) -> SlotRequest:
    return SlotRequest(rule=registry.limits["stripe"].rule("stripe"), ref=ActorRef(name="payer", key=("ghost",)),
                       holder="ghost", now=now, lease_until=now + 60, queued_since=now, queued=False)
