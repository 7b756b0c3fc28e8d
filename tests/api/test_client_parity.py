"""ONE client test suite, run with the in-process client and with the HTTP client (uvicorn on 127.0.0.1
serving dormant.http.app over the same TestEnv): every assertion holds for both, so both behave the same."""

from __future__ import annotations

import asyncio

import pytest

from dormant import (
    InvalidKeyError,
    InvalidMessageError,
    UnknownActionError,
    UnknownActorError,
    UnknownQueueError,
    WorkflowContext,
    actor,
    setup,
)
from dormant.actor import Registry
from dormant.testing import TestEnv
from dormant.workflow.history import EntryKind, EntryStatus, WorkflowState
from tests.api.apps import GATE, AccountState, Deposit, account, desk_registry, registry
from tests.api.conftest import Connect


async def test_sends_reach_the_workflow_and_state_is_the_state_model(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        handle = client.get_or_create("account", ["alice"])
        first = await handle.send("deposit", {"amount": 5})
        second = await handle.send("deposit", Deposit(amount=7, note="pydantic body"))
        assert (first.status, second.status) == ("queued", "queued")
        assert first.id and second.id and first.id != second.id
        await env.run_until_idle()
        state = await handle.state()
        assert isinstance(state, AccountState)
        assert state == AccountState(owner="", balance=12, entries=[5, 7])


async def test_send_and_wait_returns_the_response_or_times_out(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        handle = client.get_or_create("account", ["alice"])
        await handle.send("deposit", {"amount": 10})
        taken = await handle.send("withdraw", {"amount": 4}, wait=True, timeout=5)
        assert (taken.status, taken.response) == ("completed", {"ok": True, "balance": 6})
        refused = await handle.send("withdraw", {"amount": 100}, wait=True, timeout=5)
        assert (refused.status, refused.response) == ("completed", {"ok": False, "balance": 6})

        GATE.hang = True  # the work step never finishes: nobody completes the request
        hung = client.get_or_create("hanger", ["h"])
        waiter = asyncio.create_task(hung.send("jobs", {"value": 1}, wait=True, timeout=0.2))
        await GATE.entered.wait()  # the workflow took the request (completable) and works on it
        await asyncio.sleep(0.2)  # the HTTP client's own deadline is real time: let it pass too
        assert not waiter.done()  # the wait follows the env's clock, which stands still
        env.clock.advance(0.2)  # move it without waiting for the hung step (env.advance would wait for it)
        result = await waiter
        assert result.status == "timedOut" and result.response is None and result.id


async def test_a_wait_ends_at_once_when_no_answer_will_come(connect: Connect) -> None:
    async with TestEnv(desk_registry()) as env:
        client = await connect(env)
        desk = client.get_or_create("desk", ["d"])
        noted = await asyncio.wait_for(desk.send("notes", {"amount": 1}, wait=True, timeout=20), 10)
        assert (noted.status, noted.response, noted.workflow) == ("received", None, None)
        failed = await asyncio.wait_for(desk.send("orders", {"amount": 500}, wait=True, timeout=20), 10)
        assert (failed.status, failed.workflow) == ("received", WorkflowState.FAILED)
        held = await asyncio.wait_for(desk.send("notes", {"amount": 2}, wait=True, timeout=20), 10)
        assert (held.status, held.workflow) == ("queued", WorkflowState.FAILED)
        assert (await desk.state()).entries == [1]


async def test_a_repeated_message_id_is_processed_once_and_answered_again(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        handle = client.get_or_create("account", ["alice"])
        one = await handle.send("deposit", {"amount": 5}, message_id="dep-1")
        two = await handle.send("deposit", {"amount": 5}, message_id="dep-1")
        assert one.id == two.id == "dep-1"
        first = await handle.send("withdraw", {"amount": 2}, wait=True, timeout=5, message_id="wd-1")
        again = await handle.send("withdraw", {"amount": 2}, wait=True, timeout=5, message_id="wd-1")
        assert first.response == again.response == {"ok": True, "balance": 3}
        await env.run_until_idle()
        assert (await handle.state()).entries == [5, -2]


async def test_actions_take_arguments_and_return_their_values(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        handle = client.get_or_create("account", ["alice"])
        assert await handle.call("add", 5) == 5
        assert await handle.add(2, "sugar") == 7
        state = await handle.get_state()
        assert isinstance(state, AccountState) and state.entries == [5, 2]
        with pytest.raises(TypeError):
            await handle.call("add")  # missing argument
        assert (await handle.state()).balance == 7


async def test_rejected_requests_raise_and_create_nothing(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        handle = client.get_or_create("account", ["nobody"])
        with pytest.raises(UnknownQueueError):
            await handle.send("no-such-queue", {"amount": 1})
        with pytest.raises(InvalidMessageError) as invalid:
            await handle.send("deposit", {"amount": "lots"})
        assert [e["loc"] for e in invalid.value.errors] in ([("amount",)], [["amount"]])
        with pytest.raises(InvalidMessageError):
            await handle.send("deposit", {"amount": -1})
        with pytest.raises(UnknownActionError):
            await handle.call("no_such_action")
        with pytest.raises(UnknownActorError):
            client.get_or_create("no-such-actor", ["x"])
        for bad_key in ([], [""], ["x" * 513]):
            with pytest.raises(InvalidKeyError):
                client.get_or_create("account", bad_key)
        assert env.store.actor_ids() == []


async def test_input_reaches_on_create_whatever_the_first_request(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        bob = client.get_or_create("account", ["bob"], input={"owner": "Bob", "opening": 100})
        state = await bob.state()  # a read as the first request creates the actor with its input
        assert (state.owner, state.balance) == ("Bob", 100)
        carol = client.get_or_create("account", ["carol"], input={"owner": "Carol", "opening": 50})
        await carol.send("deposit", {"amount": 1})
        await env.run_until_idle()
        state = await carol.state()
        assert (state.owner, state.balance) == ("Carol", 51)
        again = client.get_or_create("account", ["bob"], input={"owner": "Mallory", "opening": 0})
        assert (await again.state()).owner == "Bob"  # get-or-create: an existing actor keeps its input


async def test_status_shows_queues_deadline_retry_time_and_error(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        handle = client.get_or_create("sleeper", ["s"])
        await handle.status()
        await env.run_until_idle()
        status = await handle.status()
        assert (status.workflow, status.waiting_for.queues) == (WorkflowState.SLEEPING, ["go"])
        await handle.send("go", 1)
        await env.run_until_idle()
        status = await handle.status()
        assert status.waiting_for.deadline == env.now() + 3600 and status.waiting_for.queues == []
        await env.advance(3600)
        status = await handle.status()
        assert status.waiting_for.retry_at is not None and status.waiting_for.retry_at > env.now()
        await env.advance(600)
        status = await handle.status()
        assert status.workflow == WorkflowState.FAILED
        assert status.error is not None and status.error.startswith("StepExhaustedError")


async def test_history_lists_the_entries_in_order(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        handle = client.get_or_create("account", ["alice"])
        await handle.send("deposit", {"amount": 5})
        await env.run_until_idle()
        history = await handle.history()
        assert [(e.location, e.kind) for e in history] == [
            ("account-loop", EntryKind.LOOP),
            ("account-loop/~0/wait-command", EntryKind.MESSAGE),
            ("account-loop/~0/apply", EntryKind.STEP),
        ]
        assert history[2].status == EntryStatus.COMPLETED and history[2].output == {"ok": True, "balance": 5}


async def test_events_come_in_order_from_any_cursor(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        handle = client.get_or_create("account", ["alice"])
        for amount in (1, 2, 3):
            await handle.send("deposit", {"amount": amount})
        await env.run_until_idle()
        records = [r async for r in handle.events(after=0, follow=False)]
        assert [(r.seq, r.name, r.payload) for r in records] == [
            (1, "changed", {"balance": 1, "kind": "deposit"}),
            (2, "changed", {"balance": 3, "kind": "deposit"}),
            (3, "changed", {"balance": 6, "kind": "deposit"}),
        ]
        assert [r.seq async for r in handle.events(after=2, follow=False)] == [3]

        async def first_two_new() -> list[int]:
            seen = []
            async for record in handle.events(after=3, follow=True):
                seen.append(record.payload["balance"])
                if len(seen) == 2:
                    return seen
            return seen

        follower = asyncio.create_task(first_two_new())
        await handle.send("deposit", {"amount": 4})
        await handle.send("withdraw", {"amount": 10})
        assert await asyncio.wait_for(follower, 10) == [10, 0]


async def test_multi_part_keys_with_any_characters_address_one_actor(connect: Connect) -> None:
    key = ["tenant/1", "a,b~c", "José", "..", "100% sure", "."]
    async with TestEnv(registry) as env:
        client = await connect(env)
        handle = client.get_or_create("account", key)
        await handle.send("deposit", {"amount": 9})
        await env.run_until_idle()
        assert (await handle.state()).balance == 9
        in_process = env.client.get_or_create("account", key)
        assert (await in_process.state()).balance == 9
        assert env.store.actor_ids() == [in_process.ref.id]


def _account_v2() -> Registry:
    """The account actor after a careless deploy: its loop got renamed."""
    changed = actor("account", state=AccountState, queues=dict(account.queues), events=dict(account.events))

    @changed.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def iteration(loop: WorkflowContext) -> None:
            await loop.queue.next("wait-command", names=["deposit", "withdraw"], completable=True)

        await ctx.loop("renamed-loop", iteration)

    return setup(changed)


async def test_status_reports_a_divergence_diff(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        await env.client.get_or_create("account", ["alice"]).send("deposit", {"amount": 5})
        await env.run_until_idle()
    async with TestEnv(_account_v2(), store=env.store) as deployed:
        client = await connect(deployed)
        await deployed.run_until_idle()
        status = await client.get_or_create("account", ["alice"]).status()
        assert status.workflow == WorkflowState.DIVERGED
        assert status.divergence is not None
        assert "account-loop" in (status.divergence.recorded or "")
        assert "renamed-loop" in (status.divergence.requested or "")
        assert status.divergence.code_site and "test_client_parity.py" in status.divergence.code_site
        assert status.error == status.divergence.message
