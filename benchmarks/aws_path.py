"""One queue-loop wake-up through the AWS adapter: CPU time of the worker's handler on DynamoDB Local + moto SQS.

    git archive <base> lib | tar -x -C /tmp/aws-base && git archive HEAD lib | tar -x -C /tmp/aws-head
    .venv/bin/python benchmarks/aws_path.py --a /tmp/aws-base/lib --b /tmp/aws-head/lib --rounds 5
    .venv/bin/python benchmarks/aws_path.py --profile threads      # where the CPU goes (cProfile, this checkout)

The servers (DynamoDB Local, the embedded moto server for SQS) start once, as child processes: their CPU is not
this process's. Each round runs one measuring process per library and client kind (`aiobotocore`, and `threads`:
botocore's clients in a pool of threads, what the Lambda functions use), alternating which library goes first.
A measuring process makes its own table, queues and bucket (large values, on the moto server: the deployment has one;
`BENCH_BUCKET=0` measures without), creates the DESIGN counter (examples/counter.py: a loop that
takes one queue message per iteration and applies it in a step), then repeats: a send through the ActorService (not
measured), one receive from the FIFO queue as Lambda's event source does (not measured), and the worker's
`handle(event)` for that one-record batch (measured: process CPU time, every thread, as Lambda bills it). It reports
the median and the least over its wake-ups after a warm-up, and what the last wake-up's DynamoDB requests cost made
again alone through a fresh client of the same kind (`client_floor`: what no Dormant change can go below without
fewer requests); the table gives the medians over the rounds, and b against a.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("aiobotocore", "threads")
REGION = "us-east-1"


# ---- the measuring process (imports whichever dormant PYTHONPATH names) ------------------------------------------
async def measure(kind: str, wakeups: int, warmup: int, profile: str | None = None) -> dict[str, Any]:
    import gc

    from aiobotocore.session import get_session  # type: ignore[import-untyped]

    from dormant.aws.worker import open_worker
    from dormant.dynamodb.store import DynamoEventStore
    from dormant.dynamodb.table import create_table
    from dormant.runtime.clocks import SystemClock
    from dormant.runtime.service import ActorService
    from dormant.settings import Settings
    from dormant.sqs.poller import lambda_event, queue_arn
    from dormant.sqs.transport import SqsTransport, create_queues
    from examples.counter import counter, registry

    dynamodb_url, sqs_url = os.environ["BENCH_DYNAMODB"], os.environ["BENCH_SQS"]
    suffix = uuid.uuid4().hex[:8]
    # A bucket for large values, as template.yaml and infra/ deploy one (on the moto server); BENCH_BUCKET=0: none
    bucket = f"path-{suffix}" if os.environ.get("BENCH_BUCKET", "1") == "1" else None
    settings = Settings(dynamodb_endpoint_url=dynamodb_url, sqs_endpoint_url=sqs_url, region=REGION,
                        table=f"path-{suffix}", queue_name=f"path-{suffix}.fifo",
                        timer_queue_name=f"path-timers-{suffix}", dlq_name=f"path-dlq-{suffix}",
                        fifo_dlq_name=f"path-dlq-{suffix}.fifo", aws_clients=kind,  # type: ignore[arg-type]
                        bucket=bucket, s3_endpoint_url=sqs_url)
    async with contextlib.AsyncExitStack() as stack:
        session = get_session()
        if bucket is not None:
            async with session.create_client("s3", **settings.client_kwargs("s3")) as s3:
                await s3.create_bucket(Bucket=bucket)
        dynamodb = await stack.enter_async_context(session.create_client("dynamodb",
                                                                         **settings.client_kwargs("dynamodb")))
        sqs = await stack.enter_async_context(session.create_client("sqs", **settings.client_kwargs("sqs")))
        await create_table(dynamodb, settings)
        urls = await create_queues(sqs, settings, visibility_timeout=30)
        settings = settings.model_copy(update={"queue_url": urls.wake, "timer_queue_url": urls.timers})
        worker = await stack.enter_async_context(open_worker(settings, registry))
        # As LambdaWorker's: nothing else runs on this loop while a batch is handled (a library before the attribute
        # ignores it)
        worker.loop_owned = True
        # The sends go through clients of their own (the API's, on AWS another function): not the worker's.
        clock = SystemClock()
        service = ActorService(registry, DynamoEventStore(dynamodb, settings), await SqsTransport.from_settings(
            sqs, settings, clock), clock)
        ref = service.ref(counter.name, ["bench"])
        arn = queue_arn(urls.wake, REGION)

        async def one_event() -> dict[str, Any]:
            await service.send(ref, "counter", {"delta": 1})
            while True:  # the event source's receive (not measured)
                received = (await sqs.receive_message(QueueUrl=urls.wake, MaxNumberOfMessages=1,
                                                      AttributeNames=["All"], WaitTimeSeconds=1)).get("Messages", [])
                if received:
                    return lambda_event(received, arn=arn, region=REGION)

        # The last wake-up's own DynamoDB requests, recorded to be replayed for the client floor below (only the last:
        # copying every request's parameters inside the measured time would count the benchmark's work as the worker's)
        recorded: list[tuple[str, dict[str, Any]]] = []
        capture = False

        def record(params: dict[str, Any], model: Any, **_: Any) -> None:
            if capture:
                recorded.append((model.name, copy.deepcopy(dict(params))))

        worker.service.store.client.meta.events.register("before-parameter-build.dynamodb", record,
                                                         unique_id="aws-path-record")
        samples: list[float] = []
        mains: list[float] = []  # the event loop's thread alone
        profiler = None
        if profile:
            import cProfile

            profiler = cProfile.Profile(time.thread_time)  # the event loop thread alone
        for i in range(warmup + wakeups):
            event = await one_event()
            gc.collect()
            if profiler is not None and i >= warmup:
                profiler.enable()
            recorded.clear()
            capture = i == warmup + wakeups - 1
            start, main = time.process_time(), time.thread_time()
            response = await worker.handle(event)
            elapsed, main = time.process_time() - start, time.thread_time() - main
            made = list(recorded)  # (not the reads of the state check below)
            if profiler is not None and i >= warmup:
                profiler.disable()
            if response["batchItemFailures"]:
                raise RuntimeError(f"the wake-up failed: {worker.failures[-1:]}")
            await sqs.delete_message(QueueUrl=urls.wake, ReceiptHandle=event["Records"][0]["receiptHandle"])
            if i >= warmup:
                samples.append(elapsed)
                mains.append(main)
        state = await worker.service.state(ref)
        if state.processed != warmup + wakeups:
            raise RuntimeError(f"the counter processed {state.processed}, not {warmup + wakeups}")
        if profiler is not None and profile:
            profiler.dump_stats(profile)
        requests = dict(worker.metrics[-1].meter.requests)
        floor = await client_floor(settings, made, wakeups)
        return {"kind": kind, "median_ms": statistics.median(samples) * 1000, "min_ms": min(samples) * 1000,
                "loop_thread_ms": statistics.median(mains) * 1000, "floor_ms": floor * 1000,
                "wakeups": wakeups, "requests": requests}


async def client_floor(settings: Any, recorded: list[tuple[str, dict[str, Any]]], repeats: int) -> float:
    """CPU of the last wake-up's DynamoDB requests made again, alone, through a new client made as the worker makes
    its own (this library's `open_client`, the same kind, no metering, within `inline_calls()` as the Lambda worker's
    batch of one actor): the reads side by side as the load makes them, then the write (without its condition,
    which its first making used up: the same item is put again)."""
    from dormant.aws.clients import open_client

    methods = {"Query": "query", "PutItem": "put_item", "GetItem": "get_item", "UpdateItem": "update_item",
               "BatchWriteItem": "batch_write_item", "DeleteItem": "delete_item", "BatchGetItem": "batch_get_item"}
    reads = [(name, params) for name, params in recorded if name in ("Query", "GetItem", "BatchGetItem")]
    writes = [(name, params) for name, params in recorded if (name, params) not in reads]
    for _, params in writes:
        params.pop("ConditionExpression", None)
        params.pop("ExpressionAttributeValues", None)
        params.pop("ExpressionAttributeNames", None)
    try:  # made as the worker makes them: a Lambda invocation's on its own thread (a library before it: the pool)
        from dormant.aws.clients import inline_calls
    except ImportError:
        inline_calls = contextlib.nullcontext
    async with open_client("dynamodb", settings) as client:
        async def once() -> None:
            with inline_calls():
                await asyncio.gather(*(getattr(client, methods[name])(**params) for name, params in reads))
                for name, params in writes:
                    await getattr(client, methods[name])(**params)

        samples = []
        for i in range(5 + repeats):
            start = time.process_time()
            await once()
            if i >= 5:
                samples.append(time.process_time() - start)
    return statistics.median(samples)


# ---- the driver -------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def servers() -> Iterator[tuple[str, str]]:
    sys.path.insert(0, str(ROOT))
    from benchmarks.functions import servers as start

    with start() as endpoints:
        yield endpoints


def child_environment(endpoints: tuple[str, str]) -> dict[str, str]:
    return {"BENCH_DYNAMODB": endpoints[0], "BENCH_SQS": endpoints[1], "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}


def run_child(lib: str, kind: str, wakeups: int, warmup: int, endpoints: tuple[str, str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": f"{lib}{os.pathsep}{ROOT}", **child_environment(endpoints)}
    out = subprocess.run([sys.executable, __file__, "--child", kind, "--wakeups", str(wakeups),
                          "--warmup", str(warmup)], env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"measuring {lib} ({kind}) failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def compare(a: str, b: str, rounds: int, wakeups: int, warmup: int) -> None:
    results: dict[tuple[str, str], list[float]] = {}
    floors: dict[tuple[str, str], list[float]] = {}
    least: dict[tuple[str, str], list[float]] = {}  # each process's least wake-up: steadier on a shared machine
    with servers() as endpoints:
        for r in range(rounds):
            order = [("a", a), ("b", b)] if r % 2 == 0 else [("b", b), ("a", a)]
            for kind in KINDS:
                for name, lib in order:
                    result = run_child(lib, kind, wakeups, warmup, endpoints)
                    results.setdefault((name, kind), []).append(result["median_ms"])
                    floors.setdefault((name, kind), []).append(result["floor_ms"])
                    least.setdefault((name, kind), []).append(result["min_ms"])
                    print(f"round {r + 1} {name} {kind}: {result['median_ms']:.2f} ms (the same requests alone "
                          f"{result['floor_ms']:.2f} ms)", file=sys.stderr)
    print(f"\nCPU per queue-loop wake-up (ms; median over {rounds} rounds of each process's median of {wakeups} "
          f"wake-ups after {warmup} warm-up)\n")
    print("| clients | a | b | b / a | least: a | b | b / a | its requests alone: a | b |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kind in KINDS:
        row = []
        for table in (results, least, floors):
            xa, xb = table[("a", kind)], table[("b", kind)]
            row += [f"{statistics.median(xa):.2f}", f"{statistics.median(xb):.2f}"]
            if table is not floors:
                row.append(f"{statistics.median([y / x for x, y in zip(xa, xb, strict=True)]):.2f}")
        print(f"| {kind} | {' | '.join(row)} |")
    print(f"\na = {a}\nb = {b}")
    with contextlib.suppress(OSError):
        print(f"load average during the run: {os.getloadavg()}")


def profile_here(kind: str, wakeups: int, warmup: int) -> None:
    import pstats

    path = f"/tmp/aws-path-{kind}-{os.getpid()}.prof"
    with servers() as endpoints:
        os.environ.update(child_environment(endpoints))
        print(asyncio.run(measure(kind, wakeups, warmup, profile=path)))
    stats = pstats.Stats(path)
    shares: dict[str, float] = {}
    raw = stats.stats  # type: ignore[attr-defined]
    for (filename, _, _), (_, _, tottime, _, _) in raw.items():
        shares[package_of(filename)] = shares.get(package_of(filename), 0.0) + tottime
    total = sum(shares.values())
    print(f"\nself time by package ({kind}, {wakeups} wake-ups, {total / wakeups * 1000:.2f} ms each under cProfile)")
    for name, seconds in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f"  {name:24} {seconds / total * 100:5.1f}%")
    stats.sort_stats("tottime").print_stats(25)


def package_of(filename: str) -> str:
    for name in ("dormant", "aiobotocore", "botocore", "aiohttp", "urllib3", "pydantic", "asyncio", "json",
                 "concurrent", "threading", "ssl", "http", "email", "logging", "selectors", "socket", "yarl",
                 "multidict", "dateutil", "zlib", "examples"):
        if f"/{name}/" in filename or filename.endswith(f"/{name}.py"):
            return name
    return "builtins/other" if filename.startswith("~") or "<" in filename else Path(filename).name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", help="a library directory (the base)")
    parser.add_argument("--b", help="another (the change)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--wakeups", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--profile", choices=KINDS, help="cProfile this checkout's wake-ups instead")
    parser.add_argument("--here", choices=KINDS, help="measure this checkout in this process (for py-spy)")
    parser.add_argument("--child", choices=KINDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(measure(args.child, args.wakeups, args.warmup))))
    elif args.here:
        with servers() as endpoints:
            os.environ.update(child_environment(endpoints))
            print(asyncio.run(measure(args.here, args.wakeups, args.warmup)))
    elif args.profile:
        profile_here(args.profile, args.wakeups, args.warmup)
    else:
        if not (args.a and args.b):
            parser.error("give --a and --b (library directories), or --profile")
        compare(args.a, args.b, args.rounds, args.wakeups, args.warmup)


if __name__ == "__main__":
    main()
