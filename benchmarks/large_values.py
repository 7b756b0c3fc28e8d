"""Large values (issue 19): requests, bytes, time and $ per wake-up of an actor with 20 MB of state.

    .venv/bin/python benchmarks/large_values.py                # DynamoDB Local + the embedded moto (SQS, S3)
    .venv/bin/python benchmarks/large_values.py --rounds 5

The deployment runs as benchmarks/requests.py runs it (benchmarks/functions.py: the two Lambda handler modules,
DynamoDB Local reporting capacity, the embedded moto server for SQS and S3, the event source), with a bucket
(DORMANT_BUCKET). Scenarios, each per wake-up after a warm-up that builds the state:

- 20 MB in 200 parts of 100 KB, one part changed by one step: a warm worker container (its cache of immutable
  objects holds the parts), and a cold one (the cache emptied before each wake-up: what a new container pays);
- the same state, a wake-up whose step only reads it (warm and cold);
- 20 MB as one value, changed by one step (the whole value written again: what the bottom-up transform cannot
  spare a value that has no parts);
- a 5 MB step result, end to end (send to processed).

S3 is priced from the counted requests (PUT and LIST per 1,000, GET per 1,000; DELETE free) at
benchmarks/prices.py; bytes are what went over the wire.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from benchmarks import prices  # noqa: E402
from benchmarks.functions import Stack, open_stack, servers  # noqa: E402
from benchmarks.large_app import PART, PARTS  # noqa: E402
from dormant.aws.metering import Meter, instrument  # noqa: E402

APP = "benchmarks.large_app:registry"


def s3_usd(meter: Meter) -> float:
    puts = meter.requests["s3.PutObject"] + meter.requests["s3.ListObjectsV2"]
    return puts * prices.S3_PUT + meter.requests["s3.GetObject"] * prices.S3_GET


def dynamodb_usd(meter: Meter) -> float:
    return ((meter.write_units + meter.index_write_units) * prices.DYNAMODB_WRITE_UNIT
            + meter.read_units * prices.DYNAMODB_READ_UNIT)


def worker_store(stack: Stack) -> Any:
    """The worker container's DynamoEventStore (through the ObservedStore wrapper)."""
    service = stack.worker.module.worker.worker.service
    return getattr(service.store, "inner", service.store)


async def one(stack: Stack, client: Any, command: dict[str, Any], *, cold: bool) -> dict[str, float]:
    """Send `command`, run the wake-up; what the worker spent on it."""
    handle = client.get_or_create("large-bench", ["bench"])
    await handle.send("do", command)
    if cold:
        blobs = worker_store(stack).values.blobs
        blobs._cache.clear()
        blobs._cached_bytes = 0
    before, calls = stack.worker.meter.copy(), len(stack.worker.invocations)
    started = time.perf_counter()
    await stack.drain()
    wall = (time.perf_counter() - started) * 1000
    spent = stack.worker.meter - before
    invocations = stack.worker.invocations[calls:]
    return {"s3 put": spent.requests["s3.PutObject"], "s3 get": spent.requests["s3.GetObject"],
            "s3 list": spent.requests["s3.ListObjectsV2"], "s3 delete": spent.requests["s3.DeleteObjects"],
            "dynamodb": spent.dynamodb_requests, "wcu": spent.write_units + spent.index_write_units,
            "rcu": spent.read_units, "sent MB": spent.bytes_sent / 1e6, "received MB": spent.bytes_received / 1e6,
            "worker ms": sum(i.billed_ms for i in invocations), "wall ms": wall,
            "s3 $/M": s3_usd(spent) * 1e6, "dynamodb $/M": dynamodb_usd(spent) * 1e6,
            "lambda $/M": sum(i.billed_ms for i in invocations) * stack.deploy.per_ms * 1e6
                          + len(invocations) * prices.LAMBDA_REQUEST * 1e6}


def average(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: sum(row[key] for row in rows) / len(rows) for key in rows[0]}


async def scenario(endpoints: tuple[str, str], name: str, setup: list[dict[str, Any]], step: Any, rounds: int,
                   cold: bool) -> tuple[str, dict[str, float]]:
    bucket = f"bench-{uuid.uuid4().hex[:10]}"
    env = {"DORMANT_BUCKET": bucket, "DORMANT_S3_ENDPOINT_URL": endpoints[1]}
    async with open_stack(APP, endpoints=endpoints, env=env) as stack:
        from aiobotocore.session import get_session  # type: ignore[import-untyped]

        from dormant.dev.dynamodb_local import CREDENTIALS

        async with get_session().create_client("s3", endpoint_url=endpoints[1], region_name="us-east-1",
                                               aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                                               aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"]) as s3:
            await s3.create_bucket(Bucket=bucket)
        blobs = worker_store(stack).values.blobs
        instrument(blobs.client)  # counted into the worker's meter (its scopes)
        async with stack.client() as client:
            for command in setup:
                await client.get_or_create("large-bench", ["bench"]).send("do", command)
                await stack.drain(timeout=300)
            rows = [await one(stack, client, step(index), cold=cold) for index in range(rounds)]
    return name, average(rows)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    fill_parts, fill_blob = [{"op": "fill-parts"}], [{"op": "fill-blob"}]
    cases = [
        ("200 parts, one changed (warm)", fill_parts, lambda i: {"op": "touch", "index": i}, False),
        ("200 parts, one changed (cold)", fill_parts, lambda i: {"op": "touch", "index": i, "size": 1}, True),
        ("200 parts, read only (warm)", fill_parts, lambda i: {"op": "peek"}, False),
        ("200 parts, read only (cold)", fill_parts, lambda i: {"op": "peek"}, True),
        ("one 20 MB value, changed (warm)", fill_blob, lambda i: {"op": "touch-blob", "index": i}, False),
        ("a 5 MB step result", [], lambda i: {"op": "produce", "index": i, "size": 5_000_000}, False),
    ]
    with servers() as endpoints:
        results = [await scenario(endpoints, name, setup, step, arguments.rounds, cold)
                   for name, setup, step, cold in cases]
    print(f"state: {PARTS} x {PART:,} bytes = {PARTS * PART / 1e6:.0f} MB; per wake-up, mean of "
          f"{arguments.rounds}")
    columns = list(results[0][1])
    print("| scenario | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for name, row in results:
        print(f"| {name} | " + " | ".join(f"{row[c]:,.2f}" if row[c] % 1 else f"{row[c]:,.0f}" for c in columns)
              + " |")


if __name__ == "__main__":
    asyncio.run(main())
