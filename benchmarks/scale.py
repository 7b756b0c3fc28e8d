"""Scale on paper: a million actors under a stated mix -> requests, USD a month, and the quota that binds first.

    .venv/bin/python benchmarks/scale.py                                  # the default mix (docs/scale.md)
    .venv/bin/python benchmarks/scale.py --actors 100000 --messages 50 --peak 5 --batch 1
    .venv/bin/python benchmarks/scale.py --priced /tmp/priced.json        # a fresh `benchmarks/requests.py --json`
    .venv/bin/python benchmarks/scale.py --check /tmp/devstack.json       # the request model against `dormant dev`

The per-unit usage of every kind of work (requests by operation, capacity units, invocations and their billed
milliseconds, log bytes, stored bytes) is what benchmarks/requests.py measured on the real pieces, read from its
JSON (benchmarks/priced.json is the run docs/performance.md shows). This script only multiplies: units per actor
per day x actors x 30 days, priced by benchmarks/pricing.py, and compares the peak rates with the quotas of the
deployment (template.yaml's settings) and of the account (AWS's defaults), each with its source in docs/scale.md.
`--check` compares the request model with the counts `benchmarks/devstack.py --count-requests` measured on a
running `dormant dev`.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from benchmarks import prices  # noqa: E402
from benchmarks.prices import ROOT, Deployment, deployment  # noqa: E402
from benchmarks.pricing import LINES, Usage, bill  # noqa: E402

DAY, MONTH_DAYS = 86_400, 30
HOP_SECONDS = 900  # SQS's longest delay: a longer sleep is re-sent (hops) every 900 s
TOMBSTONE_DAYS = 7  # DORMANT_DEDUPE_TTL_SECONDS: a consumed message's tombstone is kept this long
ITEM_COLLECTION_BYTES = 10 * 1024**3  # with a local secondary index, one partition key holds at most 10 GB


@dataclass(frozen=True)
class Mix:
    """What each actor does per day (the default: docs/scale.md, "The mix")."""

    actors: int = 1_000_000
    messages: float = 10.0  # client messages to a queue loop, each waking the actor by itself
    calls: float = 2.0  # request/response calls (send with wait=true)
    timers: float = 4.0  # sleeps that suspend the actor
    timer_hours: float = 1.0  # how long each sleep is (a sleep over 15 minutes hops every 15 minutes)
    runs: float = 0.0  # short workflow runs started per actor (a new actor each: create, 3 steps, complete)
    batch: float = 10.0  # messages per FIFO event-source batch (across actors; 1 when traffic is sparse)
    timer_batch: float = 10.0  # timers per timer event-source batch
    peak: float = 3.0  # peak rate / average rate (quotas are checked at the peak)
    hot_actor: float = 1.0  # messages per second the busiest single actor receives at the peak


def load_priced(path: Path) -> dict[str, dict[str, Any]]:
    return {row["scenario"]["scenario"]: row["scenario"] for row in json.loads(path.read_text())}


PER_CONTAINER = "sqs.GetQueueAttributes"
"""The worker reads a queue's visibility timeout once per container (a batch of new wake-ups in a fresh container
may read it once each): a cost of containers, not of units of work, left out of the model."""


def _usage(row: dict[str, Any]) -> Usage:
    usage = Usage(**{f.name: float(row["usage"].get(f.name, 0.0)) for f in fields(Usage)})
    usage.sqs_standard -= row["requests"].get("worker", {}).get(PER_CONTAINER, 0.0)  # the timer queue's, here
    return usage


def _diff(a: Usage, b: Usage, scale: float = 1.0) -> Usage:
    return Usage(**{f.name: (getattr(a, f.name) - getattr(b, f.name)) * scale for f in fields(Usage)})


def _requests(row: dict[str, Any]) -> dict[str, float]:
    total: dict[str, float] = {}
    for ops in row["requests"].values():
        for op, n in ops.items():
            if op != PER_CONTAINER:
                total[op] = total.get(op, 0.0) + n
    return total


def _mix_requests(a: dict[str, float], b: dict[str, float], scale: float = 1.0) -> dict[str, float]:
    return {op: (a.get(op, 0.0) - b.get(op, 0.0)) * scale for op in set(a) | set(b)}


def _plus_requests(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {op: a.get(op, 0.0) + b.get(op, 0.0) for op in set(a) | set(b)}


def _between_requests(one: dict[str, float], ten: dict[str, float], batch: float) -> dict[str, float]:
    weight = (1 - 1 / max(1.0, batch)) / (1 - 1 / 10)
    return {op: one.get(op, 0.0) + (ten.get(op, 0.0) - one.get(op, 0.0)) * weight for op in set(one) | set(ten)}


def _between(one: Usage, ten: Usage, batch: float) -> Usage:
    """Usage at `batch` messages per event-source batch, between the measured batches of 1 and of 10 (linear in
    the per-batch share 1/batch: the receive, the delete, the invocation and its fixed time are per batch)."""
    weight = (1 - 1 / max(1.0, batch)) / (1 - 1 / 10)
    return Usage(**{f.name: getattr(one, f.name) + (getattr(ten, f.name) - getattr(one, f.name)) * weight
                    for f in fields(Usage)})


@dataclass
class Kind:
    """One kind of work: its usage and its requests by operation, per unit."""

    name: str
    per_day: float  # units per actor per day
    usage: Usage
    requests: dict[str, float]


def kinds(mix: Mix, priced: dict[str, dict[str, Any]]) -> list[Kind]:
    """The mix's work, per unit, from the measured scenarios."""
    loop, call = priced["queue-loop iteration"], priced["request/response (send, wait=true)"]
    suspended, hopping = priced["sleep 2 s + step (suspended)"], priced["sleep 5 s in 1 s hops + step"]
    wake1 = priced["10 actors, 1 message each, batch size 1"]
    wake10 = priced["10 actors, 1 message each, batch size 10"]
    timer1 = priced["10 timers due together, timer batch 1"]
    timer10 = priced["10 timers due together, timer batch 10, window 1 s"]
    # a message: the steady-state queue-loop iteration (tombstones included), its delivery at the mix's batch fill
    message = _usage(loop).plus(_diff(_between(_usage(wake1), _usage(wake10), mix.batch), _usage(wake1)))
    timer_batching = _diff(_between(_usage(timer1), _usage(timer10), mix.timer_batch), _usage(timer1))
    timer = _diff(_usage(suspended), _usage(loop)).plus(timer_batching)  # what a suspension adds to a message
    # sleep_hopping: 5 s in timers of at most 1 s; its hops are the worker's sends beyond the suspended sleep's one
    hops = (hopping["requests"]["worker"].get("sqs.SendMessage", 0.0)
            - suspended["requests"]["worker"].get("sqs.SendMessage", 0.0)) or 1.0
    hop = _diff(_usage(hopping), _usage(suspended), 1 / hops).plus(timer_batching)  # a hop is a timer delivery too
    hops_per_timer = max(0, math.ceil(mix.timer_hours * 3600 / HOP_SECONDS) - 1)
    delivery = _mix_requests(_between_requests(_requests(wake1), _requests(wake10), mix.batch), _requests(wake1))
    timer_delivery = _mix_requests(_between_requests(_requests(timer1), _requests(timer10), mix.timer_batch),
                                   _requests(timer1))
    found = [Kind("message", mix.messages, message, _plus_requests(_requests(loop), delivery)),
             Kind("call", mix.calls, _usage(call), _requests(call)),
             Kind("timer", mix.timers, timer,
                  _plus_requests(_mix_requests(_requests(suspended), _requests(loop)), timer_delivery)),
             Kind("hop", mix.timers * hops_per_timer, hop,
                  _plus_requests(_mix_requests(_requests(hopping), _requests(suspended), 1 / hops), timer_delivery))]
    if mix.runs:
        run = priced["simple workflow (3 steps)"]
        found.append(Kind("workflow run", mix.runs, _usage(run), _requests(run)))
    return found


def storage_bytes(mix: Mix, priced: dict[str, dict[str, Any]]) -> float:
    """Bytes one long-lived actor keeps: its commit ring and status item (as measured after the queue-loop
    scenario, one actor), and a week of tombstones at its message rate."""
    kept = priced["queue-loop iteration"]["storage"]
    ring = sum(v["bytes"] for k, v in kept.items() if k in ("c#", "s#", "w#"))
    return ring + tombstone_bytes(priced) * (mix.messages + mix.calls + mix.timers) * TOMBSTONE_DAYS


# -- quotas -----------------------------------------------------------------------------------------------------

@dataclass
class Quota:
    name: str
    demand: float
    limit: float
    unit: str
    what: str  # what to configure or request when it binds

    @property
    def use(self) -> float:
        return self.demand / self.limit if self.limit else math.inf


def template_parameters(root: Path = ROOT) -> dict[str, int]:
    """Defaults of template.yaml's numeric parameters (ThrottlingRateLimit, WorkerMaxConcurrency, ...)."""
    text = (root / "template.yaml").read_text()
    found = re.findall(r"\n  (\w+):\n    Type: Number\n    Default: (-?\d+)", text)
    return {name: int(value) for name, value in found}


def tombstone_bytes(priced: dict[str, dict[str, Any]]) -> float:
    """A tombstone's stored size, as measured after the queue-loop scenario (250 bytes if none was there)."""
    kept = priced["queue-loop iteration"]["storage"].get("i# tombstone", {"items": 0, "bytes": 0})
    return float(kept["bytes"] / kept["items"]) if kept["items"] else 250.0


def quotas(mix: Mix, work: list[Kind], hot: Usage, tombstone: float) -> list[Quota]:
    """Every quota the mix meets at its peak, most used first. `hot`: one message to an actor that receives
    messages back to back (they share batches and wake-ups: the measured 10-per-batch queue loop)."""
    params = template_parameters()
    per_second = mix.actors * mix.peak / DAY
    usage = Usage()
    for k in work:
        usage = usage.plus(k.usage.per(1 / (k.per_day * per_second)))  # per second at the peak
    http = usage.gateway_requests
    api_concurrency = usage.api_ms / 1000
    worker_concurrency = usage.worker_ms / 1000
    fifo_sends = (mix.messages + mix.calls + mix.runs) * per_second  # one SendMessage each (the API's)
    # One actor is one FIFO message group and one partition key: its messages share batches and wake-ups.
    cycle_ms = hot.worker_ms / max(hot.worker_invocations, 1e-9) + 20  # an invocation, a receive, a delete
    per_actor = min(1000 / (hot.write_units + hot.index_write_units), 3000 / hot.read_units, 10 * 1000 / cycle_ms)
    status_changes = 3 * mix.runs * per_second  # a short run's status item: pending, sleeping, completed
    tombstone_rate = ITEM_COLLECTION_BYTES / (TOMBSTONE_DAYS * DAY * tombstone)
    found = [
        Quota("API Gateway stage throttle (ThrottlingRateLimit)", http, params["ThrottlingRateLimit"], "requests/s",
              "raise ThrottlingRateLimit and ThrottlingBurstLimit (template.yaml; infra/ variables)"),
        Quota("API Gateway account throttle (10,000 requests/s per Region, soft)", http, 10_000, "requests/s",
              "request an increase (Service Quotas: Amazon API Gateway, throttle rate)"),
        Quota("API function concurrency (ApiReservedConcurrency)", api_concurrency,
              params["ApiReservedConcurrency"], "executions",
              "raise ApiReservedConcurrency: each send(wait=true) holds an execution while it waits"),
        Quota("worker concurrency (2 event sources x WorkerMaxConcurrency)", worker_concurrency,
              params["WorkerMaxConcurrency"] * 2, "executions",
              "raise WorkerMaxConcurrency and WorkerReservedConcurrency (keep 2 x max <= reserved)"),
        Quota("Lambda concurrency of the account (1,000 per Region, soft)", api_concurrency + worker_concurrency,
              1000, "executions", "request an increase (Service Quotas: AWS Lambda, concurrent executions)"),
        Quota("Lambda scaling (1,000 new environments per 10 s per function)", max(api_concurrency,
              worker_concurrency), 1000, "environments in 10 s", "provisioned concurrency before a launch"),
        Quota("SQS FIFO SendMessage, high throughput (70,000/s per action, us-east-1)", fifo_sends, 70_000,
              "requests/s", "send_many (SendMessageBatch); spread actors over more queues"),
        Quota("SQS FIFO messages in flight (20,000 per queue)", worker_concurrency * mix.batch, 20_000, "messages",
              "shorter invocations; more queues"),
        Quota("SQS standard messages in flight (120,000 per queue)", worker_concurrency * mix.timer_batch, 120_000,
              "messages", "shorter invocations; request an increase"),
        Quota("DynamoDB table writes, indexes included (40,000 WRU/s on demand, soft)",
              usage.write_units + usage.index_write_units, 40_000, "WRU/s",
              "request an increase; warm throughput before a launch"),
        Quota("DynamoDB table reads (40,000 RRU/s on demand, soft)", usage.read_units, 40_000, "RRU/s",
              "request an increase"),
        Quota("the busiest actor: its partition (1,000 WCU/s, 3,000 RCU/s) and its FIFO group's batch cycle",
              mix.hot_actor, per_actor, "messages/s", "shard a hot actor over several keys; send_many"),
        Quota("the busiest actor's item collection (10 GB: a week of tombstones, with the `pending` index)",
              mix.hot_actor, tombstone_rate, "messages/s", "a shorter DORMANT_DEDUPE_TTL_SECONDS; shard the actor"),
        Quota("`status` index, one actor type (1,000 WCU/s per key value; a status change writes 2)",
              status_changes * 2, 1000, "WCU/s", "spread a type's status items over several index keys"),
    ]
    return sorted(found, key=lambda q: q.use, reverse=True)


# -- report -----------------------------------------------------------------------------------------------------

def monthly(mix: Mix, work: list[Kind], deploy: Deployment, per_actor_bytes: float
            ) -> tuple[dict[str, float], float]:
    """USD a month by bill line, and the storage line."""
    units = {k.name: k.per_day * mix.actors * MONTH_DAYS for k in work}
    lines = dict.fromkeys(LINES, 0.0)
    for k in work:
        for line, usd in bill(k.usage, deploy).items():
            lines[line] += usd * units[k.name]
    gb = mix.actors * per_actor_bytes / 1024**3
    storage = gb * (prices.DYNAMODB_STORAGE_GB_MONTH + prices.DYNAMODB_PITR_GB_MONTH)
    return lines, storage


def report(mix: Mix, priced: dict[str, dict[str, Any]], deploy: Deployment) -> str:
    work = kinds(mix, priced)
    per_actor = storage_bytes(mix, priced)
    lines, storage = monthly(mix, work, deploy, per_actor)
    out = [f"{mix.actors:,} actors; per actor per day: {mix.messages:g} messages, {mix.calls:g} calls, "
           f"{mix.timers:g} sleeps of {mix.timer_hours:g} h, {mix.runs:g} short runs; FIFO batches of {mix.batch:g}, "
           f"timer batches of {mix.timer_batch:g}; peak {mix.peak:g}x the average; Lambda {deploy.memory_mb} MB "
           f"{deploy.architecture}", ""]
    out += ["| work | units a month | USD per million | USD a month |", "|---|---:|---:|---:|"]
    for k in work:
        units = k.per_day * mix.actors * MONTH_DAYS
        per_million = sum(bill(k.usage, deploy).values()) * 1e6
        out.append(f"| {k.name} | {units:,.0f} | {per_million:.2f} | {per_million * units / 1e6:,.0f} |")
    out.append(f"| storage ({per_actor / 1024:.1f} KB per actor, with point-in-time recovery) | | | {storage:,.0f} |")
    total = sum(lines.values()) + storage
    out.append(f"| **total** | | | **{total:,.0f}** |")
    out += ["", "| bill line | USD a month | share |", "|---|---:|---:|"]
    for line, usd in sorted(lines.items(), key=lambda item: -item[1]):
        if usd:
            out.append(f"| {line} | {usd:,.0f} | {usd / total:.0%} |")
    out.append(f"| DynamoDB storage and backups | {storage:,.0f} | {storage / total:.0%} |")
    requests = {}
    for k in work:
        for op, n in k.requests.items():
            requests[op] = requests.get(op, 0.0) + n * k.per_day * mix.actors * MONTH_DAYS
    out += ["", "Requests a month: " + ", ".join(f"{op} {n / 1e6:,.0f} M" for op, n in sorted(requests.items())
                                                if n >= 1e5)]
    out += ["", "| quota (at the peak) | demand | limit | use | what to configure or request |",
            "|---|---:|---:|---:|---|"]
    ranked = quotas(mix, work, _usage(priced["queue loop, 10 messages per batch"]), tombstone_bytes(priced))
    for quota in ranked:
        mark = " **binds first**" if quota is ranked[0] else ""
        out.append(f"| {quota.name}{mark} | {quota.demand:,.1f} {quota.unit} | {quota.limit:,.1f} | "
                   f"{quota.use:.0%} | {quota.what} |")
    return "\n".join(out)


def check(devstack: Path, priced: dict[str, dict[str, Any]]) -> str:
    """The request model (what benchmarks/requests.py measured per message and per call) against the requests
    `dormant dev` made (benchmarks/devstack.py --count-requests), operation by operation.

    The model per message: one status read, one SQS send and one inbox write (the API), one commit (each message
    is one loop iteration, one step), a batch of tombstones per 16 commits of an actor; per new actor its
    creation and its status item (the send's status read finds none), its status change at the first wake-up
    and one settle probe. How the dev stack's senders batch (a wake-up may take several messages, a receive several
    actors) is its own: wake-ups (2 Queries each) and receives are shown as measured, not predicted."""
    rows = json.loads(devstack.read_text())
    loop = _requests(priced["queue-loop iteration"])
    call = _requests(priced["request/response (send, wait=true)"])
    out = ["| stage | operation | model | dev stack | dev / model |", "|---|---|---:|---:|---:|"]
    for row in rows:
        counts, units = row["counts"], row["units"]
        receives = counts.get("sqs.ReceiveMessage", 0)
        if row["unit"] == "call":
            model = {op: n * units for op, n in call.items() if op != "sqs.GetQueueAttributes"}
        else:
            new = row.get("actors", 0)
            model = {"dynamodb.GetItem": units, "sqs.SendMessage": units,
                     "dynamodb.PutItem": 2 * units + 3 * new, "dynamodb.BatchGetItem": new,
                     "dynamodb.BatchWriteItem": loop.get("dynamodb.BatchWriteItem", 0.0) * units,
                     "sqs.DeleteMessageBatch": receives}
        for op in sorted(set(model) | {k for k in counts if k.startswith(("dynamodb.", "sqs."))}):
            measured = counts.get(op, 0)
            expected = model.get(op)
            shown = f"{expected:,.1f}" if expected is not None else "(as measured)"
            ratio = f"{measured / expected:.2f}" if expected else "-"
            out.append(f"| {row['stage']} | {op} | {shown} | {measured:,} | {ratio} |")
        out.append(f"| {row['stage']} | wake-ups (Queries / 2) | | {counts.get('dynamodb.Query', 0) / 2:,.0f} | |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = Mix()
    for spec in fields(Mix):
        parser.add_argument(f"--{spec.name.replace('_', '-')}", type=type(getattr(defaults, spec.name)),
                            default=getattr(defaults, spec.name))
    parser.add_argument("--priced", type=Path, default=_HERE / "priced.json",
                        help="benchmarks/requests.py --json output (default: the run docs/performance.md shows)")
    parser.add_argument("--check", type=Path, help="benchmarks/devstack.py --requests-json output to compare with")
    args = parser.parse_args()
    mix = Mix(**{spec.name: getattr(args, spec.name) for spec in fields(Mix)})
    priced = load_priced(args.priced)
    print(report(mix, priced, deployment()))
    if args.check:
        print("\nThe request model against `dormant dev` (benchmarks/devstack.py --count-requests):\n")
        print(check(args.check, priced))


if __name__ == "__main__":
    main()
