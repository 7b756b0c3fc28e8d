"""Callbacks (`ctx.callback`): an outside system completes, fails or heartbeats a workflow's callback by its token
alone; the workflow awaits the result durably; timeouts and missed heartbeats raise, recorded and replayed."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from typing import Any

import pytest
from pydantic import BaseModel

from dormant import (
    CallbackCompletedError,
    CallbackError,
    CallbackExpiredError,
    CallbackHeartbeatTimeoutError,
    CallbackNotFoundError,
    CallbackTimeoutError,
    CallbackUrlError,
    InvalidCallbackTokenError,
    InvalidMessageError,
    Loop,
    NonRetryableError,
    StepContext,
    WorkflowContext,
    actor,
    callback,
    queue,
    setup,
)
from dormant.core.callbacks import CALLBACK_RETENTION
from dormant.errors import InvalidMessageIdError
from dormant.ports import InboxMessage
from dormant.runtime.callbacks import TOKEN_PATTERN
from dormant.testing import TestEnv
from dormant.workflow.errors import InvalidJsonError
from tests.unit.support import store_dump


class Result(BaseModel):
    value: int


class Seen(BaseModel):
    tokens: list[str] = []
    outcome: str = ""
    outcomes: list[str] = []
    url: str = ""


def _hand_out(token: str) -> Any:
    def step(s: StepContext) -> None:
        if token not in s.state.tokens:
            s.state.tokens.append(token)
    return step


def _record(outcome: str) -> Any:
    def step(s: StepContext) -> None:
        s.state.outcome = outcome
    return step


async def _outcome_of(cb: Any) -> str:
    try:
        result = await cb.result()
    except CallbackError as error:
        return f"{type(error).__name__}: {error}"
    return f"{type(result).__name__} {result.value}"


basic = actor("cb-basic", state=Seen, callbacks={"done": callback(Result)})


@basic.workflow
async def basic_run(ctx: WorkflowContext) -> None:
    options = ctx.input or {}
    cb = await ctx.callback("done", timeout=options.get("timeout"), heartbeat_timeout=options.get("heartbeat"))
    await ctx.step("hand-out", _hand_out(cb.token))
    await ctx.step("record", _record(await _outcome_of(cb)))


ATTEMPTS: list[str] = []  # tokens the flaky hand-out step saw, per attempt
flaky = actor("cb-flaky", state=Seen, callbacks={"done": callback(Result)})


@flaky.workflow
async def flaky_run(ctx: WorkflowContext) -> None:
    cb = await ctx.callback("done")

    def hand_out(s: StepContext) -> None:
        ATTEMPTS.append(cb.token)
        if len(ATTEMPTS) == 1:
            raise RuntimeError("the mail server is down")  # retried by a later wake-up: a replay
        s.state.tokens.append(cb.token)

    await ctx.step("hand-out", hand_out)
    await ctx.step("record", _record(await _outcome_of(cb)))


looping = actor("cb-loop", state=Seen, queues={"skip": queue(dict)}, callbacks={"item": callback(Result)})


@looping.workflow
async def looping_run(ctx: WorkflowContext) -> None:
    keep = (ctx.input or {}).get("keep", 2)

    async def iteration(loop: WorkflowContext, done: int) -> Any:
        cb = await loop.callback("item", timeout=600)
        await loop.step("hand-out", _hand_out(cb.token))

        async def skipped(branch: WorkflowContext) -> str:
            await branch.queue.next("skip-it", names=["skip"])
            return "skipped"

        async def result(branch: WorkflowContext) -> str:
            return await _outcome_of(cb)

        taken = await loop.race("which", {"result": result, "skipped": skipped})

        def note(s: StepContext) -> None:
            s.state.outcomes.append(taken.value)

        await loop.step("note", note)
        return Loop.break_(None) if done + 1 >= 3 else Loop.continue_(done + 1)

    await ctx.loop("items", iteration, state=0, history_keep=keep)


raced = actor("cb-race", state=Seen, callbacks={"paid": callback(Result)})


@raced.workflow
async def raced_run(ctx: WorkflowContext) -> None:
    async def wait_paid(branch: WorkflowContext) -> str:
        cb = await branch.callback("paid")
        await branch.step("hand-out", _hand_out(cb.token))
        return await _outcome_of(cb)

    async def give_up(branch: WorkflowContext) -> str:
        await branch.sleep("patience", 30)
        return "gave up"

    taken = await ctx.race("payment", {"paid": wait_paid, "timer": give_up})
    await ctx.step("record", _record(f"{taken.winner}: {taken.value}"))


joined = actor("cb-join", state=Seen, callbacks={"a": callback(Result), "b": callback(Result)})


def _awaiting(name: str) -> Any:
    async def run(branch: WorkflowContext) -> str:
        cb = await branch.callback(name)
        await branch.step("hand-out", _hand_out(cb.token))
        return await _outcome_of(cb)
    return run


@joined.workflow
async def joined_run(ctx: WorkflowContext) -> None:
    both = await ctx.join("both", {"a": _awaiting("a"), "b": _awaiting("b")})
    await ctx.step("record", _record(f"{both['a']} / {both['b']}"))


GATE: dict[str, asyncio.Event] = {}
SAW_RECORD: list[bool] = []
beside_a_step = actor("cb-beside", state=Seen, callbacks={"done": callback(Result)})


@beside_a_step.workflow
async def beside_run(ctx: WorkflowContext) -> None:
    async def slow(b: WorkflowContext) -> str:
        async def work(s: StepContext) -> str:
            GATE["started"].set()
            await GATE["slow"].wait()
            return "slow done"
        return str(await b.step("work", work))

    async def waiting(b: WorkflowContext) -> str:
        cb = await b.callback("done")

        def hand_out(s: StepContext) -> None:
            store = s.client()._service.store  # the env's memory store: is the lookup record there already?
            SAW_RECORD.append(hashlib.sha256(cb.token.encode()).hexdigest() in store.callbacks)
            s.state.tokens.append(cb.token)

        await b.step("hand-out", hand_out)
        return await _outcome_of(cb)

    both = await ctx.join("both", {"slow": slow, "waiting": waiting})
    await ctx.step("record", _record(f"{both['slow']} / {both['waiting']}"))


in_process = actor("cb-in-process", state=Seen, callbacks={"done": callback(Result)})


@in_process.workflow
async def in_process_run(ctx: WorkflowContext) -> None:
    cb = await ctx.callback("done")
    await ctx.step("hand-out", _hand_out(cb.token))

    async def slow(b: WorkflowContext) -> str:
        async def work(s: StepContext) -> str:
            GATE["started"].set()
            await GATE["slow"].wait()
            return "slow done"
        return str(await b.step("work", work))

    async def waiting(b: WorkflowContext) -> str:
        async def once_slow_runs(s: StepContext) -> None:
            await GATE["started"].wait()

        await b.step("once-slow-runs", once_slow_runs)  # so the wait below is one beside a running step
        outcome = await _outcome_of(cb)

        def noted(s: StepContext) -> None:
            GATE["noted"].set()

        await b.step("noted", noted)
        return outcome

    both = await ctx.join("both", {"slow": slow, "waiting": waiting})
    await ctx.step("record", _record(f"{both['slow']} / {both['waiting']}"))


ends_early = actor("cb-ends", state=Seen, callbacks={"done": callback()})


@ends_early.workflow
async def ends_early_run(ctx: WorkflowContext) -> str:
    cb = await ctx.callback("done", timeout=3600)
    await ctx.step("hand-out", _hand_out(cb.token))
    return "ended without waiting"


RESUMED: list[bool] = []
failing = actor("cb-failing", state=Seen, callbacks={"done": callback(Result)})


@failing.workflow
async def failing_run(ctx: WorkflowContext) -> None:
    cb = await ctx.callback("done")
    await ctx.step("hand-out", _hand_out(cb.token))

    def check(s: StepContext) -> None:
        if not RESUMED:
            raise NonRetryableError("the ledger is unreachable")

    await ctx.step("check", check)
    await ctx.step("record", _record(await _outcome_of(cb)))


urls = actor("cb-url", state=Seen, callbacks={"done": callback()})


@urls.workflow
async def urls_run(ctx: WorkflowContext) -> None:
    cb = await ctx.callback("done")
    try:
        url = cb.url
    except CallbackUrlError as error:
        url = f"error: {error}"

    def keep(s: StepContext) -> None:
        s.state.url, s.state.tokens = url, [cb.token]

    await ctx.step("keep", keep)
    await cb.result()


misdeclared = actor("cb-undeclared", state=Seen, callbacks={"done": callback()})


@misdeclared.workflow
async def misdeclared_run(ctx: WorkflowContext) -> None:
    await ctx.callback(str((ctx.input or {})["name"]), timeout=(ctx.input or {}).get("timeout"))


noted = actor("cb-noted", state=Seen, queues={"note": queue(dict)}, callbacks={"done": callback(Result)})


@noted.workflow
async def noted_run(ctx: WorkflowContext) -> None:  # its notes are never read: they only occupy message ids
    cb = await ctx.callback("done", timeout=600)
    await ctx.step("hand-out", _hand_out(cb.token))
    await ctx.step("record", _record(await _outcome_of(cb)))


registry = setup(basic, flaky, looping, raced, joined, beside_a_step, in_process, ends_early, failing, urls,
                 misdeclared, noted)


@pytest.fixture(autouse=True)
def _reset() -> None:
    ATTEMPTS.clear()
    SAW_RECORD.clear()
    RESUMED.clear()
    GATE.update(slow=asyncio.Event(), started=asyncio.Event(), noted=asyncio.Event())


async def _started(env: TestEnv, name: str, key: str = "k", actor_input: Any = None) -> tuple[Any, str]:
    handle = env.client.get_or_create(name, [key], input=actor_input)
    await handle.status()
    await env.run_until_idle()
    tokens = (await handle.state()).tokens
    return handle, tokens[-1] if tokens else ""


def _record_of(env: TestEnv, token: str) -> dict[str, Any]:
    return env.store.callbacks[hashlib.sha256(token.encode()).hexdigest()]


def _dump(env: TestEnv) -> dict[str, Any]:
    return {**store_dump(env.store), "callbacks": json.loads(json.dumps(env.store.callbacks))}


# -- complete, fail ------------------------------------------------------------------------------------------
async def test_a_completion_resumes_the_workflow_with_the_result_as_the_declared_model() -> None:
    async with TestEnv(registry) as env:
        handle, token = await _started(env, "cb-basic")
        status = await handle.status()
        assert status.workflow == "sleeping" and status.waiting_for.queues == []
        assert [(c.name, c.location, c.deadline) for c in status.waiting_for.callbacks] == [("done", "done", None)]
        assert (await env.client.callback_status(token)).status == "open"

        accepted = await env.client.complete_callback(token, {"value": 7})
        assert (accepted.status, accepted.callback) == ("accepted", "done")
        await env.run_until_idle()

        assert (await handle.state()).outcome == "Result 7"  # decoded into the declared model
        assert (await handle.status()).workflow == "completed"
        entry = next(e for e in await handle.history() if e.kind == "callback")
        assert (entry.status, entry.output, entry.callback and entry.callback.outcome) == (
            "completed", {"value": 7}, "completed")
        assert _record_of(env, token)["state"] == "completed"
        assert env.store.inbox_ids(handle.ref) == []  # the completion left the inbox with the commit that took it
        assert (await env.client.callback_status(token)).status == "completed"


async def test_a_failure_raises_callback_failed_error_with_the_outside_systems_type_and_message() -> None:
    async with TestEnv(registry) as env:
        handle, token = await _started(env, "cb-basic", "typed")
        await env.client.fail_callback(token, "PaymentDeclined", "card expired")
        await env.run_until_idle()
        assert (await handle.state()).outcome == ('CallbackFailedError: callback "done" was failed by the outside '
                                                 "system: PaymentDeclined: card expired")
        other, token = await _started(env, "cb-basic", "exception")
        await env.client.fail_callback(token, LookupError("no such card"))
        await env.run_until_idle()
        assert (await other.state()).outcome.endswith("LookupError: no such card")
        assert (await env.client.callback_status(token)).status == "failed"


async def test_the_token_is_recorded_once_so_a_replay_and_a_new_deploy_hand_out_the_same_one() -> None:
    async with TestEnv(registry) as env:
        handle, _ = await _started(env, "cb-flaky")
        await env.advance(1)  # the failed hand-out's retry: a later wake-up, replaying the callback entry
        assert len(ATTEMPTS) == 2 and ATTEMPTS[0] == ATTEMPTS[1]
        token = (await handle.state()).tokens[0]
        assert token == ATTEMPTS[0]
    async with TestEnv(registry, store=env.store) as redeployed:  # new code over the same store
        await redeployed.client.complete_callback(token, {"value": 3})
        await redeployed.run_until_idle()
        assert (await redeployed.client.get_or_create("cb-flaky", ["k"]).state()).outcome == "Result 3"


async def test_a_second_completion_is_refused_and_the_same_one_again_is_answered_as_done() -> None:
    async with TestEnv(registry) as env:
        handle, token = await _started(env, "cb-basic")
        assert (await env.client.complete_callback(token, {"value": 1})).status == "accepted"
        assert (await env.client.complete_callback(token, {"value": 1})).status == "accepted"  # a retried POST
        with pytest.raises(CallbackCompletedError):
            await env.client.complete_callback(token, {"value": 2})
        with pytest.raises(CallbackCompletedError):
            await env.client.fail_callback(token, "Changed", "my mind")
        assert len(env.store.inbox_ids(handle.ref)) == 1  # one completion per callback
        await env.run_until_idle()
        assert (await env.client.complete_callback(token, {"value": 1})).status == "completed"
        before = _dump(env)
        for attempt in (lambda: env.client.complete_callback(token, {"value": 2}),
                        lambda: env.client.fail_callback(token, "Late", "too late"),
                        lambda: env.client.heartbeat_callback(token)):
            with pytest.raises(CallbackCompletedError):
                await attempt()
        assert _dump(env) == before
        assert (await handle.state()).outcome == "Result 1"


# -- timeouts and heartbeats -------------------------------------------------------------------------------
async def test_the_timeout_raises_callback_timeout_error_and_expires_the_token() -> None:
    async with TestEnv(registry) as env:
        handle, token = await _started(env, "cb-basic", actor_input={"timeout": 60})
        assert (await handle.status()).waiting_for.deadline == env.now() + 60
        await env.advance(59.5)
        assert (await env.client.callback_status(token)).status == "open"
        await env.advance(0.5)
        assert (await handle.state()).outcome == 'CallbackTimeoutError: callback "done" timed out: no completion ' \
                                                 "within its timeout"
        with pytest.raises(CallbackExpiredError, match="timed out"):
            await env.client.complete_callback(token, {"value": 1})
        record = _record_of(env, token)
        assert (record["state"], record["expires_at"]) == ("timed_out", env.now() + CALLBACK_RETENTION)
        await env.advance(CALLBACK_RETENTION)  # forgotten a day after it ended
        with pytest.raises(CallbackNotFoundError):
            await env.client.callback_status(token)


async def test_heartbeats_move_the_deadline_without_waking_the_actor_and_a_missed_one_raises() -> None:
    async with TestEnv(registry) as env:
        handle, token = await _started(env, "cb-basic", actor_input={"heartbeat": 100})
        start = env.now()
        await env.advance(60)
        commits, calls = len(env.store.commit_log), env.store.calls
        beat = await env.client.heartbeat_callback(token)
        assert (beat.status, beat.heartbeat_deadline) == ("open", start + 160)
        assert len(env.store.commit_log) == commits  # nothing committed, the actor not woken
        assert env.store.calls - calls == 2  # the record read, then its conditional write
        assert env.transport.next_time() == start + 100  # the timer the suspension set is the only one
        await env.advance(60)  # the old heartbeat deadline passes: the wake-up reads the record and waits on
        status = await handle.status()
        assert status.workflow == "sleeping" and status.waiting_for.deadline == start + 160
        assert status.waiting_for.callbacks[0].heartbeat_deadline == start + 160
        await env.advance(40)
        outcome = (await handle.state()).outcome
        assert outcome == 'CallbackHeartbeatTimeoutError: callback "done" timed out: no heartbeat within its ' \
                          "heartbeat timeout"
        assert issubclass(CallbackHeartbeatTimeoutError, CallbackTimeoutError)
        with pytest.raises(CallbackExpiredError):
            await env.client.heartbeat_callback(token)


async def test_a_heartbeat_of_a_callback_without_heartbeat_timeout_changes_nothing() -> None:
    async with TestEnv(registry) as env:
        _, token = await _started(env, "cb-basic", actor_input={"timeout": 60})
        before = _dump(env)
        beat = await env.client.heartbeat_callback(token)
        assert (beat.status, beat.heartbeat_deadline) == ("open", None)
        assert _dump(env) == before


# -- refusals ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("token", ["", "x", "dcb_", "dcb_" + "a" * 42, "dcb_" + "a" * 44, "DCB_" + "a" * 43,
                                   "dcb_" + "a" * 42 + "\ud800", "dcb_" + "a" * 42 + "/", " dcb_" + "a" * 43])
async def test_what_is_no_token_is_refused_before_anything_is_read(token: str) -> None:
    async with TestEnv(registry) as env:
        calls = env.store.calls
        for attempt in (lambda: env.client.complete_callback(token, {"value": 1}),
                        lambda: env.client.fail_callback(token, "E"), lambda: env.client.heartbeat_callback(token),
                        lambda: env.client.callback_status(token)):
            with pytest.raises(InvalidCallbackTokenError) as raised:
                await attempt()
            assert "a" * 20 not in str(raised.value)  # never echoed
        assert env.store.calls == calls


async def test_an_unknown_token_is_not_found_and_an_invalid_result_is_refused_with_nothing_stored() -> None:
    async with TestEnv(registry) as env:
        handle, token = await _started(env, "cb-basic")
        with pytest.raises(CallbackNotFoundError):
            await env.client.complete_callback("dcb_" + "A" * 43, {"value": 1})
        before = _dump(env)
        with pytest.raises(InvalidMessageError, match='callback "done" result is invalid: value') as raised:
            await env.client.complete_callback(token, {"value": "not a number, and secret"})
        assert "secret" not in str(raised.value)
        with pytest.raises(InvalidJsonError):
            await env.client.fail_callback(token, "Bad", "a lone surrogate \ud800")
        with pytest.raises(InvalidMessageError, match=r"error\.type"):
            await env.client.fail_callback(token, "")
        with pytest.raises(InvalidMessageError, match=r"error\.message"):
            await env.client.fail_callback(token, "Long", "x" * 5000)
        await env.run_until_idle()
        assert _dump(env) == before
        assert (await handle.status()).workflow == "sleeping"


async def test_undeclared_callbacks_and_bad_timeouts_are_definition_errors() -> None:
    async with TestEnv(registry) as env:
        handle, _ = await _started(env, "cb-undeclared", "name", {"name": "nope"})
        status = await handle.status()
        assert status.workflow == "failed" and 'callback "nope" is not declared' in (status.error or "")
        handle, _ = await _started(env, "cb-undeclared", "timeout", {"name": "done", "timeout": 0})
        assert "timeout must be > 0" in ((await handle.status()).error or "")
        with pytest.raises(Exception, match="callback\\(ResultModel\\)"):
            actor("cb-wrong", callbacks={"done": Result})  # type: ignore[dict-item]


# -- the token ----------------------------------------------------------------------------------------------
async def test_tokens_are_unguessable_and_the_store_keeps_only_their_hash() -> None:
    async with TestEnv(registry) as env:
        tokens = [(await _started(env, "cb-basic", f"k{n}"))[1] for n in range(20)]
        assert len(set(tokens)) == 20
        assert all(TOKEN_PATTERN.fullmatch(token) for token in tokens)  # dcb_ + 43 base64url characters: 256 bits
        assert set(env.store.callbacks) == {hashlib.sha256(t.encode()).hexdigest() for t in tokens}
        records = json.dumps(env.store.callbacks)
        assert not any(token in records or token[4:] in records for token in tokens)
        record = _record_of(env, tokens[0])
        assert (record["actor"], list(record["key"]), record["name"], record["state"]) == (
            "cb-basic", ["k0"], "done", "open")


async def test_cb_url_is_built_from_the_public_url_and_says_what_to_set_without_one() -> None:
    async with TestEnv(registry, public_url="https://api.example.com") as env:
        handle, _ = await _started(env, "cb-url")
        state = await handle.state()
        assert state.url == f"https://api.example.com/callbacks/{state.tokens[0]}"
    async with TestEnv(registry, public_url=None) as env:
        handle, _ = await _started(env, "cb-url")
        state = await handle.state()
        assert state.url.startswith("error: cb.url needs the API's public URL: set DORMANT_PUBLIC_URL")
        assert re.fullmatch(r"dcb_[\w-]{43}", state.tokens[0])


# -- scopes ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("keep", [2, 0])
async def test_a_callback_per_loop_iteration_and_one_left_open_is_cancelled(keep: int) -> None:
    async with TestEnv(registry) as env:
        handle, first = await _started(env, "cb-loop", actor_input={"keep": keep})
        await env.client.complete_callback(first, {"value": 1})
        await env.run_until_idle()
        second = (await handle.state()).tokens[-1]
        await handle.send("skip", {})  # this iteration ends without awaiting its callback
        await env.run_until_idle()
        third = (await handle.state()).tokens[-1]
        assert len({first, second, third}) == 3
        with pytest.raises(CallbackExpiredError, match="cancelled"):
            await env.client.complete_callback(second, {"value": 2})
        assert (await env.client.callback_status(second)).status == "cancelled"
        await env.client.complete_callback(third, {"value": 3})
        await env.run_until_idle()
        state = await handle.state()
        assert state.outcomes == ["Result 1", "skipped", "Result 3"]
        assert (await handle.status()).workflow == "completed"
        assert (await env.client.callback_status(first)).status == "completed"


async def test_a_callback_in_a_race_branch_that_loses_is_cancelled() -> None:
    async with TestEnv(registry) as env:
        handle, token = await _started(env, "cb-race", "slow")
        await env.advance(30)
        assert (await handle.state()).outcome == "timer: gave up"
        with pytest.raises(CallbackExpiredError, match="cancelled"):
            await env.client.complete_callback(token, {"value": 1})
        entry = next(e for e in await handle.history() if e.kind == "callback")
        assert (entry.status, entry.callback and entry.callback.outcome) == ("cancelled", "cancelled")
        handle, token = await _started(env, "cb-race", "fast")
        await env.client.complete_callback(token, {"value": 5})
        await env.run_until_idle()
        assert (await handle.state()).outcome == "paid: Result 5"


async def test_callbacks_in_join_branches_are_completed_in_any_order() -> None:
    async with TestEnv(registry) as env:
        handle, _ = await _started(env, "cb-join")
        history = await handle.history()
        tokens = {e.name: e.callback.token for e in history if e.kind == "callback" and e.callback}
        assert set(tokens) == {"a", "b"}
        await env.client.complete_callback(tokens["b"], {"value": 2})
        await env.run_until_idle()
        assert (await handle.status()).workflow == "sleeping"
        await env.client.fail_callback(tokens["a"], "Nope", "no")
        await env.run_until_idle()
        assert (await handle.state()).outcome.startswith("CallbackFailedError") and \
            (await handle.state()).outcome.endswith(" / Result 2")


async def test_the_callback_is_stored_before_a_step_after_it_runs_even_beside_a_running_step() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("cb-beside", ["k"])
        await handle.status()
        async with env.running():
            await asyncio.wait_for(GATE["started"].wait(), 30)  # the slow step runs; ctx.callback waits for it
            for _ in range(50):  # to end before it commits: however long the others get to run meanwhile
                await asyncio.sleep(0)
            assert SAW_RECORD == [] and env.store.callbacks == {}  # so nothing could hand the token out yet
            GATE["slow"].set()
            await env.run_until_idle()
        assert SAW_RECORD == [True]  # when the hand-out step ran, the callback was stored
        token = (await handle.state()).tokens[0]
        await env.client.complete_callback(token, {"value": 9})
        await env.run_until_idle()
        assert (await handle.state()).outcome == "slow done / Result 9"


async def test_a_completion_arriving_while_the_wake_up_waits_in_process_is_taken_at_once() -> None:
    async with TestEnv(registry) as env:
        handle = env.client.get_or_create("cb-in-process", ["k"])
        await handle.status()
        async with env.running():
            while not (await handle.state()).tokens:  # committed before the slow step started
                await asyncio.sleep(0.01)
            token = (await handle.state()).tokens[0]
            await env.client.complete_callback(token, {"value": 4})  # cb.result() waits beside the slow step
            await asyncio.wait_for(GATE["noted"].wait(), 5)  # taken while the slow step still runs
            GATE["slow"].set()
            await env.run_until_idle()
        assert (await handle.state()).outcome == "slow done / Result 4"
        first = next(r for r in env.reports if r.ref == handle.ref)
        assert first.outcome == "completed"  # the wake-up that was running took the completion


async def test_the_workflow_ending_cancels_its_open_callbacks() -> None:
    async with TestEnv(registry) as env:
        handle, token = await _started(env, "cb-ends")
        assert (await handle.status()).workflow == "completed"
        assert (await env.client.callback_status(token)).status == "cancelled"
        with pytest.raises(CallbackExpiredError):
            await env.client.complete_callback(token, "late")


async def test_a_deleted_or_recreated_actor_refuses_its_old_callbacks() -> None:
    async with TestEnv(registry) as env:
        handle, token = await _started(env, "cb-basic")
        await handle.delete()
        with pytest.raises(CallbackExpiredError, match="no longer exists"):
            await env.client.complete_callback(token, {"value": 1})
        env.clock.advance(1)  # (a re-created actor is told apart from the deleted one by its creation time)
        again, fresh = await _started(env, "cb-basic")  # the same key: a new actor, a new callback
        assert fresh != token
        with pytest.raises(CallbackExpiredError, match="no longer exists"):
            await env.client.complete_callback(token, {"value": 1})
        assert env.store.inbox_ids(again.ref) == []


async def test_a_completion_for_a_failed_workflow_waits_for_its_resume() -> None:
    async with TestEnv(registry) as env:
        handle, token = await _started(env, "cb-failing")
        assert (await handle.status()).workflow == "failed"
        assert (await env.client.complete_callback(token, {"value": 8})).status == "accepted"  # held
        await env.run_until_idle()
        assert len(env.store.inbox_ids(handle.ref)) == 1
        RESUMED.append(True)
        await handle.resume()
        await env.run_until_idle()
        assert (await handle.state()).outcome == "Result 8"


async def test_a_terminated_actor_refuses_its_callbacks() -> None:
    async with TestEnv(registry) as env:
        handle, token = await _started(env, "cb-basic")
        await handle.terminate("no longer needed")
        with pytest.raises(CallbackExpiredError, match="terminated"):
            await env.client.complete_callback(token, {"value": 1})


async def test_a_completion_with_the_right_id_but_not_the_token_is_not_taken() -> None:
    async with TestEnv(registry) as env:
        handle, token = await _started(env, "cb-basic")
        callback_id = hashlib.sha256(token.encode()).hexdigest()[:32]
        forged = InboxMessage(id=f"dormant:callback:{callback_id}", queue="done", kind="callback",
                              created_at=env.now(), body={"token_hash": hashlib.sha256(b"another token").hexdigest(),
                                    "outcome": "completed", "result": {"value": 666}})
        await env.store.enqueue(handle.ref, forged)  # (written behind the API's back)
        await env.service.transport.wake(handle.ref)
        await env.run_until_idle()
        assert (await handle.status()).workflow == "sleeping"
        assert (await handle.state()).outcome == ""


def _completion_ids(token: str) -> tuple[str, str]:
    """The completion id of a callback opened now, and the one it had before (issue 26): `callback-<id>`."""
    identity = hashlib.sha256(token.encode()).hexdigest()[:32]
    return f"dormant:callback:{identity}", f"callback-{identity}"


async def _refused_everywhere(handle: Any, taken: str) -> None:
    """A send and a batch under `taken` are refused, naming the rule and never the id."""
    with pytest.raises(InvalidMessageIdError, match="Dormant's own") as refused:
        await handle.send("note", {"x": 1}, message_id=taken)
    assert taken not in str(refused.value)
    with pytest.raises(InvalidMessageIdError, match=r"^message 1 of the batch: ") as refused:
        await handle.send_many("note", [{"a": 1}, {"b": 2}], message_ids=["fine", taken])
    assert taken not in str(refused.value)


async def test_a_send_cannot_take_a_callbacks_completion_id() -> None:
    async with TestEnv(registry) as env:
        handle, token = await _started(env, "cb-noted")
        new, old = _completion_ids(token)
        before = _dump(env)
        for taken in (new, old, "dormant:anything", "callback-" + "0" * 32):  # the namespace, not only these
            await _refused_everywhere(handle, taken)
        assert _dump(env) == before  # nothing stored, nothing sent
        for near in ("callback-" + "A" * 32, "callback-" + "a" * 31, "Dormant:callback:x", "x-dormant:1"):
            await handle.send("note", {"near": near}, message_id=near)  # outside the namespace: ordinary ids
        assert (await env.client.complete_callback(token, {"value": 7})).status == "accepted"
        assert env.store.inbox_ids(handle.ref)[-1] == new
        await env.run_until_idle()
        assert (await handle.state()).outcome == "Result 7"


async def test_a_callback_opened_before_completion_ids_were_recorded_still_completes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async with TestEnv(registry) as env:
        with monkeypatch.context() as patch:  # opened as the code before did: no completion id recorded
            patch.setattr("dormant.workflow.callbacks.message_id", lambda callback: None)
            handle, token = await _started(env, "cb-noted")
        new, old = _completion_ids(token)
        record = _record_of(env, token)
        del record["completion_id"]  # the lookup record as it was written then
        entry = next(e for e in await handle.history() if e.kind.value == "callback")
        assert entry.callback is not None and entry.callback.completion_id is None
        for taken in (new, old):
            await _refused_everywhere(handle, taken)
        assert (await env.client.complete_callback(token, {"value": 5})).status == "accepted"
        assert env.store.inbox_ids(handle.ref) == [old]  # the id the workflow's code then looks for
        assert (await env.client.complete_callback(token, {"value": 5})).status == "accepted"  # a retry: the same
        with pytest.raises(CallbackCompletedError):
            await env.client.complete_callback(token, {"value": 6})
        await env.run_until_idle()
        assert (await handle.state()).outcome == "Result 5"
        assert (await env.client.complete_callback(token, {"value": 5})).status == "completed"
