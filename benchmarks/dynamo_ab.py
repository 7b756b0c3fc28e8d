"""The DynamoDB store's own CPU in a step's load, check and commit, two library trees against each other.

    git archive <base> lib | tar -x -C /tmp/dyn-base && git archive HEAD lib | tar -x -C /tmp/dyn-head
    .venv/bin/python benchmarks/dynamo_ab.py --a /tmp/dyn-base/lib --b /tmp/dyn-head/lib --rounds 7

DynamoDB Local starts once (a child process: its CPU is not counted). Each round runs one measuring process per
library, alternating which goes first. A measuring process makes its own table, creates an actor with a history of
10 entries, then repeats a loop iteration's storage work: `load`, `check_commit` and `commit` of a draft that updates
a loop entry and adds a step's entry (an output of about 300 bytes, non-ASCII text included) and changes a state of
about 600 bytes, as a queue loop's wake-up does. It measures the process's CPU time of each cycle minus the CPU spent
while a table request is under way (botocore's, the same for both trees; concurrent requests counted once): what
is left is the store's own work (parsing, sizing, serializing, compressing) and the event loop's glue around it.
The table gives medians over the rounds of each process's median cycle, and the median of per-round ratios b / a.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REGION = "us-east-1"
WRAPPED = ("put", "get", "delete", "update", "query_page", "put_all", "delete_all", "get_all")


async def measure(cycles: int, warmup: int) -> dict[str, Any]:
    import gc

    from aiobotocore.session import get_session  # type: ignore[import-untyped]

    from dormant.core.limits import draft_sizes
    from dormant.dynamodb.store import DynamoEventStore
    from dormant.dynamodb.table import create_table
    from dormant.ports import ActorMeta, ActorRef
    from dormant.settings import Settings
    from dormant.workflow.execution import CommitDraft
    from dormant.workflow.history import WorkflowRecord, WorkflowState

    settings = Settings(dynamodb_endpoint_url=os.environ["BENCH_DYNAMODB"], region=REGION,
                        table=f"dynab-{uuid.uuid4().hex[:8]}")
    inside = [0.0]  # CPU seconds while any of the table's requests was under way (concurrent ones counted once)
    flight = [0, 0.0]  # requests under way, and when the first of them started

    def timed(call: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not flight[0]:
                flight[1] = time.process_time()
            flight[0] += 1
            try:
                return await call(*args, **kwargs)
            finally:
                flight[0] -= 1
                if not flight[0]:
                    inside[0] += time.process_time() - flight[1]
        return wrapper

    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(get_session().create_client("dynamodb",
                                                                             **settings.client_kwargs("dynamodb")))
        await create_table(client, settings)
        store = DynamoEventStore(client, settings)
        for name in WRAPPED:
            setattr(store.requests, name, timed(getattr(store.requests, name)))
        ref = ActorRef(name="counter", key=("bench",))
        created_at = time.time()
        await store.create(ref, ActorMeta(name="counter", key=("bench",), created_at=created_at),
                           {"processed": 0}, WorkflowRecord(state=WorkflowState.RUNNING), [])

        def entry(location: str, seq: int, output: Any, **extra: Any) -> dict[str, Any]:
            return {"location": location, "kind": "step", "name": location, "seq": seq, "status": "completed",
                    "output": output, "attempts": 1, "created_at": created_at + seq, "updated_at": created_at + seq,
                    **extra}

        history = [entry(f"setup-{i}", i, {"id": f"item-{i}", "ok": True}) for i in range(10)]
        version = await store.commit(ref, 1, CommitDraft(history, [], None, [], {}, [], None))
        samples: list[float] = []
        for i in range(warmup + cycles):
            gc.collect()
            inside[0] = 0.0
            start = time.process_time()
            snapshot = await store.load(ref)
            assert snapshot is not None and snapshot.version == version
            output = {"applied": i, "note": "délta ✓ " * 10, "values": [i * 1.5, None, True, "x" * 100]}
            state = {"processed": i, "log": [f"entry {j} ünïcode" for j in range(20)], "total": i * 2.25}
            draft = CommitDraft(
                upserts=[{"location": "loop", "kind": "loop", "name": "loop", "seq": 10, "status": "pending",
                          "iteration": i, "loop_state": {"n": i}, "created_at": created_at,
                          "updated_at": created_at + i},
                         entry(f"loop/{i}/apply", 11 + i, output)],
                deleted_prefixes=[f"loop/{i - 1}/"] if i else [], state=state, consumed_ids=[], responses={},
                events=[], workflow=WorkflowRecord(state=WorkflowState.RUNNING), committed_at=created_at + i)
            own = time.process_time()
            draft_sizes(draft)  # (the engine's, in both trees: not the store's work)
            own = time.process_time() - own
            store.check_commit(ref, version, draft)
            version = await store.commit(ref, version, draft)
            elapsed = time.process_time() - start - inside[0] - own
            if i >= warmup:
                samples.append(elapsed)
    return {"median_us": statistics.median(samples) * 1e6, "min_us": min(samples) * 1e6, "cycles": cycles}


def run_child(lib: str, cycles: int, warmup: int, endpoint: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": f"{lib}{os.pathsep}{ROOT}", "BENCH_DYNAMODB": endpoint,
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}
    out = subprocess.run([sys.executable, __file__, "--child", "--cycles", str(cycles), "--warmup", str(warmup)],
                         env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"measuring {lib} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@contextlib.contextmanager
def dynamodb_local() -> Iterator[str]:
    sys.path.insert(0, str(ROOT))
    from benchmarks.functions import servers

    with servers() as endpoints:
        yield endpoints[0]


def compare(a: str, b: str, rounds: int, cycles: int, warmup: int) -> None:
    medians: dict[str, list[float]] = {"a": [], "b": []}
    least: dict[str, list[float]] = {"a": [], "b": []}
    with dynamodb_local() as endpoint:
        for r in range(rounds):
            for name, lib in ([("a", a), ("b", b)] if r % 2 == 0 else [("b", b), ("a", a)]):
                result = run_child(lib, cycles, warmup, endpoint)
                medians[name].append(result["median_us"])
                least[name].append(result["min_us"])
                print(f"round {r + 1} {name}: {result['median_us']:.0f} us (least {result['min_us']:.0f})",
                      file=sys.stderr)
    ratios = [mb / ma for ma, mb in zip(medians["a"], medians["b"], strict=True)]
    print("| | a (us CPU) | b | b / a (median of rounds' ratios) | least: a | b |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| load + check + commit, Dormant's own | {statistics.median(medians['a']):.0f} | "
          f"{statistics.median(medians['b']):.0f} | {statistics.median(ratios):.3f} | "
          f"{statistics.median(least['a']):.0f} | {statistics.median(least['b']):.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", help="a library directory (the base)")
    parser.add_argument("--b", help="another (the change)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(measure(args.cycles, args.warmup))))
        return
    if not (args.a and args.b):
        parser.error("--a and --b name the two library trees")
    compare(args.a, args.b, args.rounds, args.cycles, args.warmup)


if __name__ == "__main__":
    main()
