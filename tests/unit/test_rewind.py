"""Fork and reset in TestEnv (dormant.runtime.rewind): a new actor, or the same one, from a kept version, refused
with the diff (and nothing stored) when the code deployed now would diverge from it."""

from __future__ import annotations

import pytest

from dormant import StepContext, WorkflowContext, actor, queue, setup
from dormant.actor import Registry
from dormant.errors import (
    ActorExistsError,
    ActorNotFoundError,
    InvalidKeyError,
    VersionNotRetainedError,
    WouldDivergeError,
)
from dormant.memory.store import InjectedFault
from dormant.testing import TestEnv
from dormant.workflow.history import WorkflowState
from tests.unit.support import Counter, Item, store_dump


def ledger_registry(first_step: str = "opened") -> Registry:
    ledger = actor("ledger", state=Counter, queues={"add": queue(Item), "nap": queue(float)})

    @ledger.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.step(first_step, lambda s: f"opened with {s.input!r}")

        async def iteration(loop: WorkflowContext) -> None:
            message = await loop.queue.next("take", names=["add", "nap"])
            if message.name == "nap":
                await loop.sleep("nap", float(message.body))

                def woke(s: StepContext) -> None:
                    s.state.log.append("woke")
                await loop.step("woke", woke)
                return

            def apply(s: StepContext) -> None:
                s.state.value += message.body.n
                s.state.log.append(message.body.n)
            await loop.step("apply", apply)
        await ctx.loop("main", iteration)

    return setup(ledger)


registry = ledger_registry()
renamed = ledger_registry("open")  # a deploy in which the first step has another name: old histories diverge


async def _versions_after(env: TestEnv, key: str, bodies: list[int]) -> dict[int, int]:
    """Send `bodies` one by one; returns, per body, the actor's version once it was applied."""
    handle = env.client.get_or_create("ledger", [key], input={"owner": key})
    at: dict[int, int] = {}
    for n in bodies:
        await handle.send("add", {"n": n})
        await env.run_until_idle()
        at[n] = (await handle.status()).version
    return at


async def test_a_fork_at_a_version_is_a_new_actor_with_the_state_then_that_runs_on() -> None:
    async with TestEnv(registry) as env:
        at = await _versions_after(env, "a", [1, 2, 3])
        source = env.client.get_or_create("ledger", ["a"])
        result = await source.fork(at[2], "a-copy", reason="try the fix")
        assert (result.operation, result.outcome, result.key) == ("fork", "forked", ["a-copy"])
        assert f"at version {at[2]}" in result.message
        await env.run_until_idle()
        copy = env.client.get_or_create("ledger", ["a-copy"])
        assert (await copy.state()).log == [1, 2]
        await copy.send("add", {"n": 10})
        await env.run_until_idle()
        assert (await copy.state()).log == [1, 2, 10]
        assert (await source.state()).log == [1, 2, 3]  # the source is untouched
        status = await copy.status()
        assert status.workflow is WorkflowState.SLEEPING and status.rewritten is not None
        assert (status.rewritten.action, status.rewritten.version, status.rewritten.reason) == (
            "fork", at[2], "try the fix")
        opened = next(e for e in await copy.history() if e.name == "opened")
        assert opened.output == "opened with {'owner': 'a'}"  # the input came along, and the step did not re-run
        snapshot = await env.store.load(copy.ref)
        assert snapshot is not None and snapshot.meta.input == {"owner": "a"}


async def test_a_fork_is_refused_and_stores_nothing_when_the_key_exists_or_the_version_is_not_kept() -> None:
    async with TestEnv(registry) as env:
        at = await _versions_after(env, "a", [1, 2])
        await _versions_after(env, "taken", [7])
        source = env.client.get_or_create("ledger", ["a"])
        before = store_dump(env.store)
        with pytest.raises(ActorExistsError, match="exists already"):
            await source.fork(at[1], "taken")
        with pytest.raises(ActorExistsError, match="actor's own"):
            await source.fork(at[1], "a")
        for version in (0, 10_000):
            with pytest.raises(VersionNotRetainedError, match="keeps versions 1 to"):
                await source.fork(version, "fresh")
        with pytest.raises(InvalidKeyError):
            await source.fork(at[1], [])
        with pytest.raises(InvalidKeyError):
            await source.fork(at[1], ["x" * 10_000])
        with pytest.raises(ActorNotFoundError):
            await env.client.get_or_create("ledger", ["nobody"]).fork(1, "fresh")
        assert store_dump(env.store) == before
        assert (await env.client.get_or_create("ledger", ["taken"]).state()).log == [7]


async def test_fork_and_reset_are_refused_with_the_diff_when_the_code_deployed_now_diverges() -> None:
    async with TestEnv(registry) as env:
        at = await _versions_after(env, "a", [1, 2])
        store = env.store
    async with TestEnv(renamed, store=store) as deployed:
        source = deployed.client.get_or_create("ledger", ["a"])
        before = store_dump(store)
        with pytest.raises(WouldDivergeError, match="does not replay") as refused:
            await source.fork(at[1], "b")
        divergence = refused.value.divergence
        assert divergence["location"] == "open" and divergence["recorded"] == 'step "opened"'
        with pytest.raises(WouldDivergeError, match="reset refused"):
            await source.reset(at[1])
        assert store_dump(store) == before
        assert await store.load(deployed.client.get_or_create("ledger", ["b"]).ref) is None
        # version 1 (before any step ran) replays against the new code: that one may be taken
        assert (await source.fork(1, "b")).outcome == "forked"


async def test_a_reset_takes_the_actor_back_in_place_and_says_which_messages_it_does_not_give_back() -> None:
    async with TestEnv(registry) as env:
        at = await _versions_after(env, "r", [1, 2, 3, 4])
        handle = env.client.get_or_create("ledger", ["r"])
        then = await env.store.load_version(handle.ref, at[2])
        assert then is not None
        later = [e.messages[0].id for e in await handle.history() if e.kind == "message" and e.messages]
        result = await handle.reset(at[2], reason="bad deploy of 3 and 4")
        assert (result.outcome, result.status) == ("reset", WorkflowState.SLEEPING)
        assert "2 message(s) received after" in result.message
        assert all(mid in result.message for mid in later[-2:])
        now = await env.store.load(handle.ref)
        assert now is not None and now.state == then.state and (await handle.state()).log == [1, 2]
        assert sorted(now.history, key=lambda e: e.seq) == sorted(then.history, key=lambda e: e.seq)
        status = await handle.status()
        assert status.rewritten is not None and status.rewritten.detail == (
            f"reset from version {at[4]} to version {at[2]}")
        assert status.rewritten.reason == "bad deploy of 3 and 4"
        await handle.send("add", {"n": 30})
        await env.run_until_idle()
        assert (await handle.state()).log == [1, 2, 30]
        assert (await handle.reset(status.version)).outcome == "reset"  # to the reset's own version: a reset is kept
        assert (await handle.state()).log == [1, 2]
        unchanged = await handle.reset((await handle.status()).version)
        assert unchanged.outcome == "unchanged"


async def test_messages_waiting_at_a_reset_stay_and_run_after_it() -> None:
    async with TestEnv(registry) as env:
        at = await _versions_after(env, "w", [1, 2])
        handle = env.client.get_or_create("ledger", ["w"])
        await handle.pause()
        await handle.send("add", {"n": 5})
        result = await handle.reset(at[1])
        assert "still paused (1 waiting message(s)" in result.message
        status = await handle.status()
        assert status.workflow is WorkflowState.PAUSED and status.paused is not None
        assert status.paused.previous is WorkflowState.SLEEPING
        await env.run_until_idle()
        assert (await handle.state()).log == [1]
        await handle.unpause()
        await env.run_until_idle()
        assert (await handle.state()).log == [1, 5]


async def test_a_fork_can_start_paused() -> None:
    async with TestEnv(registry) as env:
        at = await _versions_after(env, "p", [1])
        result = await env.client.get_or_create("ledger", ["p"]).fork(at[1], "p2", paused=True)
        assert "left paused" in result.message
        copy = env.client.get_or_create("ledger", ["p2"])
        await copy.send("add", {"n": 2})
        await env.run_until_idle()
        assert (await copy.state()).log == [1] and (await copy.status()).workflow is WorkflowState.PAUSED
        await copy.unpause()
        await env.run_until_idle()
        assert (await copy.state()).log == [1, 2]


async def test_a_fork_cut_off_after_its_create_is_finished_by_running_it_again() -> None:
    async with TestEnv(registry) as env:
        at = await _versions_after(env, "c", [1, 2])
        source = env.client.get_or_create("ledger", ["c"])
        copy = env.client.get_or_create("ledger", ["c2"])
        env.store.fail_call(2, "before")  # the create, then the commit of the history
        with pytest.raises(InjectedFault):
            await source.fork(at[2], "c2")
        env.store.clear_faults()
        left = await copy.status()
        assert left.workflow is WorkflowState.PAUSED and left.paused is not None
        assert "being forked" in (left.paused.detail or "")
        sent = await copy.send("add", {"n": 9})  # held meanwhile, as for any paused actor
        assert sent.workflow is WorkflowState.PAUSED
        with pytest.raises(ActorExistsError):  # another fork onto it is not this one
            await source.fork(at[1], "c2")
        finished = await source.fork(at[2], "c2")
        assert finished.outcome == "forked"
        await env.run_until_idle()
        assert (await copy.state()).log == [1, 2, 9]


async def test_a_deadline_that_passed_since_the_kept_version_fires_as_soon_as_the_fork_runs() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("ledger", ["n"])
        await handle.send("nap", 3600)
        await env.run_until_idle()
        napping = (await handle.status()).version
        await env.advance(7200)
        assert (await handle.state()).log == ["woke"]
        await handle.fork(napping, "n2")
        await env.run_until_idle()
        assert (await env.client.get_or_create("ledger", ["n2"]).state()).log == ["woke"]


def relay_registry() -> Registry:
    inbox = actor("inbox", state=Counter, queues={"note": queue(Item)})

    @inbox.workflow
    async def collect(ctx: WorkflowContext) -> None:
        async def iteration(loop: WorkflowContext) -> None:
            message = await loop.queue.next("take")

            def keep(s: StepContext) -> None:
                s.state.log.append(message.body.n)
            await loop.step("keep", keep)
        await ctx.loop("main", iteration)

    relay = actor("relay", state=Counter, queues={"go": queue(Item)})

    @relay.workflow
    async def forward(ctx: WorkflowContext) -> None:
        message = await ctx.queue.next("take")

        async def tell(s: StepContext) -> None:
            await s.client().get_or_create("inbox", ["i"]).send("note", {"n": message.body.n})
        await ctx.step("tell", tell)

    return setup(inbox, relay)


async def test_steps_run_again_after_a_reset_do_not_send_twice_but_a_forks_do() -> None:
    async with TestEnv(relay_registry()) as env:
        relay = env.client.get_or_create("relay", ["r"])
        await relay.status()
        await env.run_until_idle()
        before = (await relay.status()).version
        await relay.send("go", {"n": 7})
        await env.run_until_idle()
        receiver = env.client.get_or_create("inbox", ["i"])
        assert (await receiver.state()).log == [7]
        await relay.reset(before)
        await relay.send("go", {"n": 7})
        await env.run_until_idle()
        assert (await relay.status()).workflow is WorkflowState.COMPLETED
        assert (await receiver.state()).log == [7]  # the re-run step's send carried the same id: kept once
        await relay.fork(before, "r2")
        await env.client.get_or_create("relay", ["r2"]).send("go", {"n": 7})
        await env.run_until_idle()
        assert (await receiver.state()).log == [7, 7]  # the fork's step is another actor's: a new message
