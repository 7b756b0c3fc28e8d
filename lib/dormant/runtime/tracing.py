"""OpenTelemetry traces of requests, wake-ups and workflow entries (docs/observability.md, "Traces").

Off unless asked for, and then configured by the SDK's own variables: `OTEL_TRACES_EXPORTER` (console, otlp,
none), `OTEL_EXPORTER_OTLP_ENDPOINT` (alone it means otlp), `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
`OTEL_TRACES_SAMPLER[_ARG]`; `OTEL_SDK_DISABLED=true` turns it off. `DORMANT_TRACING=1` (the older switch) is an
alias: on, with whatever exporter those variables name. Under the ADOT Lambda layer (`AWS_LAMBDA_EXEC_WRAPPER`) or
an application that installed an SDK `TracerProvider` as the global one, Dormant uses that provider.

Off, every hook here is one test of a module attribute (`current() is None`) and nothing imports OpenTelemetry.
Dormant never replaces the global provider (OpenTelemetry allows that once per process): the provider it builds is
its own, and tests and `dormant dev` install theirs with `install()`.

Trace context crosses processes as a W3C `traceparent`: in the stored inbox message (`InboxMessage.traceparent`)
and in the SQS message (message attribute `traceparent`); where API Gateway or a Lambda with active tracing
started an X-Ray trace, its `X-Amzn-Trace-Id` header and SQS's `AWSTraceHeader` system attribute are read too (an
X-Ray trace id is a W3C trace id written differently).

Entries are traced from what the wake-up commits (`entry_spans`): every step attempt, wait, sleep, join/race/map
branch and rollback handler records its times in history, so its span is emitted with those times once the commit
holds it, as a child of the wake-up's span. The engine itself carries no tracing code.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("dormant.tracing")

TRACEPARENT = "traceparent"  # the W3C header, the SQS message attribute and the stored message's field
_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_XRAY_ROOT = re.compile(r"Root=1-([0-9a-f]{8})-([0-9a-f]{24})")
_XRAY_PARENT = re.compile(r"Parent=([0-9a-f]{16})")
_XRAY_SAMPLED = re.compile(r"Sampled=([01])")
TRUE = ("1", "true", "yes", "on")


@dataclass(slots=True)
class Tracing:
    """The tracer Dormant's spans go to, and what to flush at the end of a Lambda invocation."""

    tracer: Any
    provider: Any = None
    ring: SpanRing | None = None


_current: Tracing | None = None
_decided = False


def current() -> Tracing | None:
    """The tracing in force, decided from the environment at the first call; None: off."""
    if not _decided:
        _decide()
    return _current


def enabled() -> bool:
    return current() is not None


def requested(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for traces (see the module's docstring)."""
    if environ.get("OTEL_SDK_DISABLED", "").lower() in TRUE:
        return False
    if environ.get("DORMANT_TRACING", "").lower() in TRUE:
        return True
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                or environ.get("AWS_LAMBDA_EXEC_WRAPPER"))


def _decide() -> None:
    global _current, _decided
    _decided = True
    if not requested():
        return
    try:
        _current = build()
    except ImportError:
        log.warning("traces were asked for but OpenTelemetry is not installed (pip install 'dormant[tracing]'): "
                    "no spans")


def build(*, exporters: Sequence[Any] | None = None, ring: SpanRing | None = None) -> Tracing:
    """A Tracing on the global SDK provider if one was installed (the ADOT layer, the application), else on a
    provider of Dormant's own with the exporters OTEL_TRACES_EXPORTER names (or `exporters`) and the `ring`."""
    from opentelemetry import trace

    installed = trace.get_tracer_provider()
    if ring is None and exporters is None and hasattr(installed, "add_span_processor"):
        return Tracing(tracer=installed.get_tracer("dormant"), provider=installed)
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    defaults = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "dormant"}
    provider = TracerProvider(resource=Resource.create(defaults))  # the sampler: OTEL_TRACES_SAMPLER, as the SDK reads
    for exporter in (exporters_from_env() if exporters is None else exporters):
        simple = type(exporter).__name__ in ("ConsoleSpanExporter", "InMemorySpanExporter")
        provider.add_span_processor(SimpleSpanProcessor(exporter) if simple else BatchSpanProcessor(exporter))
    if ring is not None:
        kept: Any = ring  # a SpanExporter by its methods
        provider.add_span_processor(SimpleSpanProcessor(kept))
    return Tracing(tracer=provider.get_tracer("dormant"), provider=provider, ring=ring)


def exporters_from_env() -> list[Any]:
    """The exporters OTEL_TRACES_EXPORTER names (an OTLP endpoint alone: otlp); a warning for what cannot be made."""
    names = [n.strip().lower() for n in os.environ.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    if not names and (os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                      or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        names = ["otlp"]
    exporters: list[Any] = []
    for name in names:
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporters.append(ConsoleSpanExporter())
        elif name == "otlp":
            otlp = _otlp_exporter()
            if otlp is not None:
                exporters.append(otlp)
        elif name != "none":
            log.warning("OTEL_TRACES_EXPORTER=%s: Dormant knows console, otlp and none", name)
    return exporters


def _otlp_exporter() -> Any:
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    module = f"opentelemetry.exporter.otlp.proto.{'grpc' if protocol == 'grpc' else 'http'}.trace_exporter"
    try:
        exporter: Any = importlib.import_module(module).OTLPSpanExporter
    except ImportError:
        log.warning("an OTLP endpoint is set but no OTLP exporter is installed "
                    "(pip install opentelemetry-exporter-otlp-proto-http): spans are not exported")
        return None
    return exporter()  # endpoint, headers, timeout: the OTEL_EXPORTER_OTLP_* variables


def install(tracing: Tracing | None) -> Callable[[], None]:
    """Use `tracing` (None: off) from now on; returns what puts the previous one back (tests, `dormant dev`)."""
    global _current, _decided
    previous, was_decided = _current, _decided
    _current, _decided = tracing, True

    def restore() -> None:
        global _current, _decided
        _current, _decided = previous, was_decided

    return restore


def flush() -> None:
    """Export what is buffered (the end of a Lambda invocation: the container may freeze after it)."""
    tracing = _current
    if tracing is not None and hasattr(tracing.provider, "force_flush"):
        tracing.provider.force_flush(2000)


# -- context across processes -------------------------------------------------------------------------------

def traceparent() -> str | None:
    """The W3C traceparent of the current span, to store with a message or send with it; None when off."""
    if _current is None and (_decided or current() is None):
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def span_context(header: str | None) -> Any:
    """A remote SpanContext from a W3C traceparent or an X-Ray trace header; None for anything else."""
    if not header:
        return None
    from opentelemetry.trace import SpanContext, TraceFlags

    match = _TRACEPARENT.match(header.strip())
    if match is not None:
        trace_id, span_id, flags = int(match[1], 16), int(match[2], 16), int(match[3], 16)
    else:
        root, parent = _XRAY_ROOT.search(header), _XRAY_PARENT.search(header)
        if root is None or parent is None:
            return None
        sampled = _XRAY_SAMPLED.search(header)
        trace_id, span_id = int(root[1] + root[2], 16), int(parent[1], 16)
        flags = 1 if sampled is None or sampled[1] == "1" else 0
    if trace_id == 0 or span_id == 0:
        return None
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags))


def message_attributes() -> dict[str, Any]:
    """SQS MessageAttributes carrying the current trace context ({} when off or outside a span)."""
    header = traceparent()
    return {TRACEPARENT: {"DataType": "String", "StringValue": header}} if header else {}


def record_contexts(records: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The distinct trace contexts a batch of SQS records (Lambda's event form) carries, in order: each record's
    `traceparent` message attribute, else its AWSTraceHeader, else the traceparent of the message its body carries."""
    import json

    found: list[Any] = []
    seen: set[tuple[int, int]] = set()
    for record in records:
        attribute = (record.get("messageAttributes") or {}).get(TRACEPARENT) or {}
        header = attribute.get("stringValue") or attribute.get("StringValue")
        if not header:
            header = (record.get("attributes") or {}).get("AWSTraceHeader")
        if not header:
            try:
                header = ((json.loads(record.get("body") or "{}").get("message") or {}).get(TRACEPARENT))
            except (ValueError, AttributeError):
                header = None
        context = span_context(header if isinstance(header, str) else None)
        if context is not None and (context.trace_id, context.span_id) not in seen:
            seen.add((context.trace_id, context.span_id))
            found.append(context)
    return found


def start_wake_span(tracer: Any, name: str, attributes: dict[str, Any], contexts: Sequence[Any]) -> tuple[Any, Any]:
    """(span, context manager to exit) of a wake-up: the child of the first carried context (the request or the
    wake-up that caused it, continued across SQS and sleeps), linked to the others."""
    from opentelemetry import trace
    from opentelemetry.trace import Link

    parent = trace.set_span_in_context(trace.NonRecordingSpan(contexts[0])) if contexts else None
    links = [Link(context) for context in contexts[1:]]
    manager = tracer.start_as_current_span(name, context=parent, links=links, attributes=attributes,
                                           kind=trace.SpanKind.CONSUMER)
    return manager.__enter__(), manager


def client_span(name: str, attributes: dict[str, Any] | None = None) -> AbstractContextManager[Any]:
    """A CLIENT span around a call to AWS (an SQS send); a no-op context when off."""
    tracing = current()
    if tracing is None:
        return nullcontext()
    from opentelemetry.trace import SpanKind

    return tracing.tracer.start_as_current_span(name, kind=SpanKind.CLIENT, attributes=attributes)  # type: ignore[no-any-return]


def trace_id_of(span: Any) -> str | None:
    if span is None:
        return None
    context = span.get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else None


# -- entries, from what a commit holds ---------------------------------------------------------------------

_NS = 1_000_000_000


@dataclass(slots=True)
class EntrySeen:
    """What one wake-up traced already (an entry re-upserted by a later commit of it is not traced twice)."""

    keys: set[tuple[Any, ...]] = field(default_factory=set)
    ends: dict[str, float] = field(default_factory=dict)  # location -> the latest end traced under it


def entry_spans(tracer: Any, upserts: Iterable[Mapping[str, Any]], actor: str, key: Sequence[str],
                seen: EntrySeen, version: int | None = None) -> None:
    """Emit a span per entry run that these upserted entries (history entries' JSON) finished: step attempts,
    waits, sleeps, join/race/map (with a span per branch), rollback handlers. Children of the current span.
    `version`: the actor's version the commit that holds them made."""
    for entry in upserts:
        for name, start, end, attributes, error in _entry_runs(entry, seen):
            attributes.update({"dormant.actor": actor, "dormant.key": list(key)})
            if version is not None:
                attributes["dormant.version"] = version
            _emit(tracer, name, start, end, attributes, error)


def _entry_runs(entry: Mapping[str, Any], seen: EntrySeen) -> Iterator[tuple[str, float, float, dict[str, Any],
                                                                             Mapping[str, Any] | None]]:
    kind, status, location = entry.get("kind"), entry.get("status") or "pending", str(entry.get("location", ""))
    base = {"dormant.location": location, "dormant.entry.kind": str(kind), "dormant.entry.name": entry.get("name")}
    if kind == "step":
        started, ended = entry.get("started_at"), entry.get("ended_at")
        mark = ("attempt", location, entry.get("attempts"), started)
        rolled_back = entry.get("rollback_done") or entry.get("rollback_error")  # its attempt was traced before
        if started is not None and ended is not None and not rolled_back and mark not in seen.keys:
            seen.keys.add(mark)
            outcome = "retry" if entry.get("retry_at") is not None and status == "pending" else str(status)
            error = entry.get("error") if outcome != "completed" else None
            _ended(seen, location, float(ended))
            yield (f"step {entry.get('name')}", float(started), float(ended),
                   {**base, "dormant.attempt": int(entry.get("attempts") or 1), "dormant.outcome": outcome}, error)
        rolled = ("rollback", location)
        if rolled_back and rolled not in seen.keys:
            seen.keys.add(rolled)
            at = float(entry.get("updated_at") or 0.0)
            failed = entry.get("rollback_error")
            yield (f"rollback {entry.get('name')}", at, at,
                   {**base, "dormant.outcome": "failed" if failed else "completed"}, failed)
        return
    if status == "pending" or ("done", location) in seen.keys:
        return
    seen.keys.add(("done", location))
    start, end = float(entry.get("created_at") or 0.0), float(entry.get("updated_at") or 0.0)
    if kind == "sleep" and entry.get("deadline") is not None:  # it ended when due (the wake-up noticed it later)
        end = min(end, float(entry["deadline"])) if end else float(entry["deadline"])
    if kind in ("message", "sleep", "callback"):
        label = {"message": "wait", "sleep": "sleep", "callback": "callback"}[str(kind)]
        _ended(seen, location, end)
        yield (f"{label} {entry.get('name')}", start, max(start, end),
               {**base, "dormant.outcome": "timed_out" if entry.get("timed_out") else str(status)}, entry.get("error"))
    elif kind in ("join", "race", "map"):
        yield (f"{kind} {entry.get('name')}", start, max(start, end), {**base, "dormant.outcome": str(status)},
               entry.get("error"))
        for branch, record in (entry.get("branches") or {}).items():
            where = f"{location}/{branch}"
            branch_end = seen.ends.get(where, end)
            yield (f"branch {branch}", start, max(start, branch_end),
                   {**base, "dormant.location": where, "dormant.entry.kind": "branch", "dormant.entry.name": branch,
                    "dormant.outcome": str(record.get("status"))}, record.get("error"))


def _ended(seen: EntrySeen, location: str, end: float) -> None:
    """Remember `end` for every enclosing location (a branch's span ends with its last traced entry)."""
    parts = location.split("/")
    for cut in range(1, len(parts)):
        where = "/".join(parts[:cut])
        seen.ends[where] = max(seen.ends.get(where, 0.0), end)


def _emit(tracer: Any, name: str, start: float, end: float, attributes: dict[str, Any],
          error: Mapping[str, Any] | None) -> None:
    from opentelemetry.trace import Status, StatusCode

    span = tracer.start_span(name, start_time=int(start * _NS), attributes=attributes)
    if error:
        span.add_event("exception", {"exception.type": str(error.get("type")),
                                     "exception.message": str(error.get("message"))}, timestamp=int(end * _NS))
        span.set_status(Status(StatusCode.ERROR, f"{error.get('type')}: {error.get('message')}"))
    span.end(end_time=int(end * _NS))


# -- the dev ring ---------------------------------------------------------------------------------------------

class SpanRing:
    """A SpanExporter keeping the last `size` finished spans in memory, as JSON-ready dicts (`dormant dev`'s
    dashboard reads them per actor)."""

    def __init__(self, size: int = 5000) -> None:
        self.spans: deque[dict[str, Any]] = deque(maxlen=size)

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        for span in spans:
            self.keep(span)
        return SpanExportResult.SUCCESS

    def keep(self, span: Any) -> None:
        context = span.get_span_context()
        parent = span.parent
        attributes = dict(span.attributes or {})
        self.spans.append({
            "name": span.name, "trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}",
            "parent_id": f"{parent.span_id:016x}" if parent is not None else None,
            "start": (span.start_time or 0) / _NS, "end": (span.end_time or 0) / _NS,
            "status": span.status.status_code.name.lower(),
            "attributes": {k: list(v) if isinstance(v, tuple) else v for k, v in attributes.items()},
            "links": [f"{link.context.trace_id:032x}" for link in span.links or ()]})

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def of(self, actor: str, key: Sequence[str]) -> list[dict[str, Any]]:
        """The spans of one actor: its own (by attribute) and those of the traces they belong to."""
        own = [s for s in list(self.spans)
               if s["attributes"].get("dormant.actor") == actor and list(s["attributes"].get("dormant.key") or [])
               == list(key)]
        traces = {s["trace_id"] for s in own}
        ids = {s["span_id"] for s in own}
        return [s for s in list(self.spans) if s["span_id"] in ids or (s["trace_id"] in traces
                and not s["attributes"].get("dormant.actor"))]


@contextmanager
def tracing_installed(tracing: Tracing | None) -> Iterator[Tracing | None]:
    restore = install(tracing)
    try:
        yield tracing
    finally:
        restore()
