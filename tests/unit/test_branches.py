"""join and race: results, failures, suspension, cancellation of losers, and replay inside loop iterations
(the RivetKit bug: a join/race replayed in the iteration that a later wait suspended)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter as Tally
from typing import Any

import pytest

from dormant import (
    JoinError,
    Loop,
    RaceError,
    StepContext,
    WorkflowContext,
    WorkflowState,
    actor,
    queue,
    setup,
)
from dormant.errors import ActorFinishedError
from dormant.testing import TestEnv
from tests.unit.support import Counter, Item, reports_for, start

DAY = 24 * 3600.0


async def test_join_runs_every_branch_and_returns_their_results() -> None:
    calls: Tally[str] = Tally()
    a = actor("join", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        def branch(label: str, value: int) -> Any:
            async def body(b: WorkflowContext) -> int:
                def work(s: StepContext) -> int:
                    calls[label] += 1
                    s.state.value += value
                    return value

                first = await b.step("work", work)
                return first + await b.step("again", lambda s: value)

            return body

        results = await ctx.join("fan-out", {"a": branch("a", 1), "b": branch("b", 10), "c": branch("c", 100)})
        await ctx.queue.next("wait")  # a later wake-up replays the join
        return results

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "join")
        await handle.send("go", {"n": 0})
        await env.run_until_idle()
        assert (await handle.status()).output == {"a": 2, "b": 20, "c": 200}
        assert (await handle.state()).value == 111
        assert calls == {"a": 1, "b": 1, "c": 1}
        join_entry = next(e for e in await handle.history() if e.location == "fan-out")
        assert {b: r.status.value for b, r in join_entry.branches.items()} == {
            "a": "completed", "b": "completed", "c": "completed"}


async def test_join_failure_reports_every_failing_branch_also_on_replay() -> None:
    calls: Tally[str] = Tally()
    caught: list[dict[str, str]] = []
    a = actor("join-fail", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        def failing(label: str) -> Any:
            async def body(b: WorkflowContext) -> None:
                def work(s: StepContext) -> None:
                    calls[label] += 1
                    raise ValueError(f"{label} broke")

                await b.step("work", work, max_retries=0)

            return body

        async def ok(b: WorkflowContext) -> str:
            calls["ok"] += 1
            return str(await b.step("fine", lambda s: "fine"))

        try:
            await ctx.join("j", {"bad1": failing("bad1"), "ok": ok, "bad2": failing("bad2")})
        except JoinError as error:
            caught.append({branch: str(e) for branch, e in error.errors.items()})
        await ctx.queue.next("wait")
        return "handled"

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "join-fail")
        await handle.send("go", {"n": 0})
        await env.run_until_idle()
        assert (await handle.status()).output == "handled"
        assert len(caught) == 2  # first run, and the replay after the message
        for errors in caught:
            assert sorted(errors) == ["bad1", "bad2"]
            assert "bad1 broke" in errors["bad1"] and "bad2 broke" in errors["bad2"]
        assert calls["bad1"] == calls["bad2"] == 1  # failed branches are not re-run


async def test_a_branch_waiting_on_a_queue_suspends_the_whole_join() -> None:
    a = actor("join-wait", state=Counter, queues={"qa": queue(Item), "qb": queue(Item), "qc": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        async def wait_a(b: WorkflowContext) -> int:
            return int((await b.queue.next("m", names=["qa"])).body.n)

        async def wait_b(b: WorkflowContext) -> int:
            return int((await b.queue.next("m", names=["qb"], timeout=50)).body.n)

        async def nap(b: WorkflowContext) -> str:
            await b.sleep("nap", 100)
            return "rested"

        return await ctx.join("j", {"a": wait_a, "b": wait_b, "nap": nap})

    async with TestEnv(setup(a)) as env:
        t0 = env.now()
        handle = await start(env, "join-wait")
        status = await handle.status()
        assert status.workflow is WorkflowState.SLEEPING
        assert status.waiting_for.queues == ["qa", "qb"]  # the union of the names awaited
        assert status.waiting_for.deadline == t0 + 50  # the earliest deadline
        await handle.send("qb", {"n": 2})
        await handle.send("qc", {"n": 3})  # nobody waits for qc: stays in the inbox
        await env.run_until_idle()
        status = await handle.status()
        assert status.waiting_for.queues == ["qa"] and status.waiting_for.deadline == t0 + 100
        await handle.send("qa", {"n": 1})
        await env.advance(100)
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED
        assert status.output == {"a": 1, "b": 2, "nap": "rested"}
        assert len(env.store.inbox_ids(handle.ref)) == 1


async def test_race_records_the_winner_and_cancels_the_losers_in_flight_step() -> None:
    observed: list[str] = []
    a = actor("race", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        async def fast(b: WorkflowContext) -> str:
            async def quick(s: StepContext) -> str:
                for _ in range(3):
                    await asyncio.sleep(0)
                s.state.log.append("fast")
                return "fast result"

            return str(await b.step("quick", quick))

        async def slow(b: WorkflowContext) -> str:
            async def forever(s: StepContext) -> str:
                s.state.log.append("slow")  # must not be kept
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    observed.append("slow cancelled")
                    raise
                return "slow result"

            await b.step("forever", forever)
            await b.step("after", lambda s: observed.append("slow went on"))
            return "slow"

        result = await ctx.race("r", {"slow": slow, "fast": fast})
        await ctx.queue.next("wait")
        return [result.winner, result.value]

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "race")
        assert "slow cancelled" in observed
        # The cancelled loser's state changes were mixed with the winner's: the wake-up was re-run
        # serially, and that re-run must keep the winner (it used to re-run "slow" first, for 30 s).
        assert max(r.attempts for r in reports_for(env, handle)) >= 2
        await handle.send("go", {"n": 0})
        await env.run_until_idle()
        assert "slow went on" not in observed
        assert (await handle.status()).output == ["fast", "fast result"]
        assert (await handle.state()).log == ["fast"]
        history = {e.location: e for e in await handle.history()}
        assert history["r"].winner == "fast"
        assert history["r"].branches["slow"].status.value == "cancelled"
        assert "r/slow/forever" not in history or history["r/slow/forever"].status.value != "completed"


def bid_or_expire() -> Any:
    a = actor("auction", state=Counter, queues={"bids": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        async def bid(b: WorkflowContext) -> int:
            return int((await b.queue.next("wait-bid")).body.n)

        async def expire(b: WorkflowContext) -> int:
            await b.sleep("timeout", DAY)
            return 0

        result = await ctx.race("bid-or-expire", {"bid": bid, "expire": expire})
        await ctx.step("settle", lambda s: s.state.log.append([result.winner, result.value]))
        return result.winner

    return a


async def test_race_bid_beats_the_timer() -> None:
    async with TestEnv(setup(bid_or_expire())) as env:
        handle = await start(env, "auction")
        status = await handle.status()
        assert status.waiting_for.queues == ["bids"] and status.waiting_for.deadline == env.now() + DAY
        await env.advance(5)
        await handle.send("bids", {"n": 100})
        await env.run_until_idle()
        await env.advance(DAY)  # the expired timer finds the race decided
        assert (await handle.status()).output == "bid"
        assert (await handle.state()).log == [["bid", 100]]


async def test_race_timer_beats_the_bid() -> None:
    async with TestEnv(setup(bid_or_expire())) as env:
        handle = await start(env, "auction")
        await env.advance(DAY - 1)
        assert (await handle.status()).workflow is WorkflowState.SLEEPING
        await env.advance(1)
        with pytest.raises(ActorFinishedError):  # too late: the workflow has completed, nothing is stored
            await handle.send("bids", {"n": 100})
        await env.run_until_idle()
        assert (await handle.status()).output == "expire"
        assert (await handle.state()).log == [["expire", 0]]
        assert env.store.inbox_ids(handle.ref) == []


async def test_race_where_every_branch_fails_raises_race_error() -> None:
    a = actor("race-fail", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        def failing(label: str) -> Any:
            async def body(b: WorkflowContext) -> None:
                def boom(s: StepContext) -> None:
                    raise ValueError(label)

                await b.step("boom", boom, max_retries=0)

            return body

        try:
            await ctx.race("r", {"x": failing("x"), "y": failing("y")})
        except RaceError as error:
            return sorted(error.errors)
        return "unreachable"

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "race-fail")
        assert (await handle.status()).output == ["x", "y"]


def branches_in_loop_actor(name: str) -> tuple[Any, Tally[str]]:
    """Every iteration: a join, a race and a nested loop, then a queue wait and a sleep that suspend
    in the SAME iteration, so the next wake-ups replay the finished join/race/loop in it."""
    calls: Tally[str] = Tally()
    a = actor(name, state=Counter, queues={"work": queue(Item)})

    def counted(label: str, value: Any) -> Any:
        def body(s: StepContext) -> Any:
            calls[label] += 1
            return value

        return body

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        async def iteration(it: WorkflowContext, i: int) -> Any:
            async def left(b: WorkflowContext) -> int:
                return int(await b.step("l", counted("join-left", 1)))

            async def right(b: WorkflowContext) -> int:
                await b.step("r1", counted("join-right", None))
                return int(await b.step("r2", counted("join-right-2", 2)))

            joined = await it.join("j", {"left": left, "right": right})

            async def winner(b: WorkflowContext) -> str:
                return str(await b.step("w", counted("race-winner", "won")))

            async def loser(b: WorkflowContext) -> str:
                await b.sleep("never", DAY)
                return "lost"

            raced = await it.race("r", {"winner": winner, "loser": loser})

            async def sub(inner: WorkflowContext, j: int) -> Any:
                await inner.step("tick", counted("inner-tick", j))
                return Loop.break_(j) if j == 2 else Loop.continue_(j + 1)

            inner_result = await it.loop("inner", sub, state=0)
            message = await it.queue.next("wait")  # suspends after the join, race and loop finished
            await it.sleep("cool-down", 10)  # and once more in the same iteration

            def apply(s: StepContext) -> None:
                calls["apply"] += 1
                s.state.log.append([i, joined, raced.winner, inner_result, message.body.n])

            await it.step("apply", apply)
            return Loop.break_(i) if i == 2 else Loop.continue_(i + 1)

        return await ctx.loop("main", iteration, state=0)

    return a, calls


async def test_join_race_and_nested_loop_replay_inside_a_suspended_loop_iteration() -> None:
    a, calls = branches_in_loop_actor("rivet-bug")
    async with TestEnv(setup(a)) as env:
        handle = await start(env, "rivet-bug")
        for n in range(3):
            assert (await handle.status()).waiting_for.queues == ["work"]
            await handle.send("work", {"n": n})
            await env.run_until_idle()
            status = await handle.status()
            assert status.workflow is WorkflowState.SLEEPING, status.error
            await env.advance(10)
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED, status.error
        assert status.output == 2
        expected = [[i, {"left": 1, "right": 2}, "winner", 2, i] for i in range(3)]
        assert (await handle.state()).log == expected
        # Every body ran exactly once per iteration despite the replays.
        assert calls == {"join-left": 3, "join-right": 3, "join-right-2": 3, "race-winner": 3,
                         "inner-tick": 9, "apply": 3}
        assert env.failures == []


async def test_join_replays_inside_an_iteration_after_a_deploy_of_the_same_code() -> None:
    a, _ = branches_in_loop_actor("rivet-bug-deploy")
    async with TestEnv(setup(a)) as env:
        handle = await start(env, "rivet-bug-deploy")
        store = env.store
    b, calls_after = branches_in_loop_actor("rivet-bug-deploy")
    async with TestEnv(setup(b), store=store) as env:
        handle = env.client.get_or_create("rivet-bug-deploy", ["k"])
        await env.run_until_idle()  # the deploy wakes the actor: the iteration replays
        await handle.send("work", {"n": 7})
        await env.advance(10)
        status = await handle.status()
        assert status.workflow is WorkflowState.SLEEPING, status.error
        assert (await handle.state()).log == [[0, {"left": 1, "right": 2}, "winner", 2, 7]]
        assert calls_after["join-left"] == 1  # iteration 1's join; iteration 0's was replayed


async def test_a_losing_branch_cancels_its_own_nested_branches() -> None:
    seen: list[str] = []
    a = actor("nested-loser", state=Counter)

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        async def loser(b: WorkflowContext) -> Any:
            async def inner(bb: WorkflowContext) -> int:
                async def slow(s: StepContext) -> int:
                    try:
                        await asyncio.sleep(30)
                    except asyncio.CancelledError:
                        seen.append("inner step cancelled")
                        raise
                    seen.append("inner step finished")
                    return 1

                return int(await bb.step("slow", slow))

            return await b.join("j", {"inner": inner, "other": lambda bb: bb.step("o", lambda s: 2)})

        async def winner(b: WorkflowContext) -> str:
            async def quick(s: StepContext) -> str:
                for _ in range(3):
                    await asyncio.sleep(0)
                return "w"

            return str(await b.step("quick", quick))

        result = await ctx.race("r", {"loser": loser, "winner": winner})
        return result.winner

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "nested-loser")
        for _ in range(10):
            await asyncio.sleep(0)  # nothing may still be running behind the finished wake-up
        assert seen == ["inner step cancelled"]
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED and status.output == "winner"
        # It used to go on running and commit a "running" record over the completed one.
        last = env.store.commit_log[-1].draft.workflow
        assert last is not None and last.state is WorkflowState.COMPLETED


async def test_a_join_or_race_entry_records_how_it_ended() -> None:
    """A finished join used to stay `pending` in history (and in `history show --json`) forever."""
    a = actor("ended", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        async def quick(b: WorkflowContext) -> int:
            return int(await b.step("one", lambda s: 1))

        async def napping(b: WorkflowContext) -> int:
            await b.sleep("nap", 60)
            return 2

        async def broken(b: WorkflowContext) -> int:
            def fail(s: StepContext) -> int:
                raise ValueError("no")

            return int(await b.step("fail", fail, max_retries=0))

        await ctx.join("both", {"quick": quick, "napping": napping})
        await ctx.race("first", {"quick": quick, "napping": napping})
        with contextlib.suppress(JoinError):
            await ctx.join("doomed", {"quick": quick, "broken": broken})
        with contextlib.suppress(RaceError):
            await ctx.race("lost", {"broken": broken})
        await ctx.queue.next("wait")

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "ended")
        statuses = {e.location: e.status.value for e in await handle.history() if e.kind.value in ("join", "race")}
        assert statuses == {"both": "pending"}  # still waiting for its sleeping branch
        await env.advance(60)
        statuses = {e.location: e.status.value for e in await handle.history() if e.kind.value in ("join", "race")}
        assert statuses == {"both": "completed", "first": "completed", "doomed": "failed", "lost": "failed"}
        await handle.send("go", {"n": 1})  # a replay keeps them as they are, and the workflow ends
        await env.run_until_idle()
        assert (await handle.status()).workflow is WorkflowState.COMPLETED
        again = {e.location: e.status.value for e in await handle.history() if e.kind.value in ("join", "race")}
        assert again == statuses


async def test_a_join_recorded_without_its_own_status_gets_one_on_its_next_run() -> None:
    """Histories written before joins recorded their status (their entry stayed `pending`) replay unchanged."""
    a = actor("old-join", state=Counter, queues={"go": queue(Item)})

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        result = await ctx.join("both", {"a": lambda b: b.step("x", lambda s: 1)})
        await ctx.queue.next("wait")
        return result

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "old-join")
        history = env.store._actors[handle.ref.id].history
        raw = history["both"]
        raw.pop("status")  # as an older release stored it
        history["both"] = raw  # (the memory store keeps rows: a read entry is a copy)
        await handle.send("go", {"n": 1})
        await env.run_until_idle()
        status = await handle.status()
        assert status.workflow is WorkflowState.COMPLETED and status.output == {"a": 1}
        assert next(e for e in await handle.history() if e.location == "both").status.value == "completed"
