"""dormant.runtime.tracing and its hooks, without servers: configuration from the OTEL_* variables, trace context in
and out (W3C traceparent, X-Ray's header, SQS records), the optional field of stored messages, entry spans from
commits, route names, and the trace id in the wake-up's log line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from dormant.aws.observability import WakeRecord
from dormant.core.records import InboxMessage
from dormant.http.tracing import route_of
from dormant.runtime import tracing
from dormant.sqs.transport import WakeMessage

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = f"00-{TRACE}-00f067aa0ba902b7-01"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    restore = tracing.install(tracing.build(exporters=[spans]))
    yield spans
    restore()


@pytest.mark.parametrize(("environ", "on"), [
    ({}, False),
    ({"DORMANT_TRACING": "1"}, True),
    ({"OTEL_TRACES_EXPORTER": "console"}, True),
    ({"OTEL_TRACES_EXPORTER": "none"}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318"}, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318", "OTEL_SDK_DISABLED": "true"}, False),
    ({"DORMANT_TRACING": "1", "OTEL_SDK_DISABLED": "true"}, False),
    ({"AWS_LAMBDA_EXEC_WRAPPER": "/opt/otel-instrument"}, True),
])
def test_traces_are_asked_for_by_the_sdk_variables(environ: dict[str, str], on: bool) -> None:
    assert tracing.requested(environ) is on


def test_off_means_no_context_and_no_attributes() -> None:
    restore = tracing.install(None)
    try:
        assert tracing.traceparent() is None
        assert tracing.message_attributes() == {}
        assert not tracing.enabled()
    finally:
        restore()


def test_the_current_span_goes_out_as_a_traceparent(exporter: InMemorySpanExporter) -> None:
    current = tracing.current()
    assert current is not None
    with current.tracer.start_as_current_span("request") as span:
        header = tracing.traceparent()
        attributes = tracing.message_attributes()
    context = span.get_span_context()
    assert header == f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
    assert context.trace_flags.sampled
    assert attributes == {"traceparent": {"DataType": "String", "StringValue": header}}


def test_w3c_and_xray_headers_name_the_same_trace() -> None:
    w3c = tracing.span_context(PARENT)
    xray = tracing.span_context(f"Root=1-{TRACE[:8]}-{TRACE[8:]};Parent=00f067aa0ba902b7;Sampled=1")
    assert w3c is not None and xray is not None
    assert (w3c.trace_id, w3c.span_id, w3c.trace_flags) == (xray.trace_id, xray.span_id, xray.trace_flags)
    assert w3c.is_remote
    unsampled = tracing.span_context(f"Root=1-{TRACE[:8]}-{TRACE[8:]};Parent=00f067aa0ba902b7;Sampled=0")
    assert unsampled is not None and not unsampled.trace_flags.sampled
    for bad in (None, "", "garbage", f"00-{'0' * 32}-00f067aa0ba902b7-01", "Root=1-x;Parent=y"):
        assert tracing.span_context(bad) is None


def test_sqs_records_carry_contexts_by_attribute_header_or_stored_message() -> None:
    other = f"00-{'a' * 32}-{'b' * 16}-01"
    body = WakeMessage(actor="a", key=["k"], message=InboxMessage(id="m", queue="q", created_at=1.0,
                                                                  traceparent=other)).model_dump_json()
    records: list[dict[str, Any]] = [
        {"body": "{}", "messageAttributes": {"traceparent": {"stringValue": PARENT, "dataType": "String"}}},
        {"body": "{}", "attributes": {"AWSTraceHeader": f"Root=1-{TRACE[:8]}-{TRACE[8:]};Parent=00f067aa0ba902b7"}},
        {"body": body},
        {"body": "not json"},
        {"body": json.dumps({"actor": "a", "key": ["k"]})},  # a wake-up sent before traces: no context
    ]
    contexts = tracing.record_contexts(records)
    assert [(c.trace_id, c.span_id) for c in contexts] == [(int(TRACE, 16), 0x00f067aa0ba902b7),
                                                           (int("a" * 32, 16), int("b" * 16, 16))]


def test_a_stored_message_without_a_traceparent_is_written_and_read_as_before() -> None:
    old = {"id": "m-1", "queue": "go", "body": {"n": 1}, "created_at": 5.0, "kind": "queue", "args": [],
           "not_before": None, "sender": None}  # an item written before the field existed
    message = InboxMessage.model_validate(old)
    assert message.traceparent is None
    assert message.model_dump(mode="json") == old  # untraced sends store exactly what they stored before
    traced = InboxMessage.model_validate({**old, "traceparent": PARENT})
    assert traced.model_dump(mode="json")["traceparent"] == PARENT
    assert traced.fingerprint() == message.fingerprint()  # the same request, traced or not
    wake = WakeMessage.model_validate_json(json.dumps({"actor": "a", "key": ["k"], "message": old}))
    assert wake.message is not None and wake.message.traceparent is None


def test_entry_spans_come_from_a_commits_entries(exporter: InMemorySpanExporter) -> None:
    current = tracing.current()
    assert current is not None
    seen = tracing.EntrySeen()
    upserts: list[dict[str, Any]] = [
        {"location": "charge", "kind": "step", "name": "charge", "seq": 1, "attempts": 1, "started_at": 10.0,
         "ended_at": 10.5, "retry_at": 11.0, "error": {"type": "RuntimeError", "message": "down"}},
        {"location": "fan-out/a/work", "kind": "step", "name": "work", "seq": 2, "status": "completed",
         "attempts": 1, "started_at": 10.0, "ended_at": 12.0},
        {"location": "fan-out", "kind": "join", "name": "fan-out", "seq": 3, "status": "completed",
         "created_at": 9.0, "updated_at": 13.0, "branches": {"a": {"status": "completed"}, "b": {"status": "failed",
                                                              "error": {"type": "E", "message": "m"}}}},
        {"location": "cool-off", "kind": "sleep", "name": "cool-off", "seq": 4, "status": "completed",
         "created_at": 13.0, "updated_at": 15.0, "deadline": 15.0},
        {"location": "order", "kind": "message", "name": "order", "seq": 5, "status": "pending", "created_at": 1.0},
        {"location": "undo", "kind": "step", "name": "undo", "seq": 6, "status": "completed", "attempts": 1,
         "started_at": 1.0, "ended_at": 2.0, "rollback_done": True, "updated_at": 16.0},
    ]
    with current.tracer.start_as_current_span("dormant.wake") as wake:
        tracing.entry_spans(current.tracer, upserts, "lanes", ["k"], seen, 7)
        tracing.entry_spans(current.tracer, upserts, "lanes", ["k"], seen, 8)  # re-upserted: not traced twice
    spans = {s.name: s for s in exporter.get_finished_spans() if s.name != "dormant.wake"}
    # (the rolled-back step's attempt was traced by the commit that finished it, not again by its rollback's)
    assert sorted(spans) == ["branch a", "branch b", "join fan-out", "rollback undo", "sleep cool-off",
                             "step charge", "step work"]
    assert len(exporter.get_finished_spans()) == 8
    charge = spans["step charge"]
    assert charge.attributes is not None and charge.attributes["dormant.outcome"] == "retry"
    assert charge.status.status_code is trace.StatusCode.ERROR
    assert (charge.start_time, charge.end_time) == (10_000_000_000, 10_500_000_000)
    branch_a = spans["branch a"]
    assert (branch_a.start_time, branch_a.end_time) == (9_000_000_000, 12_000_000_000)  # to its last step's end
    assert spans["branch b"].status.status_code is trace.StatusCode.ERROR
    assert all(s.parent is not None and s.parent.span_id == wake.get_span_context().span_id for s in spans.values())
    assert all(s.attributes is not None and s.attributes["dormant.actor"] == "lanes"
               and s.attributes["dormant.version"] == 7 for s in spans.values())


@pytest.mark.parametrize(("path", "route"), [
    ("/actors/traced/t-1/queues/go", "/actors/{type}/{key}/queues/{name}"),
    ("/actors/traced/t-1/actions/get", "/actors/{type}/{key}/actions/{name}"),
    ("/actors/traced/t-1/status", "/actors/{type}/{key}/status"),
    ("/actors/traced", "/actors/{type}"),
    ("/callbacks/secret-token", "/callbacks/<token>"),
    ("/health", "/health"),
])
def test_request_spans_are_named_by_route_never_by_key(path: str, route: str) -> None:
    assert route_of(path) == route


def test_the_wake_up_log_line_carries_its_trace_id() -> None:
    record = WakeRecord(actor="a", key=["k"], wake_id="w", outcome="sleeping", duration_ms=1.0, messages=1,
                        receive_count=1, trace_id=TRACE)
    assert record.line().endswith(f"trace {TRACE}")
    assert record.fields()["trace_id"] == TRACE
    assert "trace" not in WakeRecord(actor="a", key=["k"], wake_id="w", outcome="sleeping", duration_ms=1.0,
                                     messages=1, receive_count=1).line()


def test_the_exporters_are_those_otel_traces_exporter_names(monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console,none")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    assert [type(e) for e in tracing.exporters_from_env()] == [ConsoleSpanExporter]
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    assert tracing.exporters_from_env() == [] and "Dormant knows console, otlp and none" in caplog.text
    monkeypatch.delenv("OTEL_TRACES_EXPORTER")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318")
    exporters = tracing.exporters_from_env()  # otlp: the exporter if installed, else a warning saying what to install
    assert len(exporters) == 1 or "pip install opentelemetry-exporter-otlp-proto-http" in caplog.text


def test_a_dormant_provider_names_its_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    built = tracing.build(exporters=[])
    assert built.provider.resource.attributes["service.name"] == "dormant"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "shop")
    assert tracing.build(exporters=[]).provider.resource.attributes["service.name"] == "shop"
