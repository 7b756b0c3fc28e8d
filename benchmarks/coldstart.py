"""Cold starts of the Lambda functions: import + first invocation in fresh interpreters, against a moto server.

    .venv/bin/python benchmarks/coldstart.py                 # 7 cold starts of each handler, medians
    make coldstart                                           # the built bundle and layer, with and without bytecode

Three handlers, each started in a new interpreter per run and invoked once, as a Lambda container's
first request:
- **floor**: a bare boto3 handler doing one DynamoDB GetItem (`import boto3`, a client, `get_item`);
- **worker**: functions/worker/handler.py on an SQS event that wakes a counter actor with one message;
- **api**: functions/api/handler.py (Mangum) on an API Gateway HTTP API event reading that actor's state;
- **fastapi-floor**: the least a FastAPI app behind Mangum costs: one route doing that GetItem through boto3
  (DESIGN.md has the API on FastAPI + Mangum; this is the floor of those dependencies).

Each child reports its own import time (the module import, i.e. Lambda's init phase), the first invocation,
and its CPU time; the parent adds the interpreter's start (wall, from spawn to exit). CPU time is the steadier
number on a shared machine.

By default the handlers run from the repository in the dev venv (every dev-only package installed, bytecode
cached). With `--bundle DIR --layer DIR` they run as on Lambda: the base interpreter (no venv), the function
bundle (`make build-WorkerFunction`) and the layer (`make build-DependenciesLayer`, trimmed) on PYTHONPATH, built
for this machine's Python by `make coldstart`; `--no-bytecode` runs copies without any .pyc (what a bundle that
ships none costs: /var/task is read-only, so Lambda compiles every module at every cold start).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "lib"))

CHILD = r"""
import json, sys, time
started_cpu, started = time.process_time(), time.perf_counter()
kind, payload = sys.argv[1], json.loads(sys.argv[2])
class Context:
    function_name = "coldstart"; memory_limit_in_mb = 512; aws_request_id = "cold-1"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:coldstart"
    def get_remaining_time_in_millis(self): return 60000
if kind == "floor":
    import boto3
    client = boto3.client("dynamodb")
    def handler(event, context):
        return client.get_item(TableName=event["table"], Key={"pk": {"S": event["pk"]}, "sk": {"S": event["sk"]}})
elif kind == "fastapi-floor":
    import os
    import boto3
    from fastapi import FastAPI
    from mangum import Mangum
    client = boto3.client("dynamodb")
    app = FastAPI()
    @app.get("/actors/{name}/{key}/state")
    def state(name: str, key: str) -> dict:
        item = client.get_item(TableName=os.environ["DORMANT_TABLE"], Key={
            "pk": {"S": os.environ["COLDSTART_PK"]}, "sk": {"S": os.environ["COLDSTART_SK"]}})["Item"]
        return {"version": item["sk"]["S"]}
    handler = Mangum(app, lifespan="off")
elif kind == "worker":
    from functions.worker.handler import handler
else:
    from functions.api.handler import handler
imported, imported_cpu = time.perf_counter(), time.process_time()
response = handler(payload, Context())
done, done_cpu = time.perf_counter(), time.process_time()
ok = {"floor": lambda r: "Item" in r, "worker": lambda r: r == {"batchItemFailures": []},
      "api": lambda r: r["statusCode"] == 200, "fastapi-floor": lambda r: r["statusCode"] == 200}[kind](response)
print(json.dumps({"import_ms": (imported - started) * 1000, "first_ms": (done - imported) * 1000,
                  "import_cpu_ms": (imported_cpu - started_cpu) * 1000,
                  "first_cpu_ms": (done_cpu - imported_cpu) * 1000, "ok": ok, "modules": sorted(sys.modules)}))
"""


def start_moto() -> Any:
    from tests.servers import MotoServer

    server = MotoServer()
    server.start()
    return server


class Fixture:
    """A table, queues and one counter actor on the moto server; a fresh wake-up event per worker run."""

    def __init__(self, endpoint: str) -> None:
        import boto3

        from dormant.settings import Settings

        suffix = uuid.uuid4().hex[:8]
        self.endpoint = endpoint
        self.settings = Settings(endpoint_url=endpoint, region="us-east-1", table=f"cold-{suffix}",
                                 queue_name=f"cold-{suffix}.fifo", timer_queue_name=f"cold-timers-{suffix}",
                                 dlq_name=f"cold-dlq-{suffix}", fifo_dlq_name=f"cold-dlq-{suffix}.fifo")
        self.sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
        self.received: list[dict[str, Any]] = []
        self.env = {**os.environ, "AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": "us-east-1",
                    "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "cold", "AWS_SECRET_ACCESS_KEY": "cold",
                    "DORMANT_APP": "examples.counter:registry", "DORMANT_TABLE": self.settings.table,
                    # The synthetic API event carries no authorizer context (as behind API Gateway in iam or
                    # jwt mode): reading one is a dict lookup, not a cold-start cost.
                    "DORMANT_AUTH_MODE": "none", "PYTHONDONTWRITEBYTECODE": "1"}

    async def create(self) -> None:
        from aiobotocore.session import get_session  # type: ignore[import-untyped]

        from dormant.dynamodb.table import client_config, create_table
        from dormant.sqs.transport import create_queues

        session = get_session()
        async with session.create_client("dynamodb", config=client_config(), **self.settings.client_kwargs()) as db, \
                session.create_client("sqs", **self.settings.client_kwargs()) as sqs:
            await create_table(db, self.settings)
            self.urls = await create_queues(sqs, self.settings)
        self.env.update(DORMANT_QUEUE_URL=self.urls.wake, DORMANT_TIMER_QUEUE_URL=self.urls.timers)
        await self.send()
        self.drain()

    async def send(self) -> None:
        from dormant.aws.service import open_aws_service
        from dormant.client import Client
        from examples.counter import registry

        settings = self.settings.model_copy(update={"queue_url": self.urls.wake, "timer_queue_url": self.urls.timers})
        async with open_aws_service(registry, settings) as service:
            await Client(service).get_or_create("workflow-counter", ["cold"]).send("counter", {"delta": 1})

    def drain(self) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        while batch := self.sqs.receive_message(QueueUrl=self.urls.wake, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                                MessageSystemAttributeNames=["All"]).get("Messages", []):
            got += batch
            self.sqs.delete_message_batch(QueueUrl=self.urls.wake, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)])
        return got

    async def worker_event(self) -> dict[str, Any]:
        from dormant.sqs.poller import lambda_event, queue_arn

        await self.send()
        messages = []
        while not messages:
            messages = self.sqs.receive_message(QueueUrl=self.urls.wake, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                                MessageSystemAttributeNames=["All"]).get("Messages", [])
        self.received = messages
        return lambda_event(messages, arn=queue_arn(self.urls.wake, "us-east-1"), region="us-east-1")

    def delete_received(self) -> None:
        """What Lambda's event source does after a batch without failures: otherwise the actor's FIFO group
        stays blocked until the visibility timeout ends, and every run waits for it."""
        if self.received:
            self.sqs.delete_message_batch(QueueUrl=self.urls.wake, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(self.received)])
            self.received = []

    def floor_event(self) -> dict[str, Any]:
        from dormant.dynamodb.keys import ring_key
        from dormant.ports import ActorRef

        return {"table": self.settings.table, "pk": ActorRef(name="workflow-counter", key=("cold",)).id,
                "sk": ring_key(1, self.settings.snapshot_every)}

    @staticmethod
    def api_event() -> dict[str, Any]:
        from tests.api.support import http_api_v2_event

        return http_api_v2_event("GET", "/actors/workflow-counter/cold/state")


def run_child(python: str, kind: str, event: dict[str, Any], env: dict[str, str], cwd: Path,
              importtime: Path | None = None) -> dict[str, Any]:
    started = time.perf_counter()
    flags = ["-X", "importtime"] if importtime else []
    result = subprocess.run([python, *flags, "-c", CHILD, kind, json.dumps(event)], cwd=cwd, env=env,
                            capture_output=True, text=True, timeout=120)
    if importtime:
        importtime.write_text(result.stderr)
    wall = (time.perf_counter() - started) * 1000
    if result.returncode != 0:
        raise SystemExit(f"{kind} cold start failed:\n{result.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    if not report["ok"]:
        raise SystemExit(f"{kind}: the handler's answer was wrong:\n{result.stdout[-2000:]}")
    report["wall_ms"] = wall
    return report


def without_bytecode(source: Path, into: Path) -> Path:
    shutil.copytree(source, into, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return into


def import_profile(trace: str) -> dict[str, float]:
    """`-X importtime` output -> self time in ms by top-level package (where an init phase goes)."""
    by_package: dict[str, float] = {}
    for line in trace.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+\d+ \| *(\S+)", line)
        if match:
            package = match[2].split(".")[0]
            by_package[package] = by_package.get(package, 0.0) + int(match[1]) / 1000
    return dict(sorted(by_package.items(), key=lambda item: -item[1]))


async def measure(runs: int, bundle: Path | None, layer: Path | None, python: str,
                  no_bytecode: bool, importtime: Path | None = None) -> dict[str, list[dict[str, Any]]]:
    server = start_moto()
    try:
        fixture = Fixture(server.endpoint)
        await fixture.create()
        env = dict(fixture.env)
        cwd = ROOT
        with tempfile.TemporaryDirectory(prefix="dormant-coldstart-") as scratch:
            if bundle is not None and layer is not None:  # as Lambda runs it: /var/task first, then /opt/python
                if no_bytecode:
                    bundle = without_bytecode(bundle, Path(scratch) / "task")
                    layer = without_bytecode(layer, Path(scratch) / "opt")
                env["PYTHONPATH"] = os.pathsep.join([str(bundle), str(layer)])
                env["PYTHONNOUSERSITE"] = "1"
                cwd = bundle
            else:
                env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "lib")])
            env.update(COLDSTART_PK=fixture.floor_event()["pk"], COLDSTART_SK=fixture.floor_event()["sk"])
            results: dict[str, list[dict[str, Any]]] = {"floor": [], "worker": [], "api": [], "fastapi-floor": []}
            for _ in range(runs):
                results["floor"].append(run_child(python, "floor", fixture.floor_event(), env, cwd))
                results["worker"].append(run_child(python, "worker", await fixture.worker_event(), env, cwd))
                fixture.delete_received()
                results["api"].append(run_child(python, "api", fixture.api_event(), env, cwd))
                results["fastapi-floor"].append(run_child(python, "fastapi-floor", fixture.api_event(), env, cwd))
            if importtime is not None:  # one more run of each, traced (the trace itself slows the imports)
                importtime.mkdir(parents=True, exist_ok=True)
                events = {"floor": fixture.floor_event(), "worker": await fixture.worker_event(),
                          "api": fixture.api_event(), "fastapi-floor": fixture.api_event()}
                for kind, event in events.items():
                    run_child(python, kind, event, env, cwd, importtime / f"{kind}.txt")
                fixture.delete_received()
        return results
    finally:
        server.stop()


def table(results: dict[str, list[dict[str, Any]]]) -> str:
    def median(kind: str, field: str) -> float:
        return statistics.median(r[field] for r in results[kind])

    def least_cpu(kind: str) -> float:  # the least noisy estimate on a shared machine: CPU work is deterministic
        return min(r["import_cpu_ms"] + r["first_cpu_ms"] for r in results[kind])

    floor_total = median("floor", "import_cpu_ms") + median("floor", "first_cpu_ms")
    lines = ["| handler | import ms | first invocation ms | import + first ms | CPU import + first ms | "
             "wall incl. interpreter ms | x floor (CPU) | least CPU ms | x floor (least CPU) | modules loaded |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for kind in results:
        total = median(kind, "import_ms") + median(kind, "first_ms")
        cpu = median(kind, "import_cpu_ms") + median(kind, "first_cpu_ms")
        lines.append(f"| {kind} | {median(kind, 'import_ms'):.0f} | {median(kind, 'first_ms'):.0f} | {total:.0f} | "
                     f"{cpu:.0f} | {median(kind, 'wall_ms'):.0f} | {cpu / floor_total:.2f} | {least_cpu(kind):.0f} | "
                     f"{least_cpu(kind) / least_cpu('floor'):.2f} | {len(results[kind][-1]['modules'])} |")
    return "\n".join(lines)


def main() -> None:
    import asyncio

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--bundle", type=Path, help="the functions' built bundle (with --layer)")
    parser.add_argument("--layer", type=Path, help="the built layer's python/ folder (with --bundle)")
    parser.add_argument("--no-bytecode", action="store_true", help="run copies of bundle and layer without .pyc")
    parser.add_argument("--importtime", type=Path, metavar="DIR",
                        help="also trace one run of each handler with -X importtime into DIR/<handler>.txt and "
                             "print the import time by top-level package")
    args = parser.parse_args()
    if (args.bundle is None) != (args.layer is None):
        parser.error("--bundle and --layer go together")
    python = getattr(sys, "_base_executable", sys.executable) if args.bundle else sys.executable
    bundle, layer = (args.bundle.resolve(), args.layer.resolve()) if args.bundle else (None, None)
    for name, value in {"AWS_ACCESS_KEY_ID": "cold", "AWS_SECRET_ACCESS_KEY": "cold", "AWS_DEFAULT_REGION": "us-east-1",
                        "AWS_REGION": "us-east-1"}.items():
        os.environ[name] = value  # a local server: never a real account
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        os.environ.pop(name, None)
    results = asyncio.run(measure(args.runs, bundle, layer, python, args.no_bytecode, args.importtime))
    where = (f"bundle {args.bundle} + layer {args.layer}, {'no bytecode' if args.no_bytecode else 'with bytecode'}"
             if args.bundle else "repository sources in the dev venv")
    print(f"Cold starts, median of {args.runs} fresh interpreters per handler ({where}), Python "
          f"{sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}\n")
    print(table(results))
    api, fastapi_floor = (statistics.median(r["import_cpu_ms"] + r["first_cpu_ms"] for r in results[kind])
                          for kind in ("api", "fastapi-floor"))
    print(f"\napi / fastapi-floor (CPU): {api / fastapi_floor:.2f}x ({api - fastapi_floor:.0f} ms over FastAPI + "
          "Mangum + boto3 alone)")
    if args.importtime is not None:
        for kind in results:
            profile = import_profile((args.importtime / f"{kind}.txt").read_text())
            top = ", ".join(f"{name} {ms:.0f}" for name, ms in list(profile.items())[:12])
            print(f"\n{kind}: import self time by top-level package, ms (traced run, {sum(profile.values()):.0f} "
                  f"in all): {top}")


if __name__ == "__main__":
    main()
