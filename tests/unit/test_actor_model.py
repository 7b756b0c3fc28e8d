"""The actor model: step-only access, vars, hooks, scheduled actions, events, cross-actor calls, actions."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from dormant import (
    ActionContext,
    HookContext,
    InvalidMessageError,
    Loop,
    StepContext,
    StepOnlyError,
    UnknownActionError,
    UnknownEventError,
    WorkflowContext,
    WorkflowState,
    actor,
    event,
    queue,
    setup,
)
from dormant.testing import TestEnv
from tests.unit.support import Counter, Item, reports_for, start


class Progress(BaseModel):
    percent: int


async def test_state_vars_client_broadcast_and_clock_are_step_only() -> None:
    messages: dict[str, str] = {}
    a = actor("step-only", state=Counter, events={"e": event(Progress)})

    def probe(ctx: WorkflowContext, prefix: str) -> None:
        attempts: dict[str, Any] = {
            "state": lambda: ctx.state, "vars": lambda: ctx.vars, "client": ctx.client,
            "broadcast": lambda: ctx.broadcast("e", {"percent": 1}), "schedule": lambda: ctx.schedule,
            "now": ctx.now,
        }
        for what, attempt in attempts.items():
            try:
                attempt()
            except StepOnlyError as error:
                messages[f"{prefix}{what}"] = str(error)

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        probe(ctx, "root.")

        async def body(loop: WorkflowContext) -> Any:
            probe(loop, "loop.")
            return Loop.break_()

        async def branch(b: WorkflowContext) -> None:
            probe(b, "branch.")

        await ctx.loop("l", body)
        await ctx.join("j", {"only": branch})
        await ctx.step("fine", lambda s: s.state.log.append("a step may"))

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "step-only")
        assert (await handle.status()).workflow is WorkflowState.COMPLETED
        assert (await handle.state()).log == ["a step may"]
    expected = {f"{p}{w}" for p in ("root.", "loop.", "branch.")
                for w in ("state", "vars", "client", "broadcast", "schedule", "now")}
    assert set(messages) == expected
    assert "only available inside a step or an action" in messages["root.state"]
    assert "ctx.step(" in messages["root.client"]  # it says what to do instead
    assert "inside a step" in messages["root.now"]


async def test_vars_are_rebuilt_on_every_wakeup_and_hooks_run_around_each() -> None:
    built: list[int] = []
    hooks: list[str] = []
    seen: list[Any] = []

    def make_vars() -> dict[str, Any]:
        built.append(1)
        return {"connection": f"conn-{len(built)}", "scratch": []}

    a = actor("vars", state=Counter, queues={"go": queue(Item)}, vars=make_vars)

    @a.on_wake
    def wake(c: HookContext) -> None:
        hooks.append(f"wake {c.vars['connection']}")

    @a.on_sleep
    async def sleep(c: HookContext) -> None:
        hooks.append(f"sleep {c.vars['connection']}")

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def body(loop: WorkflowContext) -> None:
            message = await loop.queue.next("wait")

            def use(s: StepContext) -> None:
                s.vars["scratch"].append(message.body.n)  # not carried to the next wake-up
                seen.append([s.vars["connection"], list(s.vars["scratch"])])

            await loop.step("use", use)

        await ctx.loop("main", body)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "vars")
        for n in (1, 2):
            await handle.send("go", {"n": n})
            await env.run_until_idle()
        wakes = len(reports_for(env, handle))
        assert wakes == 3
        assert len(built) == 3
        assert hooks == ["wake conn-1", "sleep conn-1", "wake conn-2", "sleep conn-2", "wake conn-3", "sleep conn-3"]
        assert seen == [["conn-2", [1]], ["conn-3", [2]]]


async def test_on_sleep_runs_even_when_the_workflow_fails() -> None:
    hooks: list[str] = []
    a = actor("hooks-fail", state=Counter)
    a.on_wake(lambda c: hooks.append("wake"))
    a.on_sleep(lambda c: hooks.append("sleep"))

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        raise RuntimeError("broken workflow")

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "hooks-fail")
        assert (await handle.status()).workflow is WorkflowState.FAILED
        assert hooks == ["wake", "sleep"]


async def test_on_create_runs_once_with_the_input() -> None:
    created: list[Any] = []
    a = actor("created", state=Counter, queues={"go": queue(Item)})

    @a.on_create
    def on_create(c: ActionContext) -> None:
        created.append(c.input)
        c.state.value = 100
        c.state.log.append("created")

    @a.action
    def bump(c: ActionContext) -> int:
        c.state.value += 1
        return int(c.state.value)

    @a.workflow
    async def run(ctx: WorkflowContext) -> Any:
        message = await ctx.queue.next("wait")
        return [ctx.input, message.body.n]

    async with TestEnv(setup(a)) as env:
        first = env.client.get_or_create("created", ["k"], input={"plan": "gold"})
        assert await first.call("bump") == 101
        second = env.client.get_or_create("created", ["k"], input={"plan": "ignored"})
        await second.send("go", {"n": 5})
        await env.run_until_idle()
        assert await second.call("bump") == 102
        assert created == [{"plan": "gold"}]
        assert (await first.state()).log == ["created"]
        assert (await first.status()).output == [{"plan": "gold"}, 5]


async def test_scheduled_actions_run_once_at_their_time() -> None:
    a = actor("scheduler", state=Counter)

    @a.action
    def tick(c: ActionContext, label: str) -> None:
        c.state.log.append([label, c.now()])

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def schedule(s: StepContext) -> None:
            await s.schedule.after(60, "tick", "after-60")
            await s.schedule.at(s.now() + 30, "tick", "at-30")

        await ctx.step("schedule", schedule)

    async with TestEnv(setup(a)) as env:
        t0 = env.now()
        handle = await start(env, "scheduler")
        assert (await handle.state()).log == []
        await env.advance(29.9)
        assert (await handle.state()).log == []
        await env.advance(0.1)
        assert (await handle.state()).log == [["at-30", t0 + 30]]
        await env.advance(30)
        await env.advance(3600)
        assert (await handle.state()).log == [["at-30", t0 + 30], ["after-60", t0 + 60]]
        assert env.store.inbox_ids(handle.ref) == []


async def test_scheduling_an_unknown_action_is_an_error() -> None:
    a = actor("bad-schedule", state=Counter)

    @a.action
    async def plan(c: ActionContext) -> None:
        await c.schedule.after(10, "missing")

    async with TestEnv(setup(a)) as env:
        handle = env.client.get_or_create("bad-schedule", ["k"])
        with pytest.raises(UnknownActionError):
            await handle.call("plan")
        assert env.store.inbox_ids(handle.ref) == []


async def test_broadcast_validates_payloads_and_only_successful_attempts_publish() -> None:
    a = actor("progress", state=Counter, events={"progress": event(Progress)})

    @a.action
    def report(c: ActionContext, payload: Any) -> None:
        c.state.value += 1
        c.broadcast("progress", payload)

    @a.action
    def shout(c: ActionContext) -> None:
        c.broadcast("undeclared", {})

    @a.workflow
    async def run(ctx: WorkflowContext) -> None:
        def flaky(s: StepContext) -> None:
            s.broadcast("progress", Progress(percent=s.attempt * 10))
            if s.attempt == 1:
                raise RuntimeError("the first attempt's event must not be published")

        await ctx.step("flaky", flaky, retry_backoff_base=0.5)

    async with TestEnv(setup(a)) as env:
        handle = await start(env, "progress")
        await env.advance(1)
        await handle.call("report", {"percent": 99})
        with pytest.raises(InvalidMessageError):
            await handle.call("report", {"percent": "lots"})
        with pytest.raises(UnknownEventError):
            await handle.call("shout")
        payloads = [(r.name, r.payload) async for r in handle.events(follow=False)]
        assert payloads == [("progress", {"percent": 20}), ("progress", {"percent": 99})]
        assert (await handle.state()).value == 1  # the rejected action committed nothing


class Job(BaseModel):
    amount: int


async def test_steps_call_and_send_to_other_actors() -> None:
    calls: list[int] = []
    worker = actor("worker", state=Counter, queues={"jobs": queue(Job)})

    @worker.action
    def add(c: ActionContext, amount: int) -> int:
        calls.append(amount)
        c.state.value += amount
        return int(c.state.value)

    @worker.workflow
    async def work(ctx: WorkflowContext) -> None:
        async def body(loop: WorkflowContext) -> None:
            message = await loop.queue.next("job")
            await loop.step("do", lambda s: s.state.log.append(message.body.amount))

        await ctx.loop("jobs", body)

    boss = actor("boss", state=Counter)

    @boss.workflow
    async def direct(ctx: WorkflowContext) -> Any:
        async def call_worker(s: StepContext) -> Any:
            handle = s.client().get_or_create("worker", ["w1"])
            return await handle.call("add", 5) + await handle.add(6)

        async def send_jobs(s: StepContext) -> None:
            handle = s.client().get_or_create("worker", ["w1"])
            await handle.send("jobs", {"amount": 1})
            await handle.send("jobs", {"amount": 2})
            if s.attempt == 1:  # the retry re-sends the same message ids: the receiver drops them
                raise RuntimeError("crash after sending")

        total = await ctx.step("call", call_worker)
        await ctx.step("send", send_jobs, retry_backoff_base=0.5)
        return total

    async with TestEnv(setup(worker, boss)) as env:
        handle = await start(env, "boss")
        await env.advance(1)
        assert (await handle.status()).output == 5 + 11
        worker_handle = env.client.get_or_create("worker", ["w1"])
        assert (await worker_handle.state()).value == 11
        assert (await worker_handle.state()).log == [1, 2]
        assert calls == [5, 6]


async def test_actions_commit_state_and_failed_actions_commit_nothing() -> None:
    a = actor("actions", state=Counter)

    @a.action
    def add(c: ActionContext, n: int) -> int:
        c.state.value += n
        return int(c.state.value)

    @a.action
    def add_then_fail(c: ActionContext, n: int) -> None:
        c.state.value += n
        raise ValueError("rejected")

    @a.action(name="getState")
    def get_state(c: ActionContext) -> Counter:
        return c.state  # type: ignore[no-any-return]

    async with TestEnv(setup(a)) as env:
        handle = env.client.get_or_create("actions", ["k"])
        assert await handle.call("add", 2) == 2
        assert await handle.add(3) == 5
        with pytest.raises(ValueError, match="rejected"):
            await handle.call("add_then_fail", 100)
        with pytest.raises(UnknownActionError):
            await handle.call("nope")
        assert (await handle.call("getState")).value == 5
        action_commits = [c for c in env.store.commit_log if c.ref == handle.ref and c.draft.workflow is None]
        assert [c.draft.state["value"] for c in action_commits if c.draft.state] == [2, 5]
