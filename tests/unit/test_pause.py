"""Pause and unpause in TestEnv (dormant.runtime.pausing): a paused actor runs no wake-up, keeps what arrives and
what comes due, refuses actions and resumes, and runs it all once it is unpaused; each message applied once."""

from __future__ import annotations

import asyncio

import pytest

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup
from dormant.errors import ActorFinishedError, ActorNotFoundError, ActorPausedError, NoTimerError
from dormant.runtime.timers import fire_next_timer
from dormant.testing import TestEnv
from dormant.workflow.caller import Caller
from dormant.workflow.history import WorkflowState
from tests.unit.support import Counter, Item, reports_for, store_dump

ledger = actor("ledger", state=Counter, queues={"add": queue(Item), "nap": queue(float), "later": queue(float)})
GATE: dict[str, asyncio.Event] = {}


@ledger.workflow
async def run_ledger(ctx: WorkflowContext) -> None:
    async def iteration(loop: WorkflowContext) -> None:
        message = await loop.queue.next("take", names=["add", "nap", "later"])
        if message.name == "nap":
            await loop.sleep("nap", float(message.body))

            def woke(s: StepContext) -> None:
                s.state.log.append("woke")
            await loop.step("woke", woke)
        elif message.name == "later":
            async def schedule(s: StepContext) -> None:
                await s.schedule.after(float(message.body), "bump", 100)
            await loop.step("schedule", schedule)
        else:
            async def apply(s: StepContext) -> None:
                gate = GATE.get("apply")
                if gate is not None:
                    GATE["entered"].set()
                    await gate.wait()
                s.state.value += message.body.n
                s.state.log.append(message.body.n)
            await loop.step("apply", apply)
    await ctx.loop("main", iteration)


WAKES: list[str] = []


@ledger.on_wake
def count_wakes(c: object) -> None:
    WAKES.append("wake")


@ledger.action
def bump(c: ActionContext, n: int) -> int:
    c.state.value += n
    c.state.log.append(f"bump {n}")
    return int(c.state.value)


done = actor("done", state=Counter, queues={"go": queue(int)})


@done.workflow
async def run_done(ctx: WorkflowContext) -> None:
    await ctx.queue.next("go")


registry = setup(ledger, done)


@pytest.fixture(autouse=True)
def no_gate() -> None:
    GATE.clear()
    WAKES.clear()


async def test_a_paused_actor_keeps_a_message_until_unpaused_then_applies_it_once() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("ledger", ["a"])
        await handle.send("add", {"n": 1})
        await env.run_until_idle()
        paused = await handle.pause("incident 42")
        assert (paused.outcome, paused.status) == ("paused", WorkflowState.SLEEPING)
        sent = await handle.send("add", {"n": 10})
        assert (sent.status, sent.workflow) == ("queued", WorkflowState.PAUSED)  # stored, held
        wakes, commits = len(WAKES), len(env.store.commit_log)
        await env.run_until_idle()
        await env.advance(3600)
        assert (await handle.state()).log == [1]  # woken by the send: nothing ran
        assert reports_for(env, handle)[-1].outcome == "paused"
        assert (len(WAKES), len(env.store.commit_log)) == (wakes, commits)  # not even its on_wake hook
        assert [m.id for m in (await handle.inbox()).messages] == [sent.id]
        status = await handle.status()
        assert status.workflow is WorkflowState.PAUSED and status.paused is not None
        assert (status.paused.reason, status.paused.previous, status.paused.by) == (
            "incident 42", WorkflowState.SLEEPING, None)
        assert status.waiting_for.queues == ["add", "later", "nap"]  # the record keeps what it waits for

        unpaused = await handle.unpause()
        assert (unpaused.outcome, unpaused.status) == ("unpaused", WorkflowState.PAUSED)
        await env.run_until_idle()
        assert (await handle.state()).log == [1, 10]
        assert (await handle.status()).workflow is WorkflowState.SLEEPING and (await handle.inbox()).total == 0
        await env.run_until_idle()
        assert (await handle.state()).log == [1, 10]  # once


async def test_who_paused_it_is_recorded_from_the_caller() -> None:
    async with TestEnv(registry) as env:
        caller = Caller(kind="jwt", id="ana")
        handle = env.client.as_caller(caller).get_or_create("ledger", ["who"])
        await handle.send("add", {"n": 1})
        await env.run_until_idle()
        await handle.pause()
        paused = (await handle.status()).paused
        assert paused is not None and paused.by == "jwt:ana" and paused.reason is None


async def test_a_timer_that_comes_due_while_paused_fires_at_the_unpause() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("ledger", ["t"])
        await handle.send("nap", 3600)
        await env.run_until_idle()
        deadline = (await handle.status()).waiting_for.deadline
        assert deadline is not None
        await handle.pause()
        await env.advance(7200)  # the timer fires into a paused actor: nothing runs
        assert (await handle.state()).log == []
        assert (await handle.status()).waiting_for.deadline == deadline
        await handle.unpause()
        await env.run_until_idle()
        assert (await handle.state()).log == ["woke"]


async def test_a_timer_still_ahead_at_the_unpause_fires_at_its_time() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("ledger", ["ahead"])
        await handle.send("nap", 3600)
        await env.run_until_idle()
        await handle.pause()
        await env.advance(60)
        await handle.unpause()
        await env.run_until_idle()
        assert (await handle.state()).log == []  # not due yet
        await env.advance(3600 - 60 - 1)
        assert (await handle.state()).log == []
        await env.advance(2)
        assert (await handle.state()).log == ["woke"]


async def test_scheduled_actions_are_held_while_paused_and_run_after() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("ledger", ["s"])
        await handle.send("later", 60)
        await env.run_until_idle()
        await handle.pause()
        await env.advance(120)
        assert (await handle.state()).value == 0
        assert [m.kind for m in (await handle.inbox()).messages] == ["action"]
        await handle.unpause()
        await env.run_until_idle()
        assert (await handle.state()).log == ["bump 100"]


async def test_actions_resumes_and_fired_timers_are_refused_while_paused_and_change_nothing() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("ledger", ["r"])
        await handle.send("nap", 600)
        await env.run_until_idle()
        await handle.pause("hold")
        before = store_dump(env.store)
        with pytest.raises(ActorPausedError, match="paused"):
            await handle.call("bump", 1)
        with pytest.raises(ActorPausedError, match="unpause it"):
            await handle.resume()
        with pytest.raises(NoTimerError, match="paused"):
            await fire_next_timer(env.service, handle.ref)
        assert store_dump(env.store) == before
        assert (await handle.state()).value == 0  # reads answer
        again = await handle.pause("again")
        assert again.outcome == "unchanged" and "hold" in again.message
        assert (await handle.status()).paused.reason == "hold"  # type: ignore[union-attr]


async def test_a_finished_actor_cannot_be_paused_and_unpause_of_a_running_one_changes_nothing() -> None:
    async with TestEnv(registry) as env:
        finished = env.client.get_or_create("done", ["f"])
        await finished.send("go", 1)
        await env.run_until_idle()
        assert (await finished.status()).workflow is WorkflowState.COMPLETED
        with pytest.raises(ActorFinishedError):
            await finished.pause()
        live = env.client.get_or_create("ledger", ["live"])
        await live.send("add", {"n": 1})
        await env.run_until_idle()
        version = (await live.status()).version
        result = await live.unpause()
        assert (result.outcome, result.status) == ("unchanged", WorkflowState.SLEEPING)
        assert (await live.status()).version == version
        with pytest.raises(ActorNotFoundError):
            await env.client.get_or_create("ledger", ["nobody"]).pause()
        assert await env.store.load(env.client.get_or_create("ledger", ["nobody"]).ref) is None


async def test_terminate_ends_a_paused_actor() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("ledger", ["end"])
        await handle.send("add", {"n": 1})
        await env.run_until_idle()
        await handle.pause()
        await handle.send("add", {"n": 2})
        ended = await handle.terminate("done with it")
        assert ended.status is WorkflowState.PAUSED and "1 waiting message(s) discarded" in ended.message
        status = await handle.status()
        assert status.workflow is WorkflowState.TERMINATED and status.paused is None
        with pytest.raises(ActorFinishedError):
            await handle.pause()
        assert (await handle.unpause()).message == "not paused (terminated)"


async def test_a_wake_up_under_way_when_the_pause_commits_stops_at_its_next_commit() -> None:
    """The step is running when the pause commits: its commit loses the version race, the wake-up reads the actor
    again, finds it paused and stops; the message is applied once, after the unpause (the step ran twice: steps
    are at-least-once)."""
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("ledger", ["race"])
        await handle.send("add", {"n": 1})
        await env.run_until_idle()
        GATE["apply"], GATE["entered"] = asyncio.Event(), asyncio.Event()
        await handle.send("add", {"n": 5})
        running = asyncio.ensure_future(env.run_until_idle())
        await asyncio.wait_for(GATE["entered"].wait(), 5)
        await handle.pause()
        GATE["apply"].set()
        await running
        assert (await handle.state()).log == [1]
        assert (await handle.inbox()).total == 1
        del GATE["apply"]
        await handle.unpause()
        await env.run_until_idle()
        assert (await handle.state()).log == [1, 5]


async def test_the_listing_and_counts_show_paused_actors_and_bulk_pause_skips_finished_ones() -> None:
    async with TestEnv(registry) as env:
        for key in ("b1", "b2", "b3"):
            await env.client.get_or_create("ledger", [key]).send("add", {"n": 1})
        finished = env.client.get_or_create("done", ["over"])
        await finished.send("go", 1)
        await env.run_until_idle()
        results = await env.client.pause_all("ledger", reason="maintenance", page_size=2)
        assert [(r.key, r.outcome) for r in results] == [(["b1"], "paused"), (["b2"], "paused"),
                                                          (["b3"], "paused")]
        assert await env.client.pause_all("done") == []  # finished: left out
        counts = await env.client.counts("ledger")
        assert counts.counts["paused"].count == 3 and counts.counts["sleeping"].count == 0
        assert [s.key async for s in env.client.actors("ledger", status="paused")] == [("b1",), ("b2",), ("b3",)]
        for key in ("b1", "b2", "b3"):
            await env.client.get_or_create("ledger", [key]).send("add", {"n": 2})
        await env.run_until_idle()
        unpaused = await env.client.unpause_all("ledger", page_size=2)
        assert [r.outcome for r in unpaused] == ["unpaused"] * 3
        await env.run_until_idle()
        for key in ("b1", "b2", "b3"):
            assert (await env.client.get_or_create("ledger", [key]).state()).log == [1, 2]
        assert (await env.client.counts("ledger")).counts["paused"].count == 0


async def test_a_waiting_send_to_a_paused_actor_is_answered_at_once() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("ledger", ["w"])
        await handle.send("add", {"n": 1})
        await env.run_until_idle()
        await handle.pause()
        result = await asyncio.wait_for(handle.send("add", {"n": 2}, wait=True, timeout=60), 10)
        assert (result.status, result.workflow) == ("queued", WorkflowState.PAUSED)
