"""Search attributes through the runtime (TestEnv): set from steps, actions and on_create, checked at once, committed
with the step (a failed attempt's changes are dropped with it, a replayed step does not set them again), shown by
status, found by the clients' `where`, and a changed declaration's old values dropped at the actor's next commit."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from dormant import ActionContext, StepContext, WorkflowContext, actor, queue, setup
from dormant.errors import InvalidSearchConditionError, UnknownActorError
from dormant.testing import TestEnv
from tests.unit.support import Item, deploy

DUE = datetime(2026, 2, 1, 9, 30, tzinfo=UTC)


def shop(search: dict[str, type] | None = None) -> Any:
    order = actor("order", queues={"place": queue(Item), "fail": queue(Item)},
                  search=search if search is not None else {"customer": str, "amount": int, "due": datetime})
    attempts: list[int] = []

    @order.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def iteration(loop: WorkflowContext) -> None:
            message = await loop.queue.next("wait", names=["place", "fail"])
            if message.name == "fail":
                await loop.step("typed-wrong", lambda s: s.search.__setitem__("amount", "many"), max_retries=1)
                return

            def record(s: StepContext) -> None:
                attempts.append(s.attempt)
                s.search["amount"] = message.body.n * 100 + s.attempt  # what a failed attempt set is dropped
                if s.attempt == 1:
                    raise ConnectionError("flaky")
                declared = {"customer": f"c{message.body.n % 2}"} if "customer" in order.search else {}
                s.search.set(due=DUE, **declared)

            await loop.step("record", record, retry_backoff_base=0.01)
            await loop.step("read-back", lambda s: {"amount": s.search["amount"], "due": s.search["due"].isoformat()})
        await ctx.loop("orders", iteration)

    @order.action
    def rename(c: ActionContext, customer: str | None) -> dict[str, Any]:
        c.search["customer"] = customer
        return dict(c.search)

    @order.on_create
    def created(c: ActionContext) -> None:
        c.search["customer"] = "new"

    return setup(order), attempts


async def keys(env: TestEnv, *where: str, status: str | None = None) -> list[str]:
    return [s.key[0] async for s in env.client.actors("order", where=list(where), status=status)]


async def test_steps_set_attributes_with_their_commit_and_replays_leave_them() -> None:
    registry, attempts = shop()
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("order", "o-1")
        await handle.status()
        await env.run_until_idle()
        assert await keys(env, "customer=new") == ["o-1"]  # on_create's
        await handle.send("place", {"n": 3})
        await env.run_until_idle()
        await env.advance(1)
        assert attempts == [1, 2]
        status = await handle.status()
        assert status.search == {"amount": 302, "customer": "c1", "due": "2026-02-01T09:30:00.000000+00:00"}
        history = {e.name: e.output for e in await handle.history()}
        assert history["read-back"] == {"amount": 302, "due": DUE.isoformat()}
        assert await keys(env, "amount=301") == [] and await keys(env, "amount=302") == ["o-1"]
        assert await keys(env, "customer=new") == []
        drafts = [c.draft for c in env.store.commit_log if c.ref == handle.ref and c.draft.search]
        assert [d.search for d in drafts][-1] == {"amount": ["i", 302], "customer": ["s", "c1"],
                                                  "due": ["t", "2026-02-01T09:30:00.000000+00:00"]}
        assert not any(d.search and d.search.get("amount") == ["i", 301] for d in drafts)  # the failed attempt's
        seen = len(env.store.commit_log)
        await handle.send("place", {"n": 4})  # the next iteration: the first one is not run (nor set) again
        await env.run_until_idle()
        await env.advance(1)
        later = [c.draft.search for c in env.store.commit_log[seen:] if c.ref == handle.ref and c.draft.search]
        assert later[-1] == {"amount": ["i", 402], "customer": ["s", "c0"], "due": ["t", DUE.isoformat(
            timespec="microseconds")]}
        assert all(d.get("amount") != ["i", 302] for d in later)


async def test_a_replayed_step_does_not_set_its_attributes_again() -> None:
    ticket = actor("ticket", queues={"go": queue(Item)}, search={"owner": str})
    runs: list[str] = []

    @ticket.workflow
    async def run(ctx: WorkflowContext) -> None:
        def tag(s: StepContext) -> None:
            runs.append("tag")
            s.search["owner"] = "first"

        await ctx.step("tag", tag)
        await ctx.queue.next("wait")
        await ctx.step("after", lambda s: s.search.get("owner"))

    @ticket.action
    def reassign(c: ActionContext, owner: str) -> None:
        c.search["owner"] = owner

    async with TestEnv(setup(ticket)) as env:
        handle = env.client.get_or_create("ticket", "t-1")
        await handle.status()
        await env.run_until_idle()
        await handle.call("reassign", "second")
        await handle.send("go", {"n": 1})  # its wake-up replays "tag" (recorded), then runs "after"
        await env.run_until_idle()
        assert runs == ["tag"] and (await handle.status()).workflow.value == "completed"
        assert {e.name: e.output for e in await handle.history()}["after"] == "second"
        assert (await handle.status()).search == {"owner": "second"}


async def test_a_wrong_type_fails_the_step_naming_the_attribute() -> None:
    registry, _ = shop()
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("order", "o-1")
        await handle.send("fail", {"n": 1})
        await env.run_until_idle()
        await env.advance(10)
        status = await handle.status()
        assert status.workflow.value == "failed"
        assert 'search attribute "amount" of actor type "order" is an int' in (status.error or "")
        assert "many" not in (status.error or "")
        assert status.search == {"customer": "new"}


async def test_actions_set_and_unset_and_the_clients_find_and_count() -> None:
    registry, _ = shop()
    async with TestEnv(registry) as env:
        for number in range(5):
            await env.client.get_or_create("order", f"o-{number}").send("place", {"n": number})
        await env.run_until_idle()
        await env.advance(1)
        handle = env.client.get_or_create("order", "o-1")
        assert await handle.call("rename", "vip") == {"amount": 102, "customer": "vip", "due": DUE}
        assert await keys(env, "customer=vip") == ["o-1"]
        assert sorted(await keys(env, "amount>=200", "customer=c0")) == ["o-2", "o-4"]  # read by customer (hash order)
        assert await keys(env, "amount>=200", "amount<400", "customer^=c") == ["o-2", "o-3"]  # read by amount
        await handle.call("rename", None)
        assert (await handle.status()).search == {"amount": 102, "due": "2026-02-01T09:30:00.000000+00:00"}
        counts = await env.client.counts("order", where=["due=2026-02-01T09:30:00Z"])
        assert counts.counts["sleeping"].count == 5 and counts.counts["sleeping"].exact
        cut = await env.client.counts("order", where=["amount>=0"], limit=2)
        assert cut.counts["sleeping"].count == 2 and not cut.counts["sleeping"].exact
        page = await env.client.list_actors("order", where=["amount>=0"], limit=2, status="sleeping")
        assert [s.key[0] for s in page.actors] == ["o-0", "o-1"] and page.cursor is not None
        assert await keys(env, "amount>=0", status="failed") == []
        with pytest.raises(InvalidSearchConditionError, match="condition 1 names no search attribute"):
            await env.client.list_actors("order", where=["card=4111"])
        with pytest.raises(UnknownActorError):
            await env.client.counts("nobody", where=["a=1"])


async def test_a_dropped_or_retyped_attribute_is_gone_and_leaves_with_the_next_commit() -> None:
    registry, _ = shop()
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("order", "o-1")
        await handle.send("place", {"n": 7})
        await env.run_until_idle()
        await env.advance(1)
        store = env.store
    retyped, _ = shop({"amount": float, "due": datetime})  # customer dropped, amount now a float
    async with deploy(retyped, store) as env:
        handle = env.client.get_or_create("order", "o-1")
        assert (await handle.status()).search == {"due": "2026-02-01T09:30:00.000000+00:00"}
        assert await keys(env, "amount>=0") == []  # the int values live apart from the float ones
        with pytest.raises(InvalidSearchConditionError):
            await keys(env, "customer=c1")
        assert set(store._actors[handle.ref.id].search) == {"amount", "customer", "due"}  # still stored
        await handle.send("place", {"n": 8})  # the next commit drops them; this one's step sets amount again
        await env.run_until_idle()
        await env.advance(1)
        assert store._actors[handle.ref.id].search == {"amount": ["f", 802.0], "due": ["t", DUE.isoformat(
            timespec="microseconds")]}
        assert await keys(env, "amount>800") == ["o-1"]
