"""What each wake-up did, for people and dashboards: one structured log record, metrics, an optional span.

The worker opens a `WakeWatch` per wake-up (`Observer.begin`) and closes it with the report or the
error. While it runs, `ObservedStore` (the store wrapper the worker installs) tallies what reached the
store: commits, the step entries they wrote, step retries, version conflicts, the versions read and
written. The record then goes to:

- the `dormant.wake` logger: one line at INFO (ERROR when it failed: `counter['main'] sleeping: 1 step, 1 commit
  ... in 12.3 ms`) whose fields ride in `extra`: what an operator needs (`actor`, `key`, `outcome`, `version`,
  `commits`, `consumed`, `duration_ms`, and `error`, `receive_count`, `dead_letter`, `trace_id` when there are
  some); with DEBUG on, a second record carries every field under `wake` (`wake_id`, `steps`, `requests`,
  `latency_ms` ...). The dev console prints the line, powertools' Logger (dormant.aws.telemetry) the fields;
- a `MetricsSink`, on Lambda CloudWatch metrics in embedded metric format (powertools' Metrics): WakeUps,
  WakeUpFailures, Steps, Commits, VersionConflicts, StepRetries, DeadLettered, MessagesConsumed, StepsThrottled
  (steps a flow-control limit kept waiting; the log line names the limits),
  WakeUpLatency (message ready -> wake-up start) and WakeUpDuration;
- with tracing on (dormant.runtime.tracing: the OTEL_* variables, or `DORMANT_TRACING=1`), a span around the
  wake-up (continuing the trace its message carried), one around each store load and commit, and a span per entry
  each commit finished (step attempts, waits, sleeps, branches, rollback handlers); the record then carries the
  wake-up's `trace_id`.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from dormant.core.slots import SlotRefusal
from dormant.dynamodb.outputs import changed
from dormant.errors import VersionConflict
from dormant.runtime import tracing

if TYPE_CHECKING:
    from dormant.aws.metering import Meter
    from dormant.core.slots import SlotLease, SlotRequest
    from dormant.ports import ActorRef, ActorSnapshot, EventStore
    from dormant.runtime.wake import WakeReport
    from dormant.workflow.execution import CommitDraft

log = logging.getLogger("dormant.wake")


@dataclass
class WakeTally:
    """Counted at the store while one wake-up runs."""

    commits: int = 0
    steps: int = 0
    retries: int = 0
    conflicts: int = 0
    consumed: int = 0
    version_loaded: int | None = None
    version: int | None = None
    throttled: set[str] = field(default_factory=set)  # steps (actor|location) a limit refused a slot
    limits: set[str] = field(default_factory=set)  # the limits that refused them
    traced: tracing.EntrySeen | None = None  # the entries traced so far (tracing on)


_tally: ContextVar[WakeTally | None] = ContextVar("dormant_wake_tally", default=None)


@dataclass
class WakeRecord:
    """One wake-up, as logged and measured."""

    actor: str
    key: list[str]
    wake_id: str
    outcome: str
    duration_ms: float
    messages: int
    receive_count: int
    latency_ms: float | None = None
    steps: int = 0
    commits: int = 0
    retries: int = 0
    conflicts: int = 0
    consumed: int = 0
    version_loaded: int | None = None
    version: int | None = None
    requests: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    dead_letter: bool = False
    throttled: int = 0  # steps that waited for a slot of a limit (ctx.step(limit=...)) in this wake-up
    limits: list[str] = field(default_factory=list)  # which limits refused them
    trace_id: str | None = None  # the wake-up's trace (tracing on)

    def fields(self) -> dict[str, Any]:
        """Every field: the wake-up's DEBUG record."""
        return asdict(self)

    def summary(self) -> dict[str, Any]:
        """What an operator needs of every wake-up: its INFO (or ERROR) record's fields. Absent values are left
        out, and the rest (counts, requests, latency, ids) is in `fields()`, logged at DEBUG."""
        fields: dict[str, Any] = {"actor": self.actor, "key": self.key, "outcome": self.outcome,
                                  "version": self.version, "commits": self.commits, "consumed": self.consumed,
                                  "duration_ms": self.duration_ms}
        if self.error is not None:
            fields.update(error=self.error, receive_count=self.receive_count, dead_letter=self.dead_letter)
        if self.trace_id is not None:
            fields["trace_id"] = self.trace_id
        return fields

    def ref_text(self) -> str:
        return f"{self.actor}{self.key!r}"

    def line(self, *, requests: bool = True) -> str:
        """The readable line (the dev console prints it; on Lambda it is the record's `message`)."""
        ref = self.ref_text()
        if self.error is not None:
            head = f"{ref} failed (receive {self.receive_count}{', to the DLQ next' if self.dead_letter else ''}): " \
                   f"{self.error}"
        else:
            head = f"{ref} {self.outcome}"
        counts = [_plural(self.steps, "step"), _plural(self.commits, "commit"), _plural(self.consumed, "message")]
        if self.retries:
            counts.append(_plural(self.retries, "retry", "retries"))
        if self.conflicts:
            counts.append(_plural(self.conflicts, "version conflict"))
        if self.throttled:
            counts.append(f"{_plural(self.throttled, 'step')} throttled (limit {', '.join(self.limits)})")
        version = f" v{self.version}" if self.version is not None else ""
        listed = ", ".join(f"{name} {n}" for name, n in self.requests.items() if n) if requests else ""
        return f"{head}: {', '.join(counts)}{version} in {self.duration_ms:.1f} ms" + (
            f" ({listed})" if listed else "") + (f" trace {self.trace_id}" if self.trace_id else "")


def _plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n} {word if n == 1 else words or word + 's'}"


class MetricsSink(Protocol):
    def wake(self, record: WakeRecord) -> None: ...

    def skipped(self, messages: int) -> None: ...

    def flush(self) -> None: ...


@dataclass
class WakeWatch:
    """A wake-up in progress."""

    ref: ActorRef
    wake_id: str
    started: float
    wall_started: float
    messages: int
    receive_count: int
    ready_at: float | None
    tally: WakeTally
    token: Any
    span: AbstractContextManager[Any]
    span_object: Any = None


class Observer:
    """Turns wake-ups into records, log lines and metrics."""

    def __init__(self, metrics: MetricsSink | None = None, *, tracing: bool | None = None) -> None:
        self.metrics = metrics
        self.tracer = _tracer(tracing)
        self.records: list[WakeRecord] = []
        self.keep = 1000  # recent records, for tests and tools

    def skipped(self, ref: ActorRef, messages: int) -> None:
        """Wake-up messages that needed no wake-up: their messages were consumed already (dormant.aws.consumed)."""
        log.debug("%d wake-up message(s) of %s need no wake-up: their messages were consumed", messages, ref)
        if self.metrics is not None:
            self.metrics.skipped(messages)

    def begin(self, ref: ActorRef, records: Sequence[Mapping[str, Any]], *,
              dues: Sequence[float | None] | None = None, receives: int | None = None) -> WakeWatch:
        """`dues`: each record's due time (its body's `due`), when the caller parsed the bodies already; else they
        are read from the bodies. `receives`: the records' highest receive count, when the caller knows it."""
        tally = WakeTally()
        span: AbstractContextManager[Any] = nullcontext()
        span_object = None
        wake_id = os.urandom(8).hex()  # 16 random hex digits (a uuid4's first 16, less its object and version digit)
        if self.tracer is not None:
            tally.traced = tracing.EntrySeen()
            span_object, span = tracing.start_wake_span(self.tracer, "dormant.wake", {
                "dormant.actor": ref.name, "dormant.key": list(ref.key), "dormant.wake_id": wake_id,
                "dormant.messages": len(records)}, tracing.record_contexts(records))
        if receives is None:
            receives = _receive_count(records)
        return WakeWatch(ref=ref, wake_id=wake_id, started=time.perf_counter(),
                         wall_started=time.time(), messages=len(records), receive_count=receives,
                         ready_at=_ready_at(records, dues), tally=tally, token=_tally.set(tally), span=span,
                         span_object=span_object)

    def finished(self, watch: WakeWatch, report: WakeReport, meter: Meter | None = None) -> WakeRecord:
        return self._close(watch, report.outcome, meter, None, dead_letter=False)

    def failed(self, watch: WakeWatch, error: BaseException, meter: Meter | None = None, *,
               dead_letter: bool = False) -> WakeRecord:
        """`dead_letter`: the worker moves this wake-up's messages to the DLQ (the last receive of a poison)."""
        return self._close(watch, "error", meter, f"{type(error).__name__}: {error}", dead_letter=dead_letter)

    def _close(self, watch: WakeWatch, outcome: str, meter: Meter | None, error: str | None, *,
               dead_letter: bool) -> WakeRecord:
        _tally.reset(watch.token)
        tally = watch.tally
        latency = (watch.wall_started - watch.ready_at) * 1000 if watch.ready_at is not None else None
        record = WakeRecord(
            actor=watch.ref.name, key=list(watch.ref.key), wake_id=watch.wake_id, outcome=outcome,
            duration_ms=round((time.perf_counter() - watch.started) * 1000, 2), messages=watch.messages,
            receive_count=watch.receive_count, latency_ms=round(max(0.0, latency), 2) if latency is not None else None,
            steps=tally.steps, commits=tally.commits, retries=tally.retries, conflicts=tally.conflicts,
            consumed=tally.consumed, version_loaded=tally.version_loaded, version=tally.version,
            requests=_requests(meter), error=error, dead_letter=dead_letter, throttled=len(tally.throttled),
            limits=sorted(tally.limits), trace_id=tracing.trace_id_of(watch.span_object))
        if watch.span_object is not None:
            _finish_span(watch.span_object, record)
        watch.span.__exit__(None, None, None)
        self.records.append(record)
        del self.records[:-self.keep]
        level = logging.ERROR if error is not None else logging.INFO
        if log.isEnabledFor(level):  # the line and its fields are made only for a logger that writes them
            log.log(level, "%s", record.line(requests=False), extra=record.summary())
        if log.isEnabledFor(logging.DEBUG):  # the rest: counts, requests, latency, ids
            log.debug("%s: detail", record.ref_text(), extra={"wake": record.fields()})
        if self.metrics is not None:
            self.metrics.wake(record)
        return record


def _requests(meter: Meter | None) -> dict[str, int]:
    return {} if meter is None else meter.request_counts()


def _receive_count(records: Sequence[Mapping[str, Any]]) -> int:
    counts = []
    for record in records:
        try:
            counts.append(int(record.get("attributes", {}).get("ApproximateReceiveCount", 1)))
        except (TypeError, ValueError):
            counts.append(1)
    return max(counts, default=1)


def _ready_at(records: Sequence[Mapping[str, Any]], dues: Sequence[float | None] | None = None) -> float | None:
    """When the earliest message became deliverable: sent, or due (a timer), in epoch seconds. `dues`: the records'
    due times, parsed already (the worker's wake-up messages), not parsed again here."""
    moments = []
    for index, record in enumerate(records):
        try:
            sent = float(record.get("attributes", {}).get("SentTimestamp")) / 1000
        except (TypeError, ValueError):
            continue
        if dues is not None:
            due = dues[index]
        else:
            try:
                due = json.loads(record.get("body") or "{}").get("due")
            except (ValueError, AttributeError):
                due = None
        moments.append(max(sent, float(due)) if isinstance(due, (int, float)) else sent)
    return min(moments, default=None)


# -- the store side ---------------------------------------------------------------------------------------

def _draft_counts(draft: CommitDraft) -> tuple[int, int]:
    """(steps finished, step retries scheduled) in one commit's upserted entries."""
    steps = retries = 0
    for entry in draft.upserts:
        if entry.get("kind") != "step":
            continue
        if entry.get("status") in ("completed", "failed"):
            steps += 1
        elif entry.get("retry_at") is not None:
            retries += 1
    return steps, retries


class ObservedStore:
    """EventStore wrapper: tallies loads and commits into the wake-up that makes them (and traces them)."""

    def __init__(self, inner: EventStore, observer: Observer | None = None) -> None:
        self.inner = inner
        self.tracer = observer.tracer if observer is not None else None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _span(self, name: str, ref: ActorRef) -> AbstractContextManager[Any]:
        if self.tracer is None:
            return nullcontext()
        return self.tracer.start_as_current_span(  # type: ignore[no-any-return]
            name, attributes={"dormant.actor": ref.name, "dormant.key": list(ref.key)})

    async def load(self, ref: ActorRef) -> ActorSnapshot | None:
        with self._span("dormant.store.load", ref):
            snapshot = await self.inner.load(ref)
        tally = _tally.get()
        if tally is not None and snapshot is not None:
            if tally.version_loaded is None:
                tally.version_loaded = snapshot.version
            tally.version = snapshot.version
        return snapshot

    async def acquire_slot(self, request: SlotRequest) -> SlotLease | SlotRefusal:
        answer = await self.inner.acquire_slot(request)
        tally = _tally.get()
        if tally is not None and isinstance(answer, SlotRefusal):
            tally.throttled.add(request.holder)
            tally.limits.add(request.rule.name)
        return answer

    async def commit(self, ref: ActorRef, expected_version: int, draft: CommitDraft) -> int:
        tally = _tally.get()
        try:
            with self._span("dormant.store.commit", ref):
                version = await self.inner.commit(ref, expected_version, draft)
        except VersionConflict:
            if tally is not None:
                tally.conflicts += 1
            raise
        changed(ref.id)  # a request of this process waiting for a response or an event looks again now
        if tally is not None:
            steps, retries = _draft_counts(draft)
            tally.commits += 1
            tally.steps += steps
            tally.retries += retries
            tally.consumed += len(draft.consumed_ids)
            tally.version = version
            if self.tracer is not None and tally.traced is not None:
                tracing.entry_spans(self.tracer, draft.upserts, ref.name, ref.key, tally.traced, version)
        return version


# -- tracing ------------------------------------------------------------------------------------------------

def _finish_span(span: Any, record: WakeRecord) -> None:
    span.set_attributes({"dormant.outcome": record.outcome, "dormant.steps": record.steps,
                         "dormant.commits": record.commits, "dormant.version": record.version or 0})
    if record.error is not None:
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, record.error))


def _tracer(wanted: bool | None) -> Any:
    """The tracer of dormant.runtime.tracing (None: off); `wanted=True` builds one even if the environment did not
    ask (with the global provider, or a provider of Dormant's own and the exporters OTEL_TRACES_EXPORTER names)."""
    if wanted is False:
        return None
    current = tracing.current()
    if current is not None:
        return current.tracer
    if not (wanted or tracing.requested()):  # (asked for after the process decided: this observer only)
        return None
    try:
        return tracing.build().tracer
    except ImportError:
        log.warning("tracing is asked for but OpenTelemetry is not installed (pip install 'dormant[tracing]'): "
                    "no spans")
        return None
