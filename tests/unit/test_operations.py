"""Operator actions through the in-process client: list, resume (diverged and failed), terminate, delete."""

from __future__ import annotations

import pytest

from dormant import StepContext, WorkflowContext, actor, queue, setup
from dormant.actor import Registry
from dormant.errors import ActorFinishedError, ActorNotFoundError, NotResumableError, StillDivergedError
from dormant.memory.store import MemoryEventStore
from dormant.testing import TestEnv
from dormant.workflow.history import EntryStatus, WorkflowState
from tests.unit.support import Counter, Item


class Switch:
    """A service the steps call: down until the test fixes it."""

    def __init__(self) -> None:
        self.down = True
        self.calls = 0

    def call(self, what: str) -> str:
        self.calls += 1
        if self.down:
            raise ConnectionError(f"{what}: service unavailable")
        return f"{what}: ok"


def charging(service: Switch) -> Registry:
    charger = actor("charger", state=Counter)

    @charger.workflow
    async def run(ctx: WorkflowContext) -> str:
        await ctx.step("reserve", lambda s: "reserved")
        return str(await ctx.step("charge", lambda s: service.call("charge"), max_retries=1,
                                  retry_backoff_base=0.01))

    fan = actor("fan", state=Counter)

    @fan.workflow
    async def fan_run(ctx: WorkflowContext) -> dict[str, str]:
        async def left(branch: WorkflowContext) -> str:
            return str(await branch.step("left-step", lambda s: "left"))

        async def right(branch: WorkflowContext) -> str:
            return str(await branch.step("right-step", lambda s: service.call("right"), max_retries=0))

        return await ctx.join("both", {"left": left, "right": right})

    saga = actor("saga", state=Counter)

    @saga.workflow
    async def saga_run(ctx: WorkflowContext) -> None:
        await ctx.rollback_checkpoint("start")

        def undo(s: StepContext, output: object) -> None:
            s.state.log.append(f"undid {output}")

        await ctx.step("book", lambda s: "booked", rollback=undo)
        await ctx.step("hold", lambda s: "held", rollback=undo)
        await ctx.step("pay", lambda s: service.call("pay"), max_retries=0)

    return setup(charger, fan, saga)


def counting(first_step: str) -> Registry:
    """A queue loop after a first step, whose name is what a deploy changes (renaming it diverges)."""
    tally = actor("tally", state=Counter, queues={"add": queue(Item)})

    @tally.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def iteration(loop: WorkflowContext) -> None:
            message = await loop.queue.next("wait-add")

            def apply(s: StepContext) -> None:
                s.state.value += message.body.n

            await loop.step("apply", apply)

        await ctx.step(first_step, lambda s: "opened")
        await ctx.loop("tally-loop", iteration)

    @tally.action
    def peek(c: object) -> int:
        return 1

    return setup(tally)


async def test_a_failed_step_is_retried_with_a_fresh_attempt_count() -> None:
    service = Switch()
    async with TestEnv(charging(service)) as env:
        handle = env.client.get_or_create("charger", "order-1")
        await handle.status()
        await env.advance(1)
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED and "service unavailable" in (status.error or "")
        failed = next(e for e in await handle.history() if e.name == "charge")
        assert (failed.status, failed.attempts) == (EntryStatus.FAILED, 2)
        page = await env.client.list_actors("charger", status="failed")
        assert [s.key for s in page.actors] == [("order-1",)]

        service.down = False
        result = await handle.resume()
        assert (result.outcome, result.status) == ("retrying", WorkflowState.FAILED)
        assert "charge" in result.message and "ConnectionError" in result.message
        await env.run_until_idle()
        status = await handle.status()
        assert (status.workflow, status.output, status.error) == (WorkflowState.COMPLETED, "charge: ok", None)
        retried = next(e for e in await handle.history() if e.name == "charge")
        assert (retried.status, retried.attempts) == (EntryStatus.COMPLETED, 1)  # fresh count: first attempt
        assert [e.output for e in await handle.history() if e.name == "reserve"] == ["reserved"]  # not re-run
        assert (await env.client.list_actors("charger", status="failed")).actors == []
        with pytest.raises(ActorFinishedError):
            await handle.resume()


async def test_a_failed_join_branch_runs_again() -> None:
    service = Switch()
    async with TestEnv(charging(service)) as env:
        handle = env.client.get_or_create("fan", "f")
        await handle.status()
        await env.run_until_idle()
        assert (await handle.status()).workflow is WorkflowState.FAILED
        assert next(e for e in await handle.history() if e.name == "both").status is EntryStatus.FAILED
        service.down = False
        assert (await handle.resume()).outcome == "retrying"
        assert next(e for e in await handle.history() if e.name == "both").status is EntryStatus.PENDING
        await env.run_until_idle()
        status = await handle.status()
        assert (status.workflow, status.output) == (WorkflowState.COMPLETED, {"left": "left", "right": "right: ok"})
        assert next(e for e in await handle.history() if e.name == "both").status is EntryStatus.COMPLETED


async def test_a_compensated_failure_is_not_retried() -> None:
    service = Switch()
    async with TestEnv(charging(service)) as env:
        handle = env.client.get_or_create("saga", "s")
        await handle.status()
        await env.run_until_idle()
        assert (await handle.state()).log == ["undid held", "undid booked"]
        with pytest.raises(NotResumableError, match="compensated") as refused:
            await handle.resume()
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED
        # The status tells the same rule: compensated, what was undone in which order, what is left to do.
        assert status.compensation is not None and status.compensation.undone == ["hold", "book"]
        assert status.remedies == ["pause", "terminate", "fork", "reset", "delete"]
        assert status.advice is not None and "resume is refused" in status.advice and "Reset" in status.advice
        assert status.advice in str(refused.value)


async def test_a_failure_without_compensation_offers_resume_and_says_to_fix_the_cause() -> None:
    service = Switch()
    async with TestEnv(charging(service)) as env:
        handle = env.client.get_or_create("charger", "c")
        await handle.status()
        await env.advance(1)
        status = await handle.status()
        assert (status.workflow, status.compensation) == (WorkflowState.FAILED, None)
        assert status.remedies[0] == "resume" and status.advice is not None and "fix the cause" in status.advice
        service.down = False
        assert (await handle.resume()).outcome == "retrying"
        await env.run_until_idle()
        done = await handle.status()
        assert (done.workflow, done.advice, done.remedies) == (WorkflowState.COMPLETED, None, ["fork", "reset",
                                                                                               "delete"])


async def test_a_diverged_actor_resumes_only_once_fixed_code_is_there_and_then_runs_its_waiting_messages() -> None:
    store = MemoryEventStore()
    async with TestEnv(counting("open"), store=store) as env:
        handle = env.client.get_or_create("tally", "t")
        await handle.send("add", {"n": 1})
        await env.run_until_idle()
    async with TestEnv(counting("open-renamed"), store=store) as env:  # a deploy that renamed a recorded step
        handle = env.client.get_or_create("tally", "t")
        await handle.send("add", {"n": 10})
        await env.run_until_idle()
        assert (await handle.status()).workflow is WorkflowState.DIVERGED
        with pytest.raises(StillDivergedError) as refused:
            await handle.resume()
        assert "open-renamed" in str(refused.value) and refused.value.divergence["location"]
        assert (await env.client.list_actors("tally", status="diverged")).actors[0].key == ("t",)
    fixed = TestEnv(counting("open"), store=store)  # not entered: nothing wakes the actors by itself
    handle = fixed.client.get_or_create("tally", "t")
    await handle.send("add", {"n": 100})
    await handle.call("peek")  # neither an action...
    await fixed.service.ensure_created(handle.ref)  # ...nor a PUT wakes it: the messages wait
    status = await handle.status()
    assert status.workflow is WorkflowState.DIVERGED
    result = await handle.resume()
    assert (result.outcome, result.status) == ("resumed", WorkflowState.DIVERGED)
    assert "2 waiting message(s)" in result.message
    await fixed.run_until_idle()
    assert (await handle.status()).workflow is WorkflowState.SLEEPING
    assert (await handle.state()).value == 111


async def test_terminate_ends_the_workflow_and_refuses_later_sends() -> None:
    async with TestEnv(counting("open")) as env:
        handle = env.client.get_or_create("tally", "t")
        await handle.send("add", {"n": 1})
        await env.run_until_idle()
        result = await handle.terminate("customer left")
        assert (result.outcome, result.status) == ("terminated", WorkflowState.SLEEPING)
        status = await handle.status()
        assert (status.workflow, status.error) == (WorkflowState.TERMINATED, "Terminated: customer left")
        assert status.waiting_for.queues == []
        with pytest.raises(ActorFinishedError, match="terminated"):
            await handle.send("add", {"n": 5})
        assert await handle.call("peek") == 1  # actions still answer
        await env.advance(3600)
        assert (await handle.state()).value == 1
        assert (await handle.terminate()).outcome == "unchanged"
        with pytest.raises(ActorFinishedError):
            await handle.resume()
        listed = await env.client.list_actors("tally")
        assert [(s.key, s.status) for s in listed.actors] == [(("t",), WorkflowState.TERMINATED)]


async def test_terminate_discards_the_messages_still_waiting() -> None:
    store = MemoryEventStore()
    env = TestEnv(counting("open"), store=store)  # not entered: messages stay in the inbox
    handle = env.client.get_or_create("tally", "t")
    for n in (1, 2):
        await handle.send("add", {"n": n})
    assert len(store.inbox_ids(handle.ref)) == 2
    result = await handle.terminate()
    assert "2 waiting message(s) discarded" in result.message
    assert store.inbox_ids(handle.ref) == []
    await env.run_until_idle()
    assert (await handle.state()).value == 0


async def test_delete_removes_the_actor_and_the_next_request_starts_afresh() -> None:
    async with TestEnv(counting("open")) as env:
        handle = env.client.get_or_create("tally", "t")
        await handle.send("add", {"n": 7})
        await env.run_until_idle()
        await handle.terminate()
        result = await handle.delete()
        assert (result.outcome, result.status) == ("deleted", WorkflowState.TERMINATED)
        assert (await env.client.list_actors("tally")).actors == []
        assert (await handle.delete()).outcome == "not_found"
        with pytest.raises(ActorNotFoundError):
            await env.client.get_or_create("tally", "gone").resume()
        await handle.send("add", {"n": 2})  # a new life: accepted, counted from zero
        await env.run_until_idle()
        assert (await handle.state()).value == 2


async def test_resume_all_retries_every_failed_actor_of_a_type_and_reports_the_others() -> None:
    service = Switch()
    async with TestEnv(charging(service)) as env:
        for key in ("a", "b", "c"):
            await env.client.get_or_create("charger", key).status()
        await env.advance(1)
        service.down = False
        done = env.client.get_or_create("charger", "done")
        await done.status()
        await env.run_until_idle()
        everything = [s.key[0] async for s in env.client.actors("charger")]
        assert everything == ["done", "a", "b", "c"]  # completed sorts before failed
        results = await env.client.resume_all("charger", status="failed", page_size=2)
        assert [(r.key, r.outcome) for r in results] == [(["a"], "retrying"), (["b"], "retrying"),
                                                          (["c"], "retrying")]
        await env.run_until_idle()
        assert {s.status for s in (await env.client.list_actors("charger")).actors} == {WorkflowState.COMPLETED}
        refused = await env.client.resume_all("charger")
        assert {r.outcome for r in refused} == {"refused"} and len(refused) == 4
