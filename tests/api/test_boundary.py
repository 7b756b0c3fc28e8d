"""Issue 9, in process and over HTTP: typed actions and state, nothing stored that cannot be stored,
idempotency keys that compare the request, finished actors. Every refusal leaves the store as it was."""

from __future__ import annotations

from typing import Any

import pytest

from dormant.errors import (
    ActorFinishedError,
    IdempotencyConflictError,
    InvalidArgumentsError,
    InvalidKeyError,
)
from dormant.http.app import create_app
from dormant.http.client import HttpClient
from dormant.settings import Settings
from dormant.testing import TestEnv
from dormant.workflow.errors import InvalidJsonError, InvalidStateError
from dormant.workflow.history import WorkflowState
from tests.api.apps import registry
from tests.api.support import dump_store, raw_request, serve


async def test_a_wrong_typed_action_argument_is_refused_before_anything_is_stored() -> None:
    async with TestEnv(registry) as env:
        notes = env.client.get_or_create("notes", ["n"])
        before = dump_store(env.store)
        with pytest.raises(InvalidArgumentsError, match=r'argument "note" \(position 1\) is invalid'):
            await notes.call("add_note", [1])
        with pytest.raises(InvalidArgumentsError, match="missing: note"):
            await notes.call("add_note")
        assert dump_store(env.store) == before == {"actors": {}, "early": {}}  # not even created
        assert await notes.call("add_note", "ok") == 1
        assert (await notes.state()).notes == ["ok"]


async def test_the_issue_case_add_note_with_a_list_leaves_the_actor_healthy() -> None:
    async with TestEnv(registry) as env, serve(create_app(registry, Settings(dev=True), service=env.service)) as url:
        response = await raw_request(url, "POST", "/actors/notes/n/actions/add_note", body=b"[[1]]",
                                     headers={"Content-Type": "application/json"})
        assert response.status == 422 and response.json()["error"]["code"] == "invalid_arguments"
        ok = await raw_request(url, "POST", "/actors/notes/n/actions/add_note", body=b'["fine"]',
                               headers={"Content-Type": "application/json"})
        assert ok.status == 200
        state = await raw_request(url, "GET", "/actors/notes/n/state")
        assert (state.status, state.json()) == (200, {"notes": ["fine"]})


async def test_an_action_that_breaks_the_state_commits_nothing() -> None:
    async with TestEnv(registry) as env:
        notes = env.client.get_or_create("notes", ["n"])
        await notes.call("add_note", "first")
        before = dump_store(env.store)
        with pytest.raises(InvalidStateError, match=r"notes\.1: Input should be a valid string"):
            await notes.call("append_raw", 42)
        assert dump_store(env.store) == before
        assert (await notes.state()).notes == ["first"]


async def test_an_action_breaking_the_state_over_http_is_action_failed_and_the_state_loads() -> None:
    async with TestEnv(registry) as env, serve(create_app(registry, Settings(dev=True), service=env.service)) as url:
        response = await raw_request(url, "POST", "/actors/notes/n/actions/append_raw", body=b"[{\"x\": 1}]",
                                     headers={"Content-Type": "application/json"})
        error = response.json()["error"]
        assert (response.status, error["code"]) == (500, "action_failed")
        assert "InvalidStateError" in error["message"] and "notes.0" in error["message"]
        state = await raw_request(url, "GET", "/actors/notes/n/state")
        assert (state.status, state.json()) == (200, {"notes": []})


async def test_a_step_that_corrupts_the_state_fails_its_attempts_then_the_workflow_knows() -> None:
    async with TestEnv(registry) as env:
        notes = env.client.get_or_create("notes", ["n"])
        await notes.send("raw", 5)  # the step appends it to a list[str]
        await env.run_until_idle()
        await env.advance(1)  # the retry (max_retries=1)
        status = await notes.status()
        assert status.workflow is WorkflowState.FAILED
        assert status.error is not None and "StepExhaustedError" in status.error
        assert "notes.0: Input should be a valid string" in status.error
        assert (await notes.state()).notes == []  # stored state always loads
        assert env.failures == []  # the wake-ups themselves never failed
        history = {e.location: e for e in await notes.history()}
        step = history["notes-loop/~0/append"]
        assert step.attempts == 2 and step.error is not None and step.error.type == "InvalidStateError"


async def test_a_valid_message_after_a_corrupting_one_is_not_affected_in_a_fresh_actor() -> None:
    async with TestEnv(registry) as env:
        notes = env.client.get_or_create("notes", ["good"])
        await notes.send("note", {"note": "hi"})
        await env.run_until_idle()
        assert (await notes.state()).notes == ["hi"]


async def test_a_state_that_outgrows_the_integer_limit_fails_the_step_not_the_wake_up() -> None:
    async with TestEnv(registry) as env:
        counter = env.client.get_or_create("workflow-counter", ["big"])
        top = 9 * 10 ** 999  # 1000 digits: the most a stored integer may have
        await counter.send("counter", {"delta": top})
        await counter.send("counter", {"delta": top})  # the sum has 1001 digits
        await env.run_until_idle()
        await env.advance(60)  # the step's retries
        status = await counter.status()
        assert status.workflow is WorkflowState.FAILED
        assert status.error is not None and "more than 1000 digits" in status.error and "$.value" in status.error
        assert (await counter.state()).value == top  # the last committed state loads
        assert env.failures == []


@pytest.mark.parametrize(("body", "rule"), [
    ({"x": "\ud800"}, "lone surrogate"),
    ({"x": float("nan")}, "NaN"),
    ({"x": float("inf")}, "NaN and Infinity"),
    ({"x": 10 ** 1000}, "more than 1000 digits"),
    ({"\udfff": 1}, "object key contains a lone surrogate"),
])
async def test_in_process_sends_of_unstorable_values_are_refused(body: Any, rule: str) -> None:
    async with TestEnv(registry) as env:
        with pytest.raises(InvalidJsonError, match=rule) as caught:
            await env.client.get_or_create("notes", ["n"]).send("raw", body)
        assert "\ud800" not in str(caught.value)
        assert dump_store(env.store) == {"actors": {}, "early": {}}


async def test_unstorable_actor_input_and_action_arguments_are_refused() -> None:
    async with TestEnv(registry) as env:
        with pytest.raises(InvalidJsonError, match=r"the actor's input .* \(at \$\.name\)"):
            await env.client.get_or_create("notes", ["n"], input={"name": "\ud800"}).status()
        with pytest.raises(InvalidJsonError):  # a str argument, but not storable... nor runnable
            await env.client.get_or_create("notes", ["n"]).call("add_note", "\ud800")
        assert dump_store(env.store) == {"actors": {}, "early": {}}


async def test_a_step_result_that_cannot_be_stored_fails_the_attempt() -> None:
    from dormant import StepContext, WorkflowContext, actor, setup

    bad = actor("bad-result")

    @bad.workflow
    async def run(ctx: WorkflowContext) -> None:
        def produce(s: StepContext) -> float:
            return float("nan")

        await ctx.step("produce", produce, max_retries=0)

    async with TestEnv(setup(bad)) as env:
        handle = env.client.get_or_create("bad-result", ["x"])
        await handle.status()
        await env.run_until_idle()
        status = await handle.status()
        assert status.workflow is WorkflowState.FAILED and "NaN" in str(status.error)
        assert env.failures == []


async def test_nesting_at_the_limit_is_stored_and_one_more_level_is_refused() -> None:
    async with TestEnv(registry) as env:
        deep = env.client.get_or_create("deep", ["d"])
        value: Any = []
        for _ in range(63):
            value = [value]  # 64 levels in all
        await deep.send("any", value)
        await env.run_until_idle()
        assert (await deep.state()).seen == 1
        with pytest.raises(InvalidJsonError, match="deeper than 64"):
            await deep.send("any", [value])


# -- idempotency keys --------------------------------------------------------------------------------------
async def test_an_idempotency_key_is_the_same_message_only_for_the_same_request() -> None:
    async with TestEnv(registry) as env:
        notes = env.client.get_or_create("notes", ["n"])
        first = await notes.send("note", {"note": "hello"}, message_id="k1")
        again = await notes.send("note", {"note": "hello"}, message_id="k1")
        assert (first.id, again.id) == ("k1", "k1")
        before = dump_store(env.store)
        with pytest.raises(IdempotencyConflictError):
            await notes.send("note", {"note": "other"}, message_id="k1")
        with pytest.raises(IdempotencyConflictError):
            await notes.send("raw", {"note": "hello"}, message_id="k1")
        assert dump_store(env.store) == before
        await env.run_until_idle()
        assert (await notes.state()).notes == ["hello"]
        # consumed now: the same request is still the same message, another still a conflict
        assert (await notes.send("note", {"note": "hello"}, message_id="k1")).id == "k1"
        with pytest.raises(IdempotencyConflictError):
            await notes.send("note", {"note": "other"}, message_id="k1")
        await env.run_until_idle()
        assert (await notes.state()).notes == ["hello"]


async def test_the_same_key_over_http_is_202_with_the_same_id_and_another_body_is_409() -> None:
    async with TestEnv(registry) as env, serve(create_app(registry, Settings(dev=True), service=env.service)) as url:
        headers = {"Content-Type": "application/json", "Idempotency-Key": "pay-7"}
        first = await raw_request(url, "POST", "/actors/notes/n/queues/note", body=b'{"note": "a"}', headers=headers)
        same = await raw_request(url, "POST", "/actors/notes/n/queues/note", body=b'{ "note" : "a" }', headers=headers)
        other = await raw_request(url, "POST", "/actors/notes/n/queues/note", body=b'{"note": "b"}', headers=headers)
        assert (first.status, first.json()["id"]) == (202, "pay-7")
        assert (same.status, same.json()["id"]) == (202, "pay-7")
        assert (other.status, other.json()["error"]["code"]) == (409, "idempotency_conflict")
        assert "pay-7" not in other.json()["error"]["message"]


async def test_a_step_re_sending_with_its_derived_id_is_deduplicated_not_a_conflict() -> None:
    async with TestEnv(registry) as env:
        ref = env.service.ref("notes", ["n"])
        await env.service.send(ref, "note", {"note": "a"}, message_id="derived-1", derived_id=True)
        again = await env.service.send(ref, "note", {"note": "b"}, message_id="derived-1", derived_id=True)
        assert again.id == "derived-1"  # the first send stands, as for any re-run step
        await env.run_until_idle()
        assert (await env.client.get_or_create("notes", ["n"]).state()).notes == ["a"]


# -- finished actors ---------------------------------------------------------------------------------------
async def test_a_completed_workflow_refuses_sends_and_stores_nothing() -> None:
    async with TestEnv(registry) as env:
        finisher = env.client.get_or_create("finisher", ["f"])
        await finisher.send("go", 7)
        await env.run_until_idle()
        assert (await finisher.status()).workflow is WorkflowState.COMPLETED
        before = dump_store(env.store)
        with pytest.raises(ActorFinishedError, match="completed"):
            await finisher.send("go", 8)
        with pytest.raises(ActorFinishedError):
            await finisher.send("go", 8, wait=True, timeout=5)
        assert dump_store(env.store) == before


async def test_a_failed_workflow_holds_sends_and_answers_at_once_with_its_status() -> None:
    async with TestEnv(registry) as env, serve(create_app(registry, Settings(dev=True), service=env.service)) as url:
        breaker = env.client.get_or_create("breaker", ["b"])
        await breaker.send("go", 1)
        await env.run_until_idle()
        assert (await breaker.status()).workflow is WorkflowState.FAILED
        held = await breaker.send("go", 2, wait=True, timeout=30)  # returns at once, not after 30 s
        assert (held.status, held.workflow) == ("queued", WorkflowState.FAILED)
        assert env.store.inbox_ids(breaker.ref) == [held.id]  # stored: runs after an operator resumes it
        response = await raw_request(url, "POST", "/actors/breaker/b/queues/go?wait=true&timeout=20", body=b"3",
                                     headers={"Content-Type": "application/json"})
        assert response.status == 202 and response.json()["workflow"] == "failed"
        async with HttpClient(url, registry=registry) as client:
            result = await client.get_or_create("breaker", ["b"]).send("go", 4)
        assert result.workflow is WorkflowState.FAILED
        assert len(env.store.inbox_ids(breaker.ref)) == 3


def test_one_rule_says_which_states_take_messages() -> None:
    from dormant.runtime.send_rules import HOLDING_STATES, REFUSING_STATES, send_rule

    assert {state: send_rule(state) for state in WorkflowState} == {
        state: "refuse" if state in REFUSING_STATES else "hold" if state in HOLDING_STATES else "run"
        for state in WorkflowState}
    assert send_rule(WorkflowState.COMPLETED) == "refuse"
    assert {send_rule(WorkflowState.FAILED), send_rule(WorkflowState.DIVERGED)} == {"hold"}
    assert send_rule(WorkflowState.SLEEPING) == send_rule(WorkflowState.PENDING) == "run"


# -- keys --------------------------------------------------------------------------------------------------
def test_a_key_whose_storage_id_is_over_the_actor_id_limit_is_refused_in_process() -> None:
    """1,011 bytes: the `status` index's sort key `<status>#<actor id>` must fit DynamoDB's 1,024 (core.limits)."""
    from dormant.core.limits import ACTOR_ID
    from dormant.ports import ActorRef

    assert ACTOR_ID.maximum == 1011
    assert len(ActorRef(name="a", key=("k" * 500, "k" * 508)).id) == 1011  # the largest that works
    with pytest.raises(InvalidKeyError, match="1,011 bytes"):
        ActorRef(name="a", key=("k" * 500, "k" * 509))  # one past it
    with pytest.raises(InvalidKeyError, match="status"):
        ActorRef(name="a", key=("é" * 170,))  # 1,020 bytes percent-encoded
    with pytest.raises(InvalidKeyError, match="surrogate"):
        ActorRef(name="a", key=("\ud800",))


async def test_percent_escapes_that_are_not_utf8_never_name_an_actor() -> None:
    async with TestEnv(registry) as env, serve(create_app(registry, Settings(dev=True), service=env.service)) as url:
        for segment in ("a%FF", "a%FE", "a%C3", "%ED%A0%80"):  # the last: an encoded surrogate
            response = await raw_request(url, "PUT", f"/actors/notes/{segment}")
            assert (response.status, response.json()["error"]["code"]) == (400, "invalid_key"), segment
        ok = await raw_request(url, "PUT", "/actors/notes/Jos%C3%A9")  # valid UTF-8 escapes are fine
        assert ok.status == 201 and ok.json()["key"] == ["José"]
        assert env.store.actor_ids() == ["notes/Jos%C3%A9"]


async def test_in_memory_a_send_whose_inbox_write_failed_is_processed_by_its_wake_up() -> None:
    """TestEnv behaves as SQS does: the wake-up carries the message, and its wake-up stores what the send
    could not."""
    from dormant.errors import SendFailedError

    async with TestEnv(registry) as env:
        notes = env.client.get_or_create("notes", ["n"])
        await notes.call("add_note", "x")
        await env.run_until_idle()
        env.store.fail_call(2)  # the send's calls: read_summary, then enqueue
        with pytest.raises(SendFailedError) as failed:
            await notes.send("note", {"note": "y"}, message_id="m1")
        assert (failed.value.stored, failed.value.message_id) == (True, "m1")
        await env.run_until_idle()  # nobody sends it again
        assert (await notes.state()).notes == ["x", "y"]
        assert (await notes.send("note", {"note": "y"}, message_id="m1")).id == "m1"  # a retry: the same one
        await env.run_until_idle()
        assert (await notes.state()).notes == ["x", "y"]


def test_the_http_client_keeps_whether_a_failed_send_was_stored() -> None:
    import httpx

    from dormant.errors import SendFailedError
    from dormant.http.client import error_from_response

    body = {"error": {"code": "send_failed", "message": "the store failed, but ...",
                      "detail": {"id": "m-7", "stored": True}}}
    error = error_from_response(httpx.Response(503, json=body))
    assert isinstance(error, SendFailedError) and (error.message_id, error.stored) == ("m-7", True)
