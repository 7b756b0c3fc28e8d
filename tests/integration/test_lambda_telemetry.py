"""What the Lambda functions write to CloudWatch: JSON log records and EMF metric documents, read from the
stdout of real handler invocations (functions/worker/handler.py, functions/api/handler.py through Mangum) in
fresh interpreters against the moto server; and the wake-up tally of version conflicts and spans."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from aiobotocore.session import get_session  # type: ignore[import-untyped]

from dormant.aws.observability import ObservedStore, Observer
from dormant.client import Client
from dormant.dynamodb.store import DynamoEventStore
from dormant.dynamodb.table import client_config, create_table
from dormant.errors import VersionConflict
from dormant.memory.store import MemoryEventStore
from dormant.memory.transport import MemoryTransport
from dormant.ports import ActorRef
from dormant.runtime.clocks import SystemClock
from dormant.runtime.service import ActorService
from dormant.runtime.wake import wake_actor
from dormant.sqs.transport import SqsTransport, create_queues
from tests.api.support import http_api_v2_event
from tests.e2e.apps import registry
from tests.integration.test_transport import unique_settings

ROOT = Path(__file__).resolve().parents[2]


def invoke(kind: str, *arguments: str, env: dict[str, str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """(log records, EMF documents, stderr) of one invocation in a fresh interpreter."""
    result = subprocess.run([sys.executable, "-m", "tests.integration.lambda_invoke", kind, *arguments], cwd=ROOT,
                            env={**os.environ, **env}, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]  # every line is JSON
    emf = [line for line in lines if "_aws" in line]
    return [line for line in lines if "_aws" not in line], emf, result.stderr


def metric_values(documents: list[dict[str, Any]]) -> dict[str, tuple[float, str]]:
    """name -> (sum of its values over the documents, unit)."""
    values: dict[str, tuple[float, str]] = {}
    for document in documents:
        assert document["service"] == "dormant-worker"
        for directive in document["_aws"]["CloudWatchMetrics"]:
            assert directive["Namespace"] == "Dormant" and ["service"] in directive["Dimensions"]
            for metric in directive["Metrics"]:
                raw = document[metric["Name"]]
                total = sum(raw) if isinstance(raw, list) else raw
                values[metric["Name"]] = (values.get(metric["Name"], (0.0, ""))[0] + total, metric["Unit"])
    return values


POWERTOOLS_FIELDS = {"level", "message", "timestamp", "service", "name", "function_request_id", "cold_start"}
WAKE_FIELDS = {"actor", "key", "outcome", "version", "commits", "consumed", "duration_ms"}  # every wake-up's line
FAILURE_FIELDS = {"error", "receive_count", "dead_letter"}  # and a failed one's


async def _worker_logs(moto_server: str, dynamodb_local_server: str, aws_endpoint_environment: dict[str, str],
                       **env: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """One worker invocation over a batch of three wake-ups (a counter of two messages, a broken actor, a flaky one):
    (log records, EMF documents, the counter's value after it)."""
    settings = unique_settings(moto_server, max_receives=1, dynamodb_endpoint_url=dynamodb_local_server)
    session = get_session()
    async with session.create_client("dynamodb", config=client_config(),
                                     **settings.client_kwargs("dynamodb")) as dynamodb, \
            session.create_client("sqs", **settings.client_kwargs("sqs")) as sqs:
        await create_table(dynamodb, settings)
        urls = await create_queues(sqs, settings)
        clock = SystemClock()
        client = Client(ActorService(registry, DynamoEventStore(dynamodb, settings), SqsTransport(sqs, urls, clock),
                                     clock))
        counter = client.get_or_create("workflow-counter", ["c-1"])
        for delta in (2, 3):
            await counter.send("counter", {"delta": delta})
        await client.get_or_create("broken", ["b-1"]).send("poke", {"n": 1})
        await client.get_or_create("flaky", ["f-1"]).send("poke", {"n": 1})
        logs, emf, _ = invoke("worker", urls.wake, env={
            "DORMANT_APP": "tests.e2e.apps:registry", "DORMANT_TABLE": settings.table,
            "DORMANT_QUEUE_URL": urls.wake, "DORMANT_TIMER_QUEUE_URL": urls.timers, "DORMANT_MAX_RECEIVES": "1",
            **aws_endpoint_environment, "POWERTOOLS_LOG_LEVEL": "INFO", **env})
        return logs, emf, (await counter.state()).value


async def test_the_worker_logs_one_line_per_wake_up_and_one_metrics_document_per_invocation(
        moto_server: str, dynamodb_local_server: str, aws_endpoint_environment: dict[str, str]) -> None:
    logs, emf, value = await _worker_logs(moto_server, dynamodb_local_server, aws_endpoint_environment)
    assert value == 5
    assert not [r for r in logs if r["level"] == "DEBUG"], logs  # DEBUG off: no detail line
    lines = [r for r in logs if r.get("name") == "dormant.wake"]
    wakes = {(r["actor"], tuple(r["key"])): r for r in lines}
    assert len(lines) == len(wakes) == 3, logs  # exactly one line per wake-up
    assert set(wakes) == {("workflow-counter", ("c-1",)), ("broken", ("b-1",)), ("flaky", ("f-1",))}
    done = wakes[("workflow-counter", ("c-1",))]
    assert set(done) - POWERTOOLS_FIELDS == WAKE_FIELDS, done  # what an operator needs, nothing more
    assert done["level"] == "INFO" and done["service"] == "dormant-worker"
    assert done["function_request_id"].startswith("worker-")  # the Lambda context rides on every record
    assert done["cold_start"] is True  # the container's first invocation
    assert (done["outcome"], done["consumed"]) == ("sleeping", 2) and done["commits"] in (1, 2)
    assert done["version"] >= done["commits"] and done["duration_ms"] > 0
    assert done["message"].startswith("workflow-counter['c-1'] sleeping: 2 steps, ")
    failed = wakes[("broken", ("b-1",))]
    assert set(failed) - POWERTOOLS_FIELDS == WAKE_FIELDS | FAILURE_FIELDS, failed  # a failure is always logged
    assert failed["level"] == "ERROR" and failed["dead_letter"] is True and failed["receive_count"] == 1
    assert failed["error"] == "RuntimeError: the broken actor always fails to wake"
    retried = wakes[("flaky", ("f-1",))]
    assert "error" not in retried and retried["level"] == "INFO"  # a step retry scheduled: the wake-up did not fail

    assert len(emf) == 1, emf  # one EMF document for the invocation's three wake-ups
    values = metric_values(emf)
    assert values["WakeUps"] == (3, "Count")
    assert values["WakeUpErrors"] == (1, "Count") and values["DeadLettered"] == (1, "Count")
    assert values["Steps"] == (2, "Count") and values["StepRetries"] == (1, "Count")
    assert values["MessagesConsumed"][1] == "Count" and values["Commits"][1] == "Count"
    assert values["WakeUpLatency"][1] == "Milliseconds" and values["WakeUpDuration"][1] == "Milliseconds"
    assert "VersionConflicts" not in values  # none happened: nothing invented


async def test_at_debug_each_wake_up_also_logs_its_detail(
        moto_server: str, dynamodb_local_server: str, aws_endpoint_environment: dict[str, str]) -> None:
    logs, _, _ = await _worker_logs(moto_server, dynamodb_local_server, aws_endpoint_environment,
                                    DORMANT_LOG_LEVEL="debug")
    lines = [r for r in logs if r.get("name") == "dormant.wake" and r["level"] != "DEBUG"]
    details = {(r["wake"]["actor"], tuple(r["wake"]["key"])): r["wake"] for r in logs
               if r.get("name") == "dormant.wake" and r["level"] == "DEBUG"}
    assert len(lines) == len(details) == 3, logs
    done = details[("workflow-counter", ("c-1",))]
    assert (done["steps"], done["consumed"], done["messages"]) == (2, 2, 2)
    assert done["version"] == done["version_loaded"] + done["commits"] and done["latency_ms"] >= 0
    assert done["requests"]["dynamodb_reads"] >= 1 and done["requests"]["dynamodb_writes"] >= 1
    assert len(done["wake_id"]) == 16
    assert details[("flaky", ("f-1",))]["retries"] == 1


def _api_env(settings: Any, urls: Any, aws_endpoint_environment: dict[str, str]) -> dict[str, str]:
    return {"DORMANT_APP": "tests.e2e.apps:registry", "DORMANT_AUTH_MODE": "none", "DORMANT_TABLE": settings.table,
            "DORMANT_QUEUE_URL": urls.wake, "DORMANT_TIMER_QUEUE_URL": urls.timers, **aws_endpoint_environment}


async def _api_resources(moto_server: str, dynamodb_local_server: str) -> tuple[Any, Any]:
    settings = unique_settings(moto_server, dynamodb_endpoint_url=dynamodb_local_server)
    session = get_session()
    async with session.create_client("dynamodb", config=client_config(),
                                     **settings.client_kwargs("dynamodb")) as dynamodb, \
            session.create_client("sqs", **settings.client_kwargs("sqs")) as sqs:
        await create_table(dynamodb, settings)
        urls = await create_queues(sqs, settings)
    return settings, urls


SEND = http_api_v2_event("POST", "/actors/workflow-counter/api-1/queues/counter", body=b'{"delta": 4}',
                         headers={"content-type": "application/json"})
MISSING = http_api_v2_event("GET", "/actors/no-such-type/k/state")


async def test_behind_api_gateway_the_api_logs_errors_and_not_the_successes_the_stage_logs(
        moto_server: str, dynamodb_local_server: str, aws_endpoint_environment: dict[str, str]) -> None:
    settings, urls = await _api_resources(moto_server, dynamodb_local_server)
    logs, emf, stderr = invoke("api", json.dumps(SEND), json.dumps(MISSING), json.dumps(SEND),
                               env=_api_env(settings, urls, aws_endpoint_environment))
    assert stderr.count('"statusCode": 202') == 2 and '"statusCode": 404' in stderr
    requests = [r for r in logs if "http" in r]
    assert len(requests) == 1, logs  # the 404 only: the stage's access log records the two sends
    record = requests[0]
    assert record["http"]["method"] == "GET" and record["http"]["status"] == 404
    assert record["http"]["path"] == "/actors/no-such-type/k/state" and record["actor"] == "no-such-type"
    assert record["service"] == "dormant-api" and record["function_request_id"] == "api-request-2"
    assert record["level"] == "INFO" and record["http"]["duration_ms"] > 0
    assert emf == []  # the API measures nothing: no empty metric document


async def test_the_api_logs_one_json_record_per_request_when_asked_to(
        moto_server: str, dynamodb_local_server: str, aws_endpoint_environment: dict[str, str]) -> None:
    settings, urls = await _api_resources(moto_server, dynamodb_local_server)
    env = _api_env(settings, urls, aws_endpoint_environment)
    logs, _, stderr = invoke("api", json.dumps(SEND), json.dumps(SEND),
                             env={**env, "DORMANT_REQUEST_LOG_SAMPLE": "1"})
    assert stderr.count('"statusCode": 202') == 2
    requests = [r for r in logs if "http" in r]
    assert [r["function_request_id"] for r in requests] == ["api-request-1", "api-request-2"], logs
    record = requests[0]
    assert record["http"]["method"] == "POST" and record["http"]["status"] == 202
    assert record["http"]["path"] == "/actors/workflow-counter/api-1/queues/counter"
    assert record["actor"] == "workflow-counter" and record["key"] == "api-1"
    assert record["cold_start"] is True and "cold_start" not in requests[1]
    # a slow request is always logged, whatever the sampling: here every request counts as slow
    logs, _, _ = invoke("api", json.dumps(SEND), env={**env, "DORMANT_REQUEST_LOG_SLOW_MS": "0.001"})
    assert [r["http"]["status"] for r in logs if "http" in r] == [202], logs


class ConflictOnce:
    """A store whose first commit loses a version race (as when two wake-ups of one actor overlap)."""

    def __init__(self, inner: MemoryEventStore) -> None:
        self.inner = inner
        self.raised = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def commit(self, ref: Any, expected_version: int, draft: Any) -> int:
        if not self.raised:
            self.raised = True
            raise VersionConflict(f"{ref}: version moved")
        return await self.inner.commit(ref, expected_version, draft)


async def test_a_lost_version_race_is_counted_on_the_wake_up_that_lost_it() -> None:
    memory = MemoryEventStore()
    clock = SystemClock()
    observer = Observer()
    service = ActorService(registry, ObservedStore(ConflictOnce(memory), observer), MemoryTransport(), clock)  # type: ignore[arg-type]
    await Client(service).get_or_create("workflow-counter", ["race"]).send("counter", {"delta": 1})
    ref = ActorRef(name="workflow-counter", key=("race",))
    watch = observer.begin(ref, [])
    report = await wake_actor(service, ref)
    record = observer.finished(watch, report)
    assert (record.conflicts, record.commits, record.steps) == (1, 1, 1)
    assert record.line().endswith(f"1 version conflict v{record.version} in {record.duration_ms:.1f} ms")


async def test_tracing_puts_a_span_around_each_wake_up_and_its_store_calls() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observer = Observer()
    observer.tracer = provider.get_tracer("dormant")  # what Observer(tracing=True) gets from the global provider
    service = ActorService(registry, ObservedStore(MemoryEventStore(), observer), MemoryTransport(),  # type: ignore[arg-type]
                           SystemClock())
    for key, queue, body in (("t-1", "counter", {"delta": 2}), ("t-2", "poke", {"n": 1})):
        actor = "workflow-counter" if queue == "counter" else "broken"
        await Client(service).get_or_create(actor, [key]).send(queue, body)
        ref = ActorRef(name=actor, key=(key,))
        watch = observer.begin(ref, [])
        try:
            observer.finished(watch, await wake_actor(service, ref))
        except RuntimeError as error:
            observer.failed(watch, error)
    spans = exporter.get_finished_spans()
    wakes = [s for s in spans if s.name == "dormant.wake"]
    assert [w.attributes["dormant.actor"] for w in wakes] == ["workflow-counter", "broken"]  # type: ignore[index]
    ok, failed = wakes
    assert ok.attributes["dormant.outcome"] == "sleeping" and ok.attributes["dormant.steps"] == 1  # type: ignore[index]
    assert failed.status.status_code.name == "ERROR" and "broken actor" in (failed.status.description or "")
    children = [s for s in spans if s.parent is not None and s.parent.span_id == ok.context.span_id]
    # the store's calls, and the entries its commit finished (dormant.runtime.tracing.entry_spans)
    assert {s.name for s in children} == {"dormant.store.load", "dormant.store.commit", "wait wait-counter-command",
                                          "step apply-counter-command"}


def test_tracing_is_off_unless_asked_for(monkeypatch: Any) -> None:
    monkeypatch.delenv("DORMANT_TRACING", raising=False)
    assert Observer().tracer is None
    monkeypatch.setenv("DORMANT_TRACING", "1")
    assert Observer().tracer is not None
