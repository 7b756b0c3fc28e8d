"""`dormant dev` end to end: messages per second, request/response round trips, and both as the table grows.

    .venv/bin/python benchmarks/devstack.py                    # 50 actors, 1,000 messages, grow to 10,000 actors
    .venv/bin/python benchmarks/devstack.py --grow-to 2000     # shorter
    .venv/bin/python benchmarks/devstack.py --source /tmp/base # another checkout's lib/ (a before/after comparison)

A real `dormant dev` subprocess (examples.app's registry: the DESIGN counter and the request/response doubler)
on its embedded moto server, driven over HTTP by one client process:

- **throughput**: `--senders` concurrent senders post `--messages` counter messages spread over `--actors`
  actors; the clock runs from the first send until every actor's state shows every message processed
  (HTTP send -> SQS -> worker -> DynamoDB commit, and the state reads that watch it);
- **round trip**: `--calls` sequential `send(wait=True)` to one doubler (request, SQS, wake-up, step,
  response, answer), on an otherwise idle stack: median and p90;
- **growth**: new counter actors are added (one message each) until the table holds `--grow-to` actors, then
  both are measured again: the numbers should stay flat.

Besides wall time it reports the CPU seconds the stack's two processes (dormant dev and its moto child) spent
per message, read from /proc: the steadier number on a shared machine.

    .venv/bin/python benchmarks/devstack.py --count-requests --grow-to 0 --requests-json /tmp/devstack.json

`--count-requests` counts every DynamoDB and SQS request the stack makes, by operation, per message and per round
trip: `dormant dev --endpoint` is pointed at a counting proxy (benchmarks/countingproxy.py) in front of a moto
server of the same kind as the embedded one. Nothing of the benchmark's own goes through the proxy: the
throughput phase waits for the queues to empty (asked of moto directly) instead of reading state through the API,
and checks the states after the count. benchmarks/scale.py checks its request model against these counts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rpartition(")")[2].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return found


class Stack:
    """`python -m dormant.cli dev` from `source` (a checkout), on a free port."""

    def __init__(self, source: Path, port: int, log: Path, data_dir: Path, app: str,
                 endpoint: str | None = None) -> None:
        self.source, self.port, self.log, self.data_dir, self.app = source, port, log, data_dir, app
        self.endpoint = endpoint  # an AWS endpoint instead of the embedded moto server (--count-requests)
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DORMANT_"))}
        env.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1",
                   PYTHONPATH=os.pathsep.join([str(self.source / "lib"), str(self.source)]))
        args = [sys.executable, "-m", "dormant.cli", "dev", "--app", self.app, "--port", str(self.port)]
        helptext = subprocess.run([*args[:4], "--help"], env=env, cwd=self.source, capture_output=True,
                                  text=True).stdout
        if self.endpoint is not None:
            args += ["--endpoint", self.endpoint, "--log-level", "warning"]
        elif "--data-dir" in helptext:  # this checkout persists: as a user runs it, in a fresh directory
            args += ["--data-dir", str(self.data_dir), "--log-level", "warning"]
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(args, env=env, cwd=self.source, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while True:
            if self.process.poll() is not None:
                raise SystemExit(f"dormant dev exited:\n{self.log.read_text()[-3000:]}")
            try:
                urllib.request.urlopen(f"{self.url}/openapi.json", timeout=2).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("dormant dev did not start") from None
                time.sleep(0.2)

    def cpu(self) -> float:
        assert self.process is not None
        pids = [self.process.pid, *children(self.process.pid)]
        return sum(cpu_seconds(pid) for pid in pids)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(2)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()


@dataclass
class Throughput:
    messages: int
    seconds: float
    cpu: float

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


async def request(client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """One request, sent again after a transport error (a pooled connection the server was closing): every
    request here is idempotent (reads, and sends with an Idempotency-Key), as dormant.http.client's are."""
    for attempt in range(3):
        try:
            return await client.request(method, url, **kwargs)
        except httpx.TransportError:
            if attempt == 2:
                raise
            await asyncio.sleep(0.1)
    raise AssertionError("unreachable")


async def send_counter(client: httpx.AsyncClient, actor: str, delta: int) -> None:
    response = await request(client, "POST", f"/actors/workflow-counter/{actor}/queues/counter",
                             json={"delta": delta}, headers={"Idempotency-Key": uuid.uuid4().hex})
    if response.status_code != 202:
        raise SystemExit(f"send failed: {response.status_code} {response.text}")


async def processed(client: httpx.AsyncClient, actor: str) -> int:
    response = await request(client, "GET", f"/actors/workflow-counter/{actor}/state")
    return int(response.json()["processed"]) if response.status_code == 200 else 0


async def queues_empty(endpoint: str) -> None:
    """Wait until every queue at `endpoint` is empty: nothing visible, in flight or delayed (asked directly)."""
    import boto3

    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="bench",
                       aws_secret_access_key="bench")
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
             "ApproximateNumberOfMessagesDelayed"]
    quiet = 0
    while quiet < 3:  # three looks in a row: a message between a receive and its delete is in flight, not gone
        urls = sqs.list_queues().get("QueueUrls", [])
        busy = any(int(v) for url in urls
                   for v in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"].values())
        quiet = 0 if busy else quiet + 1
        await asyncio.sleep(0.2)


async def throughput(stack: Stack, prefix: str, actors: int, messages: int, senders: int,
                     direct: str | None = None, already: int = 0, counted: list[Any] | None = None,
                     counted_snapshot: Any = None) -> Throughput:
    async with httpx.AsyncClient(base_url=stack.url, timeout=120, limits=httpx.Limits(max_connections=senders + 8)
                                 ) as client:
        names = [f"{prefix}-{n}" for n in range(actors)]
        plan = [(names[n % actors], 1) for n in range(messages)]
        gate = asyncio.Semaphore(senders)
        cpu_before, started = stack.cpu(), time.perf_counter()

        async def one(actor: str, delta: int) -> None:
            async with gate:
                await send_counter(client, actor, delta)

        await asyncio.gather(*(one(actor, delta) for actor, delta in plan))
        expected = {name: sum(1 for a, _ in plan if a == name) for name in names}
        if direct is not None:  # counting requests: watch the queues, not the actors (no API reads)
            await queues_empty(direct)
            result = Throughput(messages, time.perf_counter() - started, stack.cpu() - cpu_before)
            if counted is not None:
                counted.append(counted_snapshot())  # before the reads that check the result
            counts = await asyncio.gather(*(processed(client, name) for name in names))
            assert counts == [expected[name] + already for name in names], "not every message was processed"
            return result
        pending = set(names)
        reads = asyncio.Semaphore(8)

        async def read(name: str) -> int:
            async with reads:
                return await processed(client, name)

        while pending:  # a round of state reads every 0.25 s (8 at a time): the watching costs the stack little
            counts = await asyncio.gather(*(read(name) for name in sorted(pending)))
            pending = {name for name, count in zip(sorted(pending), counts, strict=True) if count < expected[name]}
            if pending:
                await asyncio.sleep(0.25)
        return Throughput(messages, time.perf_counter() - started, stack.cpu() - cpu_before)


async def round_trips(stack: Stack, key: str, calls: int) -> tuple[list[float], float]:
    async with httpx.AsyncClient(base_url=stack.url, timeout=60) as client:
        async def call(value: int) -> float:
            started = time.perf_counter()
            response = await client.post(f"/actors/request-response/{key}/queues/requests?wait=true&timeout=20",
                                         json={"value": value})
            body = response.json()
            if response.status_code != 200 or body.get("response") != {"doubled": value * 2}:
                raise SystemExit(f"round trip failed: {response.status_code} {body}")
            return (time.perf_counter() - started) * 1000

        await call(0)  # creates the actor: not timed
        cpu_before = stack.cpu()
        times = [await call(n) for n in range(1, calls + 1)]
        return times, (stack.cpu() - cpu_before) / calls


async def grow(stack: Stack, total: int, senders: int) -> None:
    await throughput(stack, "grow", total, total, senders)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def per(counts: dict[str, int], n: int) -> dict[str, float]:
    return {op: round(value / n, 3) for op, value in sorted(counts.items())}


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    port = args.port or free_port()  # a fixed port may be another stack's on a shared machine
    with tempfile.TemporaryDirectory(prefix="dormant-bench-") as scratch:
        proxy = moto = None
        if args.count_requests:
            sys.path.insert(0, str(ROOT / "lib"))
            sys.path.insert(0, str(ROOT))
            from benchmarks.countingproxy import CountingProxy
            from dormant.dev.embedded import EmbeddedMoto

            moto = EmbeddedMoto(log_path=Path(scratch) / "moto.log")
            moto.start()
            proxy = CountingProxy(moto.url)
            proxy.start()
        stack = Stack(args.source.resolve(), port, Path(scratch) / "console.log", Path(scratch) / "data", args.app,
                      endpoint=proxy.url if proxy is not None else None)
        stack.start()
        rows: list[dict[str, Any]] = []
        try:
            if proxy is not None and moto is not None:
                return await count_requests(stack, proxy, moto.url, args)
            actors_in_table = 0
            for stage in ("small table", f"{args.grow_to:,} actors"):
                if stage != "small table":
                    started = time.perf_counter()
                    await grow(stack, args.grow_to - actors_in_table, args.senders)
                    print(f"  grew the table to {args.grow_to:,} actors in {time.perf_counter() - started:.0f} s",
                          flush=True)
                    actors_in_table = args.grow_to
                result = await throughput(stack, f"t{len(rows)}", args.actors, args.messages, args.senders)
                actors_in_table += args.actors
                times, rt_cpu = await round_trips(stack, f"rr{len(rows)}", args.calls)
                actors_in_table += 1
                rows.append({"stage": stage, "rate": result.rate, "seconds": result.seconds,
                             "cpu_ms_per_message": result.cpu / result.messages * 1000,
                             "rt_median": statistics.median(times), "rt_p90": percentile(times, 0.9),
                             "rt_cpu_ms": rt_cpu * 1000})
                print(f"  {stage}: {result.rate:.1f} msg/s, round trip median {statistics.median(times):.0f} ms",
                      flush=True)
        finally:
            stack.stop()
            if proxy is not None:
                proxy.stop()
            if moto is not None:
                moto.stop()
        return rows


async def count_requests(stack: Stack, proxy: Any, direct: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Requests per message (the throughput phase, every actor new) and per round trip, by operation."""
    rows: list[dict[str, Any]] = []
    before, after = proxy.snapshot(), []
    result = await throughput(stack, "count", args.actors, args.messages, args.senders, direct=direct,
                              counted=after, counted_snapshot=proxy.snapshot)
    sent = after[0] - before
    rows.append({"stage": f"{args.messages} messages over {args.actors} new actors", "unit": "message",
                 "units": args.messages, "rate": result.rate, "actors": args.actors, "counts": dict(sent),
                 "per_unit": per(dict(sent), args.messages)})
    before, after = proxy.snapshot(), []
    again = await throughput(stack, "count", args.actors, args.messages, args.senders, direct=direct,
                             already=args.messages // args.actors, counted=after, counted_snapshot=proxy.snapshot)
    sent = after[0] - before
    rows.append({"stage": f"{args.messages} more messages to the same {args.actors} actors", "unit": "message",
                 "units": args.messages, "rate": again.rate, "actors": 0, "counts": dict(sent),
                 "per_unit": per(dict(sent), args.messages)})
    await round_trips(stack, "count-rr", 1)  # creates the doubler: not counted
    before = proxy.snapshot()
    times, _ = await round_trips(stack, "count-rr", args.calls)
    called = proxy.snapshot() - before
    rows.append({"stage": f"{args.calls} round trips (send, wait=true)", "unit": "call", "units": args.calls,
                 "median_ms": statistics.median(times), "counts": dict(called), "per_unit": per(dict(called),
                                                                                                 args.calls)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--actors", type=int, default=50)
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--senders", type=int, default=50)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--grow-to", type=int, default=10_000)
    parser.add_argument("--port", type=int, default=0, help="the API's port (default: a free one)")
    parser.add_argument("--source", type=Path, default=ROOT, help="checkout whose lib/ runs (default: this one)")
    parser.add_argument("--count-requests", action="store_true",
                        help="count the stack's DynamoDB and SQS requests by operation (see the docstring)")
    parser.add_argument("--requests-json", type=Path, help="with --count-requests: write the counts here")
    parser.add_argument("--app", default="examples.app:registry",
                        help="a registry with workflow-counter and request-response (older checkouts: "
                             "examples.tour:registry)")
    args = parser.parse_args()
    rows = asyncio.run(run(args))
    if args.count_requests:
        print(f"\n`dormant dev` requests by operation ({args.actors} actors, {args.messages} messages, {args.senders} "
              f"senders, {args.calls} round trips; load average {os.getloadavg()[0]:.2f})\n")
        for row in rows:
            print(f"- {row['stage']}: per {row['unit']}: "
                  + ", ".join(f"{op} {n:g}" for op, n in row["per_unit"].items()))
        if args.requests_json:
            args.requests_json.write_text(json.dumps(rows, indent=1))
        return
    print(f"\n`dormant dev` end to end ({args.source}), {args.actors} actors, {args.messages} messages, "
          f"{args.senders} senders, {args.calls} round trips; Python {sys.version.split()[0]}, "
          f"load average {os.getloadavg()[0]:.2f}\n")
    print("| table | messages/s | seconds | stack CPU ms / message | round trip median ms | p90 ms | "
          "stack CPU ms / round trip |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['stage']} | {row['rate']:.1f} | {row['seconds']:.1f} | {row['cpu_ms_per_message']:.1f} | "
              f"{row['rt_median']:.0f} | {row['rt_p90']:.0f} | {row['rt_cpu_ms']:.1f} |")


if __name__ == "__main__":
    main()
