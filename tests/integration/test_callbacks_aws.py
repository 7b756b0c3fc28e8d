"""Callbacks on the AWS stack: the lookup item (a partition of its own, keyed by the token's hash, in no index), what
each callback request costs in requests (a heartbeat wakes nothing), a crash between a commit and its lookup write
repaired by the next load, and hostile callback requests through the real app leaving the table as it was. On
DynamoDB Local + moto's SQS (AwsTestEnv), and the store's own repair on all three DynamoDB servers."""

from __future__ import annotations

import hashlib
import json
import zlib
from collections import Counter
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from dormant import Approval, CallbackError, StepContext, WorkflowContext, actor, callback, setup
from dormant.dynamodb.callbacks import CallbackItems
from dormant.dynamodb.keys import CALLBACK_PARTITION as PARTITION_PREFIX
from dormant.dynamodb.keys import CALLBACK_SK as SORT_KEY
from dormant.dynamodb.store import DynamoEventStore
from dormant.errors import StorageError
from dormant.http.app import create_app
from dormant.ports import ActorMeta, ActorRef
from dormant.settings import Settings
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import CallbackChange, WorkflowRecord
from tests.aws_env import AwsTestEnv
from tests.integration.conftest import watch


class Handed(BaseModel):
    token: str = ""
    outcome: str = ""


approval = actor("aws-approval", state=Handed, callbacks={"decision": callback(bool)})


@approval.workflow
async def approval_run(ctx: WorkflowContext) -> None:
    cb = await ctx.callback("decision", timeout=3600, heartbeat_timeout=600)

    def hand_out(s: StepContext) -> None:
        s.state.token = cb.token

    await ctx.step("hand-out", hand_out)
    try:
        outcome = f"approved={await cb.result()}"
    except CallbackError as error:
        outcome = type(error).__name__

    def record(s: StepContext) -> None:
        s.state.outcome = outcome

    await ctx.step("record", record)


registry = setup(approval)


async def _scan(env: AwsTestEnv) -> list[dict[str, Any]]:
    """Every item of the env's table (a test may scan; the code never does)."""
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": env.settings.table, "ConsistentRead": True}
    async with DynamoEventStore.connect(env.settings) as store:
        while True:
            page = await store.client.scan(**kwargs)
            items += page["Items"]
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _readable(item: dict[str, Any]) -> str:
    """An item as text, commit payloads decompressed."""
    return json.dumps({name: (zlib.decompress(value["B"]).decode() if "B" in value else value)
                       for name, value in item.items()})


async def _started(env: AwsTestEnv, key: str) -> tuple[Any, str]:
    handle = env.client.get_or_create("aws-approval", [key])
    await handle.status()
    await env.run_until_idle()
    return handle, (await handle.state()).token


def _delta(before: Counter[str], after: Counter[str]) -> dict[str, int]:
    return {name: after[name] - before[name] for name in after if after[name] != before[name]
            and not name.startswith(("sqs.ReceiveMessage", "sqs.GetQueueAttributes", "sqs.DeleteMessage"))}


async def test_the_lookup_item_is_a_partition_of_its_own_keyed_by_the_hash(aws_endpoints: dict[str, str]) -> None:
    async with AwsTestEnv(registry, settings=Settings(**aws_endpoints)) as env:
        handle, token = await _started(env, "order-1")
        hashed = hashlib.sha256(token.encode()).hexdigest()
        items = await _scan(env)
        lookups = [item for item in items if item["pk"]["S"].startswith(PARTITION_PREFIX)]
        assert [(i["pk"]["S"], i["sk"]["S"], i["st"]["S"]) for i in lookups] == [
            (PARTITION_PREFIX + hashed, SORT_KEY, "open")]
        assert not {"pq", "lt", "ls"} & set(lookups[0])  # in no index: found by GetItem, never listed or scanned
        # The token is in the actor's history (replays hand it out again) and in the state this workflow keeps it
        # in, nowhere else: not in the lookup item, not in any key.
        holding = {item["sk"]["S"] for item in items if token in _readable(item)}
        assert holding and all(sk.startswith("c#") for sk in holding), holding
        assert not any(token in item["pk"]["S"] or token in item["sk"]["S"] for item in items)
        await env.client.complete_callback(token, True)
        await env.run_until_idle()
        assert (await handle.state()).outcome == "approved=True"
        closed = [item for item in await _scan(env) if item["pk"]["S"] == PARTITION_PREFIX + hashed]
        assert closed[0]["st"]["S"] == "completed" and "expires_at" in closed[0]


async def test_what_each_callback_request_costs(aws_endpoints: dict[str, str]) -> None:
    async with AwsTestEnv(registry, settings=Settings(**aws_endpoints)) as env:
        handle, token = await _started(env, "order-2")
        await env.advance(10)
        before = Counter(env.meter.requests)
        await env.client.heartbeat_callback(token)  # one read, one conditional write: nothing sent, nobody woken
        assert _delta(before, env.meter.requests) == {"dynamodb.GetItem": 1, "dynamodb.UpdateItem": 1}
        before = Counter(env.meter.requests)
        await env.client.callback_status(token)
        assert _delta(before, env.meter.requests) == {"dynamodb.GetItem": 1}
        before = Counter(env.meter.requests)
        await env.client.complete_callback(token, False)
        # the lookup, the actor's status item, the wake-up (first), the inbox write: a send's path plus one read
        assert _delta(before, env.meter.requests) == {"dynamodb.GetItem": 2, "sqs.SendMessage": 1,
                                                      "dynamodb.PutItem": 1}
        await env.run_until_idle()
        assert (await handle.state()).outcome == "approved=False"


async def test_a_heartbeat_on_aws_moves_the_deadline_the_worker_then_reads(aws_endpoints: dict[str, str]) -> None:
    async with AwsTestEnv(registry, settings=Settings(**aws_endpoints)) as env:
        handle, token = await _started(env, "order-3")
        await env.advance(500)
        await env.client.heartbeat_callback(token)  # due at 1100 now
        await env.advance(200)  # the worker's wake-up at 600 reads the record and waits on
        status = await handle.status()
        assert (status.workflow, status.waiting_for.deadline) == ("sleeping", env.now() - 700 + 1100)
        await env.advance(401)
        assert (await handle.state()).outcome == "CallbackHeartbeatTimeoutError"


async def test_hostile_callback_requests_through_the_app_leave_the_table_as_it_was(
        aws_endpoints: dict[str, str]) -> None:
    async with AwsTestEnv(registry, settings=Settings(**aws_endpoints)) as env:
        _, token = await _started(env, "order-4")
        _, used = await _started(env, "order-5")
        await env.client.complete_callback(used, True)
        await env.run_until_idle()
        before = sorted(map(_readable, await _scan(env)))
        app = create_app(registry, Settings(auth_mode="iam", max_body_bytes=4096), service=env.service)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as outside:
            answers = [
                await outside.post("/callbacks/nope", json={"result": True}),
                await outside.post(f"/callbacks/dcb_{'Z' * 43}", json={"result": True}),
                await outside.post(f"/callbacks/{token}", json={"result": "not a bool, 4111 1111 1111 1111"}),
                await outside.post(f"/callbacks/{token}", content=b'{"result": "\\ud800"}',
                                   headers={"Content-Type": "application/json"}),
                await outside.post(f"/callbacks/{token}", json={"result": True, "note": "x" * 5000}),
                await outside.post(f"/callbacks/{token}", json={"heartbeat": True, "result": True}),
                await outside.post(f"/callbacks/{used}", json={"result": False}),
                await outside.post(f"/callbacks/{used}", json={"heartbeat": True})]
        assert [(a.status_code, a.json()["error"]["code"]) for a in answers] == [
            (400, "invalid_callback_token"), (404, "callback_not_found"), (422, "invalid_body"), (400, "invalid_json"),
            (413, "payload_too_large"), (422, "invalid_request"), (409, "callback_completed"),
            (409, "callback_completed")]
        assert not any(token in a.text or used in a.text or "4111" in a.text for a in answers)
        await env.run_until_idle()
        assert sorted(map(_readable, await _scan(env))) == before


async def test_a_webhook_and_an_approval_page_on_aws_where_the_page_s_get_reads_one_item_and_writes_nothing(
        aws_endpoints: dict[str, str]) -> None:
    signoff = actor("aws-signoff", state=Handed, callbacks={"decision": callback(Approval, description="Ship?")})

    @signoff.workflow
    async def signoff_run(ctx: WorkflowContext) -> None:
        cb = await ctx.callback("decision", timeout=3600)

        def hand_out(s: StepContext) -> None:
            s.state.token = cb.token

        await ctx.step("hand-out", hand_out)
        decided = await cb.result()

        def record(s: StepContext) -> None:
            s.state.outcome = f"approved={decided.approved}"

        await ctx.step("record", record)

    both = setup(approval, signoff)
    async with AwsTestEnv(both, settings=Settings(**aws_endpoints)) as env:
        handle, token = await _started(env, "order-6")
        app = create_app(both, Settings(auth_mode="iam", max_body_bytes=4096), service=env.service)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as outside:
            # the provider's own JSON is the result whole: here a bare `true`
            answer = await outside.post(f"/callbacks/{token}/webhook", content=b"true",
                                        headers={"Content-Type": "application/json"})
            assert answer.status_code == 202, answer.text
            await env.run_until_idle()
            assert (await handle.state()).outcome == "approved=True"
            person = env.client.get_or_create("aws-signoff", ["s-1"])
            await person.status()
            await env.run_until_idle()
            link = f"/callbacks/{(await person.state()).token}/approve"
            before, items = Counter(env.meter.requests), sorted(map(_readable, await _scan(env)))
            page = await outside.get(link)
            assert page.status_code == 200 and "Ship?" in page.text
            assert _delta(before, env.meter.requests) == {"dynamodb.GetItem": 1}  # the lookup, nothing else
            assert sorted(map(_readable, await _scan(env))) == items
            decided = await outside.post(link, data={"decision": "reject"})
            assert decided.status_code == 200 and "Rejected" in decided.text
        await env.run_until_idle()
        assert (await person.state()).outcome == "approved=False"


def _change(state: str) -> CallbackChange:
    return CallbackChange(token_hash="a" * 64, callback_id="a" * 32, name="decision", location="decision",
                          state=state, deadline=2e9, at=1.8e9)


async def test_a_crash_between_a_commit_and_its_lookup_write_is_repaired_by_the_next_load(
        store: DynamoEventStore, monkeypatch: pytest.MonkeyPatch) -> None:
    actor_ref = ActorRef(name="aws-approval", key=("k",))
    assert await store.create(actor_ref, ActorMeta(name="aws-approval", key=("k",), created_at=1.8e9), {},
                              WorkflowRecord(), [])

    async def crash(self: CallbackItems, ref: ActorRef, head: Any) -> None:
        if head.side.callbacks:
            raise StorageError("the worker died right after its commit")

    original = CallbackItems.write
    monkeypatch.setattr(CallbackItems, "write", crash)
    with pytest.raises(StorageError):
        await store.commit(actor_ref, 1, CommitDraft(upserts=[], deleted_prefixes=[], state={"n": 1},
                                                     consumed_ids=[], responses={}, events=[], workflow=None,
                                                     committed_at=1.8e9, callbacks=[_change("open")]))
    monkeypatch.setattr(CallbackItems, "write", original)
    assert await store.read_callback("a" * 64) is None  # the commit is durable, its lookup item is not written
    survivor = DynamoEventStore(store.client, store.settings)  # the next process to load it
    log = watch(store.client)
    snapshot = await survivor.load(actor_ref)
    assert snapshot is not None and snapshot.version == 2
    assert log.counts()["PutItem"] == 1  # the lookup item, written by the load's settling
    record = await store.read_callback("a" * 64)
    assert record is not None and (record.state, record.version, record.actor) == ("open", 2, "aws-approval")
