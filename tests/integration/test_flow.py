"""Flow-control slots on real servers (what a slot does, on every backend, is tests/contract/test_slots.py's): two
worker processes competing for one limit's slots over DynamoDB Local and moto (conditional writes under real
concurrency); a kill -9'd holder whose slot frees itself at its lease's end; what one acquire and release cost in
requests; and an actor waiting for a dead holder's slot under AwsTestEnv."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from dormant import Limit, StepContext, WorkflowContext, actor, setup
from dormant.core.slots import LimitRule, SlotLease, SlotRefusal, SlotRequest
from dormant.dynamodb.slots import holder_hash
from dormant.dynamodb.store import DynamoEventStore
from dormant.ports import ActorRef
from dormant.settings import Settings
from tests.aws_env import AwsTestEnv
from tests.contract.support import BOTH, RATE, SLOTS, T0, ask
from tests.integration.conftest import server_for, shared_session, store_settings, watch
from tests.integration.slot_worker import Holds, contend

ROOT = Path(__file__).resolve().parents[2]


async def test_what_an_acquire_and_a_release_cost_in_requests(dynamodb_local_server: str) -> None:
    async with DynamoEventStore.connect(store_settings(dynamodb_local_server), session=shared_session()) as store:
        await store.create_table()
        log = watch(store.client)
        costs: dict[str, dict[str, int]] = {}

        async def measure(what: str, call: Any) -> Any:
            log.clear()
            result = await call
            costs[what] = dict(log.counts())
            return result

        lease = await measure("acquire (concurrency)", store.acquire_slot(ask(SLOTS, "a")))
        await measure("release, nobody waiting", store.release_slot(lease, T0 + 1))
        await measure("acquire (rate)", store.acquire_slot(ask(RATE, "a")))
        await measure("acquire (both)", store.acquire_slot(ask(BOTH, "a")))
        held = [await store.acquire_slot(ask(SLOTS, h)) for h in ("x", "y")]
        await measure("refusal (concurrency)", store.acquire_slot(ask(SLOTS, "w", T0 + 2)))
        await measure("renewal", store.renew_slot(held[0], T0 + 90))
        await measure("release, waking a waiter", store.release_slot(held[0], T0 + 3))
        await measure("acquire after waiting", store.acquire_slot(ask(SLOTS, "w", T0 + 3, since=T0 + 2,
                                                                         queued=True)))
        await store.client.delete_table(TableName=store.table)
    assert costs == {
        "acquire (concurrency)": {"Query": 1, "PutItem": 1},
        "release, nobody waiting": {"DeleteItem": 1, "Query": 1},
        "acquire (rate)": {"Query": 1, "PutItem": 1},
        "acquire (both)": {"Query": 2, "PutItem": 2},
        "refusal (concurrency)": {"Query": 2, "PutItem": 1},
        "renewal": {"PutItem": 1},
        "release, waking a waiter": {"DeleteItem": 2, "Query": 1},
        "acquire after waiting": {"Query": 1, "PutItem": 1, "DeleteItem": 1},
    }


def _settings(endpoint: str) -> Settings:
    return store_settings(endpoint)


def _crossed(mine: list[tuple[float, float]], theirs: list[tuple[float, float]]) -> bool:
    """Whether a hold of one process overlapped a hold of the other."""
    return any(start < other_end and other_start < end for start, end in mine for other_start, other_end in theirs)


def _overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one moment."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals],
                    key=lambda event: (event[0], event[1]))
    open_now = peak = 0
    for _, delta in events:
        open_now += delta
        peak = max(peak, open_now)
    return peak


@pytest.mark.parametrize("server_name", ["dynamodb_local", "moto"])
async def test_two_worker_processes_never_hold_more_slots_than_the_limit(request: pytest.FixtureRequest,
                                                                         server_name: str, tmp_path: Path) -> None:
    """Both processes hold until the other holds too, then each hold until the limit is full (slot_worker.Holds): the
    competition is forced, so the limit is tested where it binds whatever the machine's speed."""
    server = server_for(request, server_name)
    settings = _settings(server.endpoint)
    concurrency, workers, cycles = 3, 6, 8
    log = tmp_path / "holds.log"
    async with DynamoEventStore.connect(settings, session=shared_session()) as store:
        await store.create_table()
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.integration.slot_worker", settings.model_dump_json(), "contend",
            str(concurrency), "stripe", str(workers), str(cycles), str(2 * workers), str(log), cwd=ROOT,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert child.stdout is not None
        ready = await asyncio.wait_for(child.stdout.readline(), 60)
        assert ready == b"ready\n", ready + (await child.communicate())[1]
        mine: list[tuple[float, float]] = []
        ours = asyncio.ensure_future(contend(store, LimitRule(name="stripe", concurrency=concurrency, window=1.0,
                                                              per_window=None),
                                             "parent", workers, cycles, Holds(log, concurrency, 2 * workers),
                                             lambda start, end: mine.append((start, end))))
        out, err = await asyncio.wait_for(child.communicate(), 300)
        assert child.returncode == 0, err.decode()
        await asyncio.wait_for(ours, 300)
    server.reset()
    theirs = [tuple(json.loads(line)) for line in out.decode().splitlines()]
    assert len(theirs) == len(mine) == workers * cycles + 1, (len(theirs), len(mine), err.decode()[-2000:])
    both: list[tuple[float, float]] = [*mine, *theirs]  # type: ignore[list-item]
    peaks = (_overlap(both), _overlap(mine), _overlap(theirs))  # type: ignore[arg-type]
    assert peaks[0] <= concurrency, peaks
    assert peaks[0] == concurrency, peaks  # they did compete: the limit was reached, not respected by luck
    assert _crossed(mine, theirs), "the two processes never held slots at the same time"  # type: ignore[arg-type]


@pytest.mark.parametrize("server_name", ["dynamodb_local", "moto"])
async def test_a_crowd_asking_at_once_through_two_stores_gets_exactly_the_windows_starts(
        request: pytest.FixtureRequest, server_name: str) -> None:
    server = server_for(request, server_name)
    settings = _settings(server.endpoint)
    rate = LimitRule(name="crowd", concurrency=None, window=1.0, per_window=3)
    async with DynamoEventStore.connect(settings, session=shared_session()) as one, \
            DynamoEventStore.connect(settings, session=shared_session()) as two:
        await one.create_table()
        answers = await asyncio.gather(*(store.acquire_slot(ask(rate, f"c{n}", T0 + 0.5))
                                         for n in range(20) for store in ((one, two)[n % 2],)))
    server.reset()
    assert sum(isinstance(answer, SlotLease) for answer in answers) == 3
    positions = sorted(answer.position for answer in answers if isinstance(answer, SlotRefusal))
    assert positions == list(range(17))  # each refused one has a place of its own in line


async def test_a_killed_workers_slot_frees_itself_at_its_lease_end(dynamodb_local_server: str) -> None:
    settings = _settings(dynamodb_local_server)
    async with DynamoEventStore.connect(settings, session=shared_session()) as store:
        await store.create_table()
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.integration.slot_worker", settings.model_dump_json(), "hold", "1", "stripe",
            "30", cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert child.stdout is not None
        line = (await asyncio.wait_for(child.stdout.readline(), 60)).decode().split()
        assert line[:2] == ["held", "0"], line
        expires = float(line[2])
        os.kill(child.pid, signal.SIGKILL)
        await child.wait()
        one = LimitRule(name="stripe", concurrency=1, window=1.0, per_window=None)
        refused = await store.acquire_slot(ask(one, "next", expires - 1))
        assert isinstance(refused, SlotRefusal) and refused.free_at == expires  # nobody released it
        taken = await store.acquire_slot(ask(one, "next", expires, since=expires - 1, queued=True))
        assert isinstance(taken, SlotLease) and taken.slot == 0
        await store.client.delete_table(TableName=store.table)


async def test_an_actor_waits_for_a_dead_holders_slot_and_runs_at_its_lease_end_on_aws(
        aws_endpoints: dict[str, str]) -> None:
    ran: list[float] = []
    a = actor("payer")

    @a.workflow
    async def run(ctx: WorkflowContext) -> str:
        def charge(s: StepContext) -> str:
            ran.append(env.now())
            return "charged"

        return str(await ctx.step("charge", charge, limit="stripe"))

    registry = setup(a, limits={"stripe": Limit(concurrency=1, lease=20)})
    async with AwsTestEnv(registry, settings=Settings(**aws_endpoints)) as env:
        ghost = await env.store.acquire_slot(SlotRequest(
            rule=registry.limits["stripe"].rule("stripe"), ref=ActorRef(name="payer", key=("ghost",)),
            holder="a killed worker", now=env.now(), lease_until=env.now() + 20, queued_since=env.now(),
            queued=False))
        assert isinstance(ghost, SlotLease)
        handle = env.client.get_or_create("payer", ["late"])
        await handle.status()
        await env.run_until_idle()
        status = await handle.status()
        assert status.workflow == "sleeping" and status.waiting_for.limits == ["stripe"]
        assert ghost.expires <= (status.waiting_for.deadline or 0) <= ghost.expires + 1
        await env.advance(19)
        assert ran == []
        await env.advance(2)
        assert (await handle.status()).output == "charged"
        assert len(ran) == 1 and ran[0] >= ghost.expires


async def test_limit_items_stored_before_keys_and_priorities_keep_working(dynamodb_local_server: str) -> None:
    """Items an earlier release wrote, written here as it wrote them (its layout: `limit#<name>`, `s#<index>`,
    `w#<since>#<holder hash>`): a held slot still holds, its holder's release still frees it and wakes the waiter in
    the old line, and that waiter, asking again at the default priority, takes the slot and leaves the line."""
    settings = _settings(dynamodb_local_server)
    async with DynamoEventStore.connect(settings, session=shared_session()) as store:
        await store.create_table()
        table = store.slots.table
        pk = {"S": "limit#stripe"}
        old_holder, old_waiter = "payer/old|charge", "payer/waiting|charge"
        await table.put({"pk": pk, "sk": {"S": "s#00000"}, "h": {"S": holder_hash(old_holder)},
                         "a": {"S": "payer/old"}, "ex": {"N": repr(T0 + 60)}})
        await table.put({"pk": pk, "sk": {"S": f"w#{T0 + 1:020.6f}#{holder_hash(old_waiter)}"},
                         "n": {"S": "payer"}, "k": {"S": json.dumps(["waiting"])}, "until": {"N": repr(T0 + 960)}})
        one = LimitRule(name="stripe", concurrency=1, window=1.0, per_window=None)
        assert isinstance(await store.acquire_slot(ask(one, "newcomer", T0 + 2)), SlotRefusal)  # still held
        old_lease = SlotLease(limit="stripe", holder=old_holder, actor="payer/old", slot=0, expires=T0 + 60)
        assert await store.renew_slot(old_lease, T0 + 90)
        assert await store.release_slot(old_lease, T0 + 3) == [ActorRef(name="payer", key=("waiting",))]
        taken = await store.acquire_slot(SlotRequest(
            rule=one, ref=ActorRef(name="payer", key=("waiting",)), holder=old_waiter, now=T0 + 3,
            lease_until=T0 + 63, queued_since=T0 + 1, queued=True))
        assert isinstance(taken, SlotLease) and taken.slot == 0
        left = await table.query("pk = :pk AND begins_with(sk, :w)", {":pk": pk, ":w": {"S": "w#"}})
        assert [json.loads(item["k"]["S"]) for item in left] == [["newcomer"]]  # the old waiter's item is gone
        await store.client.delete_table(TableName=store.table)
