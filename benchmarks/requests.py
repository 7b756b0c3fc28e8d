"""AWS requests per wake-up and per step on DynamoDB + SQS, and the cost per million workflow steps.

    .venv/bin/python benchmarks/requests.py              # starts a moto server on 127.0.0.1
    .venv/bin/python benchmarks/requests.py --endpoint http://127.0.0.1:5000 --rounds 20

Runs each scenario through the real pieces: the client side (ActorService on the DynamoDB store and the
SQS transport), SQS, the poller's receive and delete (what Lambda's event source does, billed as SQS
requests), and the worker. Every request is counted through botocore's event hooks (dormant.aws.metering);
receives that came back empty are polling overhead, a fixed cost independent of load, and are left out.
Capacity units come from item sizes: 1 WCU per started KB written, 1 RCU per started 4 KB read
(strongly consistent). Prices: DynamoDB on-demand $0.625 per million WCU, $0.125 per million RCU,
SQS $0.40 per million requests.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Run as a script, this file's folder comes first on sys.path and its name would shadow the `requests`
# package (moto needs it): put the repository root there instead (it also makes `examples` importable).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from aiobotocore.session import get_session  # type: ignore[import-untyped]  # noqa: E402

from dormant.aws.metering import (  # noqa: E402
    PRICE_PER_READ_UNIT,
    PRICE_PER_SQS_REQUEST,
    PRICE_PER_WRITE_UNIT,
    Meter,
    instrument,
)
from dormant.aws.poller import SqsPoller  # noqa: E402
from dormant.aws.store import DynamoEventStore, client_config, create_table  # noqa: E402
from dormant.aws.transport import SqsTransport, create_queues  # noqa: E402
from dormant.aws.worker import Worker  # noqa: E402
from dormant.client import ActorHandle, Client  # noqa: E402
from dormant.runtime.clocks import SystemClock  # noqa: E402
from dormant.runtime.service import ActorService  # noqa: E402
from dormant.settings import Settings  # noqa: E402
from examples.counter import registry as counter_registry  # noqa: E402
from examples.fan_out_fan_in import registry as join_registry  # noqa: E402
from examples.simple_workflow import registry as invoice_registry  # noqa: E402
from examples.timers import registry as timers_registry  # noqa: E402


class Stack:
    """Client side, SQS and a worker on one endpoint, each with its own clients and its own meter."""

    def __init__(self, endpoint: str, registry: Any) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.settings = Settings(endpoint_url=endpoint, region="us-east-1", table=f"bench-{suffix}",
                                 queue_name=f"bench-{suffix}.fifo", timer_queue_name=f"bench-timers-{suffix}",
                                 dlq_name=f"bench-dlq-{suffix}", fifo_dlq_name=f"bench-dlq-{suffix}.fifo")
        self.registry = registry
        self.meters = {part: Meter() for part in ("client", "worker", "poller")}
        self.left_out = {part: Meter() for part in self.meters}  # empty receives, the benchmark's own reads
        self.baseline = {part: Meter() for part in self.meters}
        self.baseline_wakes = 0
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> Stack:
        session = get_session()

        async def client(service: str, part: str) -> Any:
            made = await self._stack.enter_async_context(session.create_client(
                service, config=client_config(), **self.settings.client_kwargs(service)))
            instrument(made, always=self.meters[part])
            return made

        dynamodb, sqs = await client("dynamodb", "client"), await client("sqs", "client")
        await create_table(dynamodb, self.settings)
        self.urls = await create_queues(sqs, self.settings, visibility_timeout=30)
        self.mark()
        clock = SystemClock()
        self.store = DynamoEventStore(dynamodb, self.settings)
        self.service = ActorService(self.registry, self.store, SqsTransport(sqs, self.urls, clock), clock)
        self.client = Client(self.service)
        worker_sqs = await client("sqs", "worker")
        transport = SqsTransport(worker_sqs, self.urls, clock)
        worker_store = DynamoEventStore(await client("dynamodb", "worker"), self.settings)
        self.worker = Worker(ActorService(self.registry, worker_store, transport, clock), transport)
        poll = await client("sqs", "poller")
        self.pollers = [SqsPoller(poll, url, self.worker.handle, wait_seconds=0)
                        for url in (self.urls.wake, self.urls.timers)]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    @asynccontextmanager
    async def unmetered(self, part: str = "client") -> AsyncIterator[None]:
        """Leave out what the benchmark itself sends here (reads that check progress)."""
        before = self.meters[part].copy()
        yield
        self.left_out[part].add(self.meters[part] - before)

    async def drain(self, until: Callable[[], Awaitable[bool]] | None = None, timeout: float = 30.0) -> None:
        """Receive and handle batches until both queues are empty (and `until()` holds, waiting for timers)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            busy = False
            for poller in self.pollers:
                before = self.meters["poller"].copy()
                messages = await poller.receive(wait_seconds=0)
                if not messages:  # polling overhead: a fixed cost, not per step
                    self.left_out["poller"].add(self.meters["poller"] - before)
                    continue
                busy = True
                await poller.handle(messages)
            if not busy:
                if until is None:
                    return
                async with self.unmetered():
                    if await until():
                        return
                await asyncio.sleep(0.05)  # a timer is on its way: real SQS delay
        raise TimeoutError("the scenario did not finish")

    def counted(self, part: str) -> Meter:
        return self.meters[part] - self.left_out[part] - self.baseline[part]

    def mark(self) -> None:
        """Count from here on."""
        self.baseline = {part: self.meters[part] - self.left_out[part] for part in self.meters}
        self.baseline_wakes = len(self.worker.reports) if hasattr(self, "worker") else 0


@dataclass
class Result:
    name: str
    steps: int
    wakes: int
    parts: dict[str, Meter]

    @property
    def total(self) -> Meter:
        total = Meter()
        for meter in self.parts.values():
            total.add(meter)
        return total

    def cost_per_million_steps(self) -> float:
        return self.total.cost() / self.steps * 1_000_000


async def measure(endpoint: str, name: str, registry: Any,
                  scenario: Callable[[Stack], Awaitable[int]]) -> Result:
    async with Stack(endpoint, registry) as stack:
        steps = await scenario(stack)
        return Result(name, steps, len(stack.worker.reports) - stack.baseline_wakes,
                      {part: stack.counted(part) for part in stack.meters})


async def warm(stack: Stack, handle: ActorHandle) -> None:
    """Create the actor and run its first wake-up; what that cost is left out (a steady state is measured)."""
    await handle.status()
    await stack.drain()
    stack.mark()


def simple_workflow(rounds: int) -> Callable[[Stack], Awaitable[int]]:
    async def run(stack: Stack) -> int:  # per actor: create -> one wake-up -> three steps -> completed
        for n in range(rounds):
            await stack.service.ensure_created(stack.service.ref("invoice", [f"inv-{n}"]))
            await stack.drain()
        return 3 * rounds

    return run


def queue_loop(rounds: int) -> Callable[[Stack], Awaitable[int]]:
    async def run(stack: Stack) -> int:  # per message: one wake-up, one loop iteration, one step
        handle = stack.client.get_or_create("workflow-counter", ["bench"])
        await warm(stack, handle)
        for _ in range(rounds):
            await handle.send("counter", {"delta": 1})
            await stack.drain()
        async with stack.unmetered():
            state = await handle.get_state()
        assert state.processed == rounds, state
        return rounds

    return run


def queue_loop_batched(rounds: int) -> Callable[[Stack], Awaitable[int]]:
    async def run(stack: Stack) -> int:  # ten messages arrive together: one batch, one wake-up, ten steps
        handle = stack.client.get_or_create("workflow-counter", ["bench"])
        await warm(stack, handle)
        for _ in range(rounds):
            for _ in range(10):
                await handle.send("counter", {"delta": 1})
            await stack.drain()
        async with stack.unmetered():
            state = await handle.get_state()
        assert state.processed == 10 * rounds, state
        return 10 * rounds

    return run


def join(rounds: int) -> Callable[[Stack], Awaitable[int]]:
    async def run(stack: Stack) -> int:  # per refresh: three branch steps and a merge step
        handle = stack.client.get_or_create("fan-out-fan-in", ["bench"])
        await warm(stack, handle)
        for _ in range(rounds):
            await handle.send("refresh", {})
            await stack.drain()
        async with stack.unmetered():
            state = await handle.get_state()
        assert state.refreshes == rounds, state
        return 4 * rounds

    return run


def sleep(rounds: int) -> Callable[[Stack], Awaitable[int]]:
    async def run(stack: Stack) -> int:  # per reminder: a wake-up to start the sleep, a timer, one step
        handle = stack.client.get_or_create("reminder", ["bench"])
        await warm(stack, handle)
        for n in range(rounds):
            await handle.send("reminders", {"text": f"r{n}", "at": time.time() + 1})

            async def fired(count: int = n + 1) -> bool:
                return len((await handle.get_state()).fired) >= count

            await stack.drain(until=fired)
        return rounds

    return run


def sleep_with_arrivals(rounds: int) -> Callable[[Stack], Awaitable[int]]:
    async def run(stack: Stack) -> int:  # per round: a reminder starts a 1 s sleep, 3 more arrive during it
        handle = stack.client.get_or_create("reminder", ["bench"])
        await warm(stack, handle)
        for n in range(rounds):
            at = time.time() + 1
            await handle.send("reminders", {"text": f"r{n}-0", "at": at})
            await stack.drain()  # the first one's wake-up: the sleep starts, its timer is sent
            for k in range(1, 4):  # each wakes the sleeping actor, which stays asleep until the same deadline
                await handle.send("reminders", {"text": f"r{n}-{k}", "at": at})
                await stack.drain()

            async def fired(count: int = 4 * (n + 1)) -> bool:
                return len((await handle.get_state()).fired) >= count

            await stack.drain(until=fired)
        return 4 * rounds

    return run


SCENARIOS: list[tuple[str, Any, Callable[[int], Callable[[Stack], Awaitable[int]]]]] = [
    ("simple workflow (3 steps)", invoice_registry, simple_workflow),
    ("queue-loop iteration", counter_registry, queue_loop),
    ("queue loop, 10 messages per batch", counter_registry, queue_loop_batched),
    ("3-branch join + merge", join_registry, join),
    ("sleep 1 s + step", timers_registry, sleep),
    ("sleep 1 s, 3 messages arrive during it", timers_registry, sleep_with_arrivals),
]


def table(results: list[Result]) -> str:
    head = ("| scenario | steps | wake-ups | reads / wake-up | commits / step | writes / step | RCU / step | "
            "WCU / step | SQS requests / step | KB / step | $ per million steps |")
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        total, worker = r.total, r.parts["worker"]
        lines.append(
            f"| {r.name} | {r.steps} | {r.wakes} | {worker.dynamodb_reads / max(r.wakes, 1):.2f} | "
            f"{worker.requests['dynamodb.PutItem'] / r.steps:.2f} | {total.dynamodb_writes / r.steps:.2f} | "
            f"{total.read_units / r.steps:.2f} | "
            f"{total.write_units / r.steps:.2f} | {total.sqs_requests / r.steps:.2f} | "
            f"{(total.bytes_sent + total.bytes_received) / 1024 / r.steps:.1f} | {r.cost_per_million_steps():.2f} |")
    return "\n".join(lines)


def costs(results: list[Result]) -> str:
    lines = ["| scenario | DynamoDB writes | DynamoDB reads | SQS | total |", "|---|---:|---:|---:|---:|"]
    for r in results:
        m, per = r.total, 1_000_000 / r.steps
        parts = (m.write_units * PRICE_PER_WRITE_UNIT * per, m.read_units * PRICE_PER_READ_UNIT * per,
                 m.sqs_requests * PRICE_PER_SQS_REQUEST * per)
        lines.append(f"| {r.name} | " + " | ".join(f"{part:.2f}" for part in parts) + f" | {sum(parts):.2f} |")
    return "\n".join(lines)


def detail(results: list[Result]) -> str:
    lines = []
    for r in results:
        lines.append(f"- {r.name}:")
        for part, meter in r.parts.items():
            ops = ", ".join(f"{name} {count}" for name, count in sorted(meter.requests.items())) or "none"
            lines.append(f"  - {part}: {ops}")
    return "\n".join(lines)


async def main(endpoint: str | None, rounds: int) -> None:
    server = None
    if endpoint is None:
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
    try:
        results = [await measure(endpoint, name, registry, make(rounds)) for name, registry, make in SCENARIOS]
    finally:
        if server is not None:
            server.stop()
    print(f"AWS requests per workflow step ({rounds} rounds per scenario, moto server, steady state)\n")
    print(table(results))
    print("\nCost per million steps, USD, by part:\n")
    print(costs(results))
    print("\nRequests by operation (whole scenario):")
    print(detail(results))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", help="a DynamoDB/SQS endpoint (default: start a moto server)")
    parser.add_argument("--rounds", type=int, default=10)
    arguments = parser.parse_args()
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        os.environ.setdefault(name, value)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    asyncio.run(main(arguments.endpoint, arguments.rounds))
