"""The operator actions behave the same through the in-process client and the HTTP client (the `connect`
parity fixture): listing in pages, resume of a failed actor, terminate, delete, bulk resume, refusals."""

from __future__ import annotations

import pytest

from dormant import WorkflowContext, actor, queue, setup
from dormant.actor import Registry
from dormant.errors import ActorFinishedError, ActorNotFoundError, InvalidCursorError, StillDivergedError
from dormant.memory.store import MemoryEventStore
from dormant.testing import TestEnv
from dormant.workflow.history import WorkflowState
from tests.api.apps import registry
from tests.api.conftest import Connect


async def _failed_sleeper(env: TestEnv, key: str) -> None:
    handle = env.client.get_or_create("sleeper", [key])
    await handle.send("go", 1)
    await env.advance(3600 + 61)  # the nap, then the flaky step's two attempts


async def test_listing_pages_through_every_actor_of_a_type(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        for key in ("carol", "alice", "bob"):
            await client.get_or_create("account", [key]).send("deposit", {"amount": 1})
        await client.get_or_create("account", ["tenant", "a,b"]).send("deposit", {"amount": 1})
        await env.run_until_idle()
        seen = []
        cursor = None
        while True:
            page = await client.list_actors("account", limit=2, cursor=cursor)
            assert len(page.actors) <= 2
            seen += [(s.key, s.status) for s in page.actors]
            if page.cursor is None:
                break
            cursor = page.cursor
        assert seen == [(("alice",), WorkflowState.SLEEPING), (("bob",), WorkflowState.SLEEPING),
                        (("carol",), WorkflowState.SLEEPING), (("tenant", "a,b"), WorkflowState.SLEEPING)]
        assert [s.key async for s in client.actors("account", status="sleeping")] == [k for k, _ in seen]
        assert (await client.list_actors("account", status="failed")).actors == []
        with pytest.raises(InvalidCursorError):
            await client.list_actors("account", cursor="not-a-cursor")


async def test_a_failed_actor_is_retried_terminated_and_deleted(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        await _failed_sleeper(env, "s1")
        handle = client.get_or_create("sleeper", ["s1"])
        assert (await handle.status()).workflow is WorkflowState.FAILED
        assert [s.key for s in (await client.list_actors("sleeper", status="failed")).actors] == [("s1",)]

        failed_at = next(e for e in await handle.history() if e.name == "flaky").updated_at
        result = await handle.resume()
        assert (result.operation, result.outcome, result.status) == ("resume", "retrying", WorkflowState.FAILED)
        assert "flaky" in result.message and "RuntimeError: try 1 failed" in result.message
        await env.run_until_idle()
        assert (await handle.status()).workflow is WorkflowState.SLEEPING  # its first fresh attempt failed: retrying
        await env.advance(61)
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED and "after 2 attempt(s)" in (status.error or "")
        again = next(e for e in await handle.history() if e.name == "flaky")
        assert again.attempts == 2 and again.updated_at >= failed_at + 61  # two fresh attempts, after the resume

        terminated = await handle.terminate("gave up")
        assert (terminated.outcome, terminated.status) == ("terminated", WorkflowState.FAILED)
        assert (await handle.status()).error == "Terminated: gave up"
        with pytest.raises(ActorFinishedError):
            await handle.send("go", 2)
        with pytest.raises(ActorFinishedError):
            await handle.resume()
        assert [s.status for s in (await client.list_actors("sleeper")).actors] == [WorkflowState.TERMINATED]

        deleted = await handle.delete()
        assert (deleted.outcome, deleted.status) == ("deleted", WorkflowState.TERMINATED)
        assert (await client.list_actors("sleeper")).actors == []
        assert (await handle.delete()).outcome == "not_found"
        with pytest.raises(ActorNotFoundError):
            await client.get_or_create("sleeper", ["never"]).terminate()


async def test_bulk_resume_reports_each_actor(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        for key in ("a", "b", "c"):
            await _failed_sleeper(env, key)
        results = await client.resume_all("sleeper", status="failed", page_size=2)
        assert [(r.key, r.outcome) for r in results] == [(["a"], "retrying"), (["b"], "retrying"),
                                                          (["c"], "retrying")]
        await client.get_or_create("sleeper", ["a"]).terminate()
        everything = await client.resume_all("sleeper")
        assert sorted((r.key[0], r.outcome) for r in everything) == [("a", "refused"), ("b", "woken"),
                                                                      ("c", "woken")]


async def test_counts_attention_and_an_inbox_read_the_same_through_both_clients(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        await _failed_sleeper(env, "s1")
        retrying = client.get_or_create("sleeper", ["s2"])
        await retrying.send("go", 1)
        await env.advance(3600)  # its nap is over; the flaky step failed once and waits a minute for its retry
        await client.get_or_create("sleeper", ["s1"]).send("go", 5, message_id="late")  # stored: it is failed
        counts = await client.counts("sleeper")
        assert (counts.counts["failed"].count, counts.counts["sleeping"].count) == (1, 1)
        found = await client.attention("sleeper")
        assert [(a.key, a.reason) for a in found.actors] == [(["s1"], "failed"), (["s2"], "retrying")]
        assert "RuntimeError: try 1 failed" in str(found.actors[1].detail)
        inbox = await client.get_or_create("sleeper", ["s1"]).inbox()
        assert inbox.total == 1 and [(m.id, m.queue, m.preview) for m in inbox.messages] == [("late", "go", "5")]
        assert (await retrying.inbox()).messages == []


def _gate(step: str) -> Registry:
    gate = actor("gate", queues={"go": queue(int)})

    @gate.workflow
    async def run(ctx: WorkflowContext) -> None:
        await ctx.step(step, lambda s: "done")
        await ctx.queue.next("wait-go")

    return setup(gate)


async def test_resume_of_a_still_diverged_actor_is_refused_with_the_diff(connect: Connect) -> None:
    store = MemoryEventStore()
    async with TestEnv(_gate("check"), store=store) as env:
        await env.client.get_or_create("gate", ["g"]).status()
        await env.run_until_idle()
    async with TestEnv(_gate("check-renamed"), store=store) as env:
        await env.run_until_idle()
        client = await connect(env)
        handle = client.get_or_create("gate", ["g"])
        assert (await handle.status()).workflow is WorkflowState.DIVERGED
        with pytest.raises(StillDivergedError) as refused:
            await handle.resume()
        assert "check-renamed" in str(refused.value)
        assert refused.value.divergence["recorded"] == 'step "check"'
