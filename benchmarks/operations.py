"""What the operator features cost on DynamoDB: requests and capacity units per commit (with and without a status
change), per listing page, per status read, per deletion; and the time of `dormant replay --all` over N actors.

    .venv/bin/python benchmarks/operations.py                 # starts a moto server on 127.0.0.1
    .venv/bin/python benchmarks/operations.py --actors 500

Requests are counted through botocore's event hooks (dormant.aws.metering); capacity units come from item sizes
(1 WCU per started KB written, 1 RCU per started 4 KB read strongly consistent). Index writes are not in the
meter: DynamoDB adds 1 WCU per index entry written and 2 when an entry's key changes (delete + put).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import httpx  # noqa: E402
from aiobotocore.session import get_session  # type: ignore[import-untyped]  # noqa: E402

from dormant.aws.metering import Meter, instrument  # noqa: E402
from dormant.cli.replay import _replay_all  # noqa: E402
from dormant.dynamodb.store import DynamoEventStore, client_config  # noqa: E402
from dormant.http.app import create_app  # noqa: E402
from dormant.http.client import HttpClient  # noqa: E402
from dormant.ports import ActorMeta, ActorRef, InboxMessage  # noqa: E402
from dormant.runtime.clocks import SystemClock  # noqa: E402
from dormant.runtime.service import ActorService  # noqa: E402
from dormant.settings import Settings  # noqa: E402
from dormant.workflow.execution import CommitDraft  # noqa: E402
from dormant.workflow.history import WorkflowRecord, WorkflowState  # noqa: E402
from examples.counter import registry  # noqa: E402


class _NoTransport:
    async def wake(self, ref: ActorRef, *, at: float | None = None, reason: str | None = None) -> None:
        return None


def _draft(n: int, state: WorkflowState) -> CommitDraft:
    entry = {"location": f"counter-loop/~{n}/apply-counter-command", "kind": "step", "name": "apply-counter-command",
             "seq": n + 2, "status": "completed", "output": None}
    return CommitDraft(upserts=[entry], deleted_prefixes=[], state={"value": n, "processed": n}, consumed_ids=[],
                       responses={}, events=[], workflow=WorkflowRecord(state=state, waiting_for=["counter"]),
                       committed_at=time.time())


def _row(what: str, meter: Meter, count: int = 1) -> str:
    calls = ", ".join(f"{n / count:g} {op.split('.', 1)[1]}" for op, n in sorted(meter.requests.items()) if n)
    return (f"| {what} | {calls} | {meter.write_units / count:.2f} | {meter.read_units / count:.2f} |")


async def run(endpoint: str, actors: int) -> None:
    settings = Settings(table=f"bench-ops-{uuid.uuid4().hex[:8]}", endpoint_url=endpoint, region="us-east-1")
    session = get_session()
    async with session.create_client("dynamodb", config=client_config(), **settings.client_kwargs("dynamodb")) as db:
        store = DynamoEventStore(db, settings)
        await store.create_table()
        meter = Meter()
        instrument(db, always=meter)
        rows = []

        def measure(label: str, count: int = 1) -> None:
            rows.append(_row(label, meter - before, count))

        ref = ActorRef(name="workflow-counter", key=("bench",))
        before = meter.copy()
        await store.create(ref, ActorMeta(name=ref.name, key=ref.key, created_at=time.time()), {"value": 0},
                           WorkflowRecord(), [])
        measure("create (commit + its status item)")
        before = meter.copy()
        await store.commit(ref, 1, _draft(1, WorkflowState.SLEEPING))
        measure("commit that changes the listed status (pending -> sleeping)")
        before = meter.copy()
        for n in range(2, 12):  # running mid-wake-up and sleeping at rest: both listed as sleeping
            await store.commit(ref, n, _draft(n, WorkflowState.RUNNING if n % 2 else WorkflowState.SLEEPING))
        measure("commit that keeps the listed status (average of 10)", 10)
        before = meter.copy()
        await store.read_summary(ref)
        measure("status read (read_summary; the finished-actor check of a send)")

        for i in range(actors):
            other = ActorRef(name="workflow-counter", key=(f"a{i:05d}",))
            await store.create(other, ActorMeta(name=other.name, key=other.key, created_at=time.time()),
                               {"value": 0}, WorkflowRecord(), [])
        before = meter.copy()
        page = await store.list_actors("workflow-counter", limit=100)
        measure(f"listing page of {len(page.actors)} actors")
        before = meter.copy()
        listed = 0
        cursor = None
        while True:
            page = await store.list_actors("workflow-counter", limit=100, after=cursor)
            listed += len(page.actors)
            if page.cursor is None:
                break
            cursor = page.cursor
        measure(f"listing all {listed} actors, pages of 100")

        for n in range(10):
            await store.enqueue(ref, InboxMessage(id=f"m{n}", queue="counter", body={"delta": 1},
                                                  created_at=time.time()))
        before = meter.copy()
        await store.delete(ref)
        measure("delete of an actor at version 12 (12 commit slots), 10 waiting messages and its status item")

        service = ActorService(registry, store, _NoTransport(), SystemClock())  # type: ignore[arg-type]
        app = create_app(registry, Settings(dev=True), service=service)
        async with HttpClient("http://api", transport=httpx.ASGITransport(app)) as http:
            wall, cpu = time.perf_counter(), time.process_time()
            tallies = await _replay_all(http, registry, None, include_finished=True, quiet=True)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        replayed = sum(t.ok + len(t.diverged) for t in tallies.values())

    print("| operation | DynamoDB requests | WCU (table) | RCU |")
    print("|---|---|---:|---:|")
    print("\n".join(rows))
    print(f"\nreplay --all over {replayed} actors (export over HTTP in-process + offline replay, API on the same "
          f"moto server): {wall:.2f} s wall, {cpu:.2f} s CPU, {1000 * cpu / max(1, replayed):.1f} ms CPU per actor")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", help="a running moto server (default: start one)")
    parser.add_argument("--actors", type=int, default=200)
    args = parser.parse_args()
    if args.endpoint:
        asyncio.run(run(args.endpoint, args.actors))
        return
    import os

    from tests.servers import MotoServer, fake_aws_environment

    os.environ.update(fake_aws_environment())
    server = MotoServer()
    server.start()
    try:
        asyncio.run(run(server.endpoint, args.actors))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
