"""Request metering: count DynamoDB and SQS requests, bytes and capacity units through botocore's event hooks.

    instrument(client)                  # once per (aio)botocore client
    with metering() as meter:           # everything the current task (and its children) sends counts here
        await wake_actor(service, ref)
    meter.dynamodb_writes, meter.write_units, meter.sqs_requests, meter.summary()

Scopes nest and are carried by a ContextVar, so concurrent wake-ups in one process each get their own
counts. Capacity units follow DynamoDB's on-demand rules from the item sizes seen on the wire: one write
unit per started KB written, one read unit per started 4 KB read (half for an eventually consistent read),
at least one (a half) per read request. `instrument(client, capacity=True)` asks DynamoDB for what it
consumed instead (`ReturnConsumedCapacity=INDEXES`): the table's units and every index's, as AWS bills them;
DynamoDB Local reports them by AWS's rules, moto does not. SQS requests are also counted as billed: one per
started 64 KB of payload, by queue kind (FIFO or standard, priced differently). Prices: benchmarks/prices.py.
"""

from __future__ import annotations

import base64
import json
import math
import threading
from collections import Counter
from collections.abc import Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import parse_qs

DYNAMODB_READS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"})
DYNAMODB_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})
SQS_CHUNK = 64 * 1024
"""SQS bills every started 64 KB of a request's payload as one request."""
SQS_SENDS = frozenset({"SendMessage", "SendMessageBatch"})
_CONTEXT_KEY = "dormant_metering"  # botocore's request context: what before-call saw, for after-call


@dataclass
class Meter:
    """Counts of AWS requests (by "service.Operation"), bytes on the wire, DynamoDB capacity units and billed
    SQS requests.

    `write_units` are the table's, `index_write_units` those of its secondary indexes (what a write of an
    indexed item costs on top); `read_units` are all read units, indexes included. `capacity_reported`
    counts the DynamoDB responses whose units the server reported (the rest are estimated from sizes).
    `sqs_billed` counts billed SQS requests (64 KB chunks) by queue kind, "fifo" or "standard". `requests`
    counts what went on the wire, a retry of a timed-out request too; `calls` what the code asked for."""

    requests: Counter[str] = field(default_factory=Counter)  # HTTP requests sent (retries too: AWS bills them)
    calls: Counter[str] = field(default_factory=Counter)  # API calls made (each once, however often retried)
    bytes_sent: int = 0
    bytes_received: int = 0
    write_units: float = 0.0
    read_units: float = 0.0
    index_write_units: float = 0.0
    capacity_reported: int = 0
    sqs_billed: Counter[str] = field(default_factory=Counter)

    def count(self, service: str, operations: frozenset[str] | None = None) -> int:
        prefix = service + "."
        return sum(n for name, n in self.requests.items()
                   if name.startswith(prefix) and (operations is None or name[len(prefix):] in operations))

    def request_counts(self) -> dict[str, int]:
        """`dynamodb_reads`, `dynamodb_writes` and `sqs` (sqs_requests) counted in one pass (each wake-up's record
        takes the three; the properties read theirs here: one classification of the requests)."""
        reads = writes = sqs = 0
        for name, n in self.requests.items():
            service, dot, operation = name.partition(".")
            if not dot:
                continue
            if service == "dynamodb":
                if operation in DYNAMODB_READS:
                    reads += n
                elif operation in DYNAMODB_WRITES:
                    writes += n
            elif service == "sqs":
                sqs += n
        return {"dynamodb_reads": reads, "dynamodb_writes": writes, "sqs": sqs}

    @property
    def dynamodb_reads(self) -> int:
        return self.request_counts()["dynamodb_reads"]

    @property
    def dynamodb_writes(self) -> int:
        return self.request_counts()["dynamodb_writes"]

    @property
    def dynamodb_requests(self) -> int:
        return self.count("dynamodb")

    @property
    def sqs_requests(self) -> int:
        return self.request_counts()["sqs"]

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())

    def add(self, other: Meter) -> None:
        for spec in fields(self):
            mine, theirs = getattr(self, spec.name), getattr(other, spec.name)
            if isinstance(mine, Counter):
                mine.update(theirs)
            else:
                setattr(self, spec.name, mine + theirs)

    def copy(self) -> Meter:
        clone = Meter()
        clone.add(self)
        return clone

    def __sub__(self, other: Meter) -> Meter:
        """What was counted since `other` (an earlier copy of this meter)."""
        diff = Meter()
        for spec in fields(self):
            mine, theirs = getattr(self, spec.name), getattr(other, spec.name)
            if isinstance(mine, Counter):
                counts = Counter(mine)
                counts.subtract(theirs)
                setattr(diff, spec.name, +counts)  # drop zero counts
            else:
                setattr(diff, spec.name, mine - theirs)
        return diff

    def summary(self) -> str:
        index = f" +{self.index_write_units:g} on indexes" if self.index_write_units else ""
        return (f"dynamodb {self.dynamodb_reads} read(s) {self.dynamodb_writes} write(s) "
                f"({self.read_units:g} RCU, {self.write_units:g} WCU{index}), sqs {self.sqs_requests} request(s), "
                f"{self.bytes_sent} B sent, {self.bytes_received} B received")


_active: ContextVar[tuple[Meter, ...]] = ContextVar("dormant_meters", default=())
# botocore clients in threads (dormant.aws.clients) run these hooks in pool threads, on meters they share.
_counting = threading.Lock()


class metering:  # (lower case: used as the function it was, `with metering() as meter`)
    """Count every instrumented request made in this context (tasks started inside inherit it).

    A class rather than a generator-based context manager: the worker opens one per wake-up, and this costs a third."""

    __slots__ = ("_meter", "_token")

    def __init__(self, meter: Meter | None = None) -> None:
        self._meter = meter if meter is not None else Meter()
        self._token: Token[tuple[Meter, ...]] | None = None

    def __enter__(self) -> Meter:
        self._token = _active.set((*_active.get(), self._meter))
        return self._meter

    def __exit__(self, *_: object) -> None:
        if self._token is not None:
            _active.reset(self._token)
            self._token = None


def instrument(client: Any, *, always: Meter | None = None, capacity: bool = False) -> None:
    """Hook an (aio)botocore client: each request counts into the active meters and into `always`.

    `capacity=True` (DynamoDB): every request that can asks for `ReturnConsumedCapacity=INDEXES`, and the units
    the server reports replace the estimate from item sizes (a benchmark's choice: it changes the requests)."""
    service = client.meta.service_model.service_name
    events = client.meta.events
    tag = f"dormant-metering-{id(client)}"

    def meters() -> tuple[Meter, ...]:
        active = _active.get()
        # by identity: meters are dataclasses, and an empty scope equals an empty `always` by value
        return (*active, always) if always is not None and all(m is not always for m in active) else active

    def count_call(operation: str) -> None:
        with _counting:
            for meter in meters():
                meter.calls[f"{service}.{operation}"] += 1

    def before_build(params: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        # DynamoDB's facts from the call's own parameters, not from its serialized body parsed again; the call
        # counted here too (once per call, as before-call would: one handler less on every request)
        context[_CONTEXT_KEY] = _dynamodb_facts(model.name, params)
        count_call(model.name)

    def before_call(params: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        context[_CONTEXT_KEY] = _request_facts(service, model.name, params.get("body"))
        count_call(model.name)

    def before_send(request: Any, event_name: str = "", **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        body = request.body or b""
        if isinstance(body, (bytes, str)):
            size = len(body.encode() if isinstance(body, str) else body)
        else:  # a stream (an S3 object's body): what the request declares it sends
            declared = request.headers.get("Content-Length")
            size = int(declared) if declared and str(declared).isdigit() else 0
        with _counting:
            for meter in meters():
                meter.requests[f"{service}.{operation}"] += 1
                meter.bytes_sent += size

    def after_call(http_response: Any, parsed: Mapping[str, Any], model: Any, context: Mapping[str, Any] | None = None,
                   **_: Any) -> None:
        received = _content_length(http_response)
        facts: _RequestFacts = (context or {}).get(_CONTEXT_KEY) or _RequestFacts()
        writes = reads = index_writes = 0.0
        reported = 0
        sqs: tuple[str, int] | None = None
        if service == "dynamodb":
            # Only what was asked for: moto adds a ConsumedCapacity of its own to some responses (BatchWriteItem).
            consumed = _consumed_capacity(parsed.get("ConsumedCapacity")) if facts.asked else None
            if consumed is not None:
                reported = 1
                table, on_indexes = consumed
                if model.name in DYNAMODB_WRITES:
                    writes, index_writes = table, on_indexes
                elif model.name in DYNAMODB_READS:
                    floor = 1.0 if facts.consistent else 0.5  # a read that finds nothing still costs the minimum
                    reads = max(floor * facts.reads, table + on_indexes)
            else:
                writes = facts.write_units
                reads = _read_units(model.name, parsed, facts.consistent, received)
        elif service == "sqs":
            payload = facts.payload if model.name in SQS_SENDS else received
            sqs = (facts.queue_kind, max(1, math.ceil(payload / SQS_CHUNK)))
        with _counting:
            for meter in meters():
                meter.bytes_received += received
                meter.write_units += writes
                meter.read_units += reads
                meter.index_write_units += index_writes
                meter.capacity_reported += reported
                if sqs is not None:
                    meter.sqs_billed[sqs[0]] += sqs[1]

    if capacity and service == "dynamodb":
        ask_consumed_capacity(events, unique_id=f"{tag}-capacity")
    if service == "dynamodb":
        events.register("before-parameter-build.dynamodb", before_build, unique_id=f"{tag}-build")
    else:
        events.register("before-call", before_call, unique_id=f"{tag}-facts")
    events.register("before-send", before_send, unique_id=f"{tag}-send")
    events.register("after-call", after_call, unique_id=f"{tag}-call")


def ask_consumed_capacity(events: Any, *, unique_id: str = "dormant-metering-capacity") -> None:
    """Make every DynamoDB request through `events` ask for `ReturnConsumedCapacity=INDEXES`: a client's
    `meta.events`, or a botocore session, whose clients made afterwards inherit the hook (for code that makes
    its own clients, like the Lambda handlers). Instrumented clients then count what the server reports."""
    events.register("provide-client-params.dynamodb", _ask_capacity, unique_id=unique_id)


def _ask_capacity(params: dict[str, Any], model: Any, **_: Any) -> None:
    if "ReturnConsumedCapacity" in model.input_shape.members:
        params.setdefault("ReturnConsumedCapacity", "INDEXES")


@dataclass(frozen=True)
class _RequestFacts:
    """What a request's body says that its response does not: its estimated write units, whether its reads are
    strongly consistent (and how many read requests it holds), its SQS queue kind and payload size."""

    write_units: float = 0.0
    consistent: bool = True
    reads: int = 1
    queue_kind: str = "standard"
    payload: int = 0
    asked: bool = False  # the request asked DynamoDB for the capacity it consumed


# The facts of a request that writes nothing, by (asked, consistent): immutable, so shared
_READ_FACTS = {(asked, consistent): _RequestFacts(asked=asked, consistent=consistent)
               for asked in (False, True) for consistent in (False, True)}


def _request_facts(service: str, operation: str, body: Any) -> _RequestFacts:
    raw = body if isinstance(body, (bytes, str)) else b""
    size = len(raw.encode() if isinstance(raw, str) else raw)
    params = _parsed_body(raw)
    if service == "dynamodb":
        return _dynamodb_facts(operation, params)
    if service == "sqs":
        url = str(params.get("QueueUrl", ""))
        return _RequestFacts(queue_kind="fifo" if url.endswith(".fifo") else "standard", payload=size)
    return _RequestFacts()


def _dynamodb_facts(operation: str, params: Mapping[str, Any]) -> _RequestFacts:
    """A DynamoDB request's facts from its parameters (binary values as bytes or base64: the same sizes)."""
    asked = params.get("ReturnConsumedCapacity", "NONE") != "NONE"
    if operation == "BatchGetItem":  # consistency is asked per table there
        tables = list(params.get("RequestItems", {}).values())
        return _RequestFacts(reads=max(1, len(tables)), asked=asked,
                             consistent=bool(tables) and all(t.get("ConsistentRead") for t in tables))
    consistent = bool(params.get("ConsistentRead", operation == "TransactGetItems"))
    if operation not in DYNAMODB_WRITES:  # (most requests: the same few facts, made once)
        return _READ_FACTS[asked, consistent]
    return _RequestFacts(write_units=_write_units(operation, params), asked=asked, consistent=consistent)


def _parsed_body(raw: bytes | str) -> dict[str, Any]:
    """A request body as a dict: JSON (DynamoDB, SQS's JSON protocol) or a form (SQS's query protocol)."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    if not text:
        return {}
    try:
        parsed = json.loads(text)
    except ValueError:
        return {key: values[-1] for key, values in parse_qs(text).items()}
    return parsed if isinstance(parsed, dict) else {}


def _consumed_capacity(reported: Any) -> tuple[float, float] | None:
    """(the table's units, the indexes' units) of a ConsumedCapacity (one entry, or a list from batch requests);
    None when the server reported nothing."""
    entries = reported if isinstance(reported, list) else [reported] if isinstance(reported, Mapping) else []
    if not entries:
        return None
    table = indexes = 0.0
    for entry in entries:
        whole = float(entry.get("CapacityUnits", 0.0))
        own = entry.get("Table", {}).get("CapacityUnits") if isinstance(entry.get("Table"), Mapping) else None
        on_indexes = sum(float(index.get("CapacityUnits", 0.0))
                         for kind in ("LocalSecondaryIndexes", "GlobalSecondaryIndexes")
                         for index in (entry.get(kind) or {}).values())
        table += float(own) if own is not None else whole - on_indexes
        indexes += on_indexes
    return table, indexes


# -- DynamoDB item sizes and capacity units ------------------------------------------------------

def item_size(item: Mapping[str, Any]) -> int:
    """DynamoDB's size of an item in wire form ({"attr": {"S": "..."}}): names plus values, in bytes."""
    total = 0
    for name, value in item.items():  # every read response is walked: strings and binaries without a call each
        total += len(name) if name.isascii() else len(name.encode())
        if "S" in value:
            text = value["S"]
            total += len(text) if isinstance(text, str) and text.isascii() else len(str(text).encode())
        elif "B" in value and isinstance(value["B"], bytes):
            total += len(value["B"])
        elif "N" in value:
            digits = str(value["N"]).lstrip("-").replace(".", "").strip("0") or "0"
            total += (len(digits) + 1) // 2 + 1
        else:
            total += _value_size(value)
    return total


def _value_size(value: Mapping[str, Any]) -> int:
    kind, inner = next(iter(value.items()))
    if kind == "S":
        return len(str(inner).encode())
    if kind == "N":
        digits = str(inner).lstrip("-").replace(".", "").strip("0") or "0"
        return (len(digits) + 1) // 2 + 1
    if kind == "B":
        return len(_binary(inner))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(v).encode()) for v in inner)
    if kind == "NS":
        return sum(_value_size({"N": v}) for v in inner)
    if kind == "BS":
        return sum(len(_binary(v)) for v in inner)
    if kind == "L":
        return 3 + sum(1 + _value_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + _value_size(v) for k, v in inner.items())
    return 0


def _binary(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    try:
        return base64.b64decode(value)
    except ValueError:
        return str(value).encode()


def _write_units(operation: str, params: Mapping[str, Any]) -> float:
    """Estimated table write units of a write request (from the items it sends)."""
    if operation not in DYNAMODB_WRITES:
        return 0.0
    if operation == "PutItem":
        return _units(item_size(params.get("Item", {})), 1024)
    if operation == "BatchWriteItem":
        total = 0.0
        for requests in params.get("RequestItems", {}).values():
            for request in requests:
                put = request.get("PutRequest")
                total += _units(item_size(put["Item"]), 1024) if put else 1.0
        return total
    if operation == "TransactWriteItems":  # transactions cost two units per item
        return 2.0 * sum(_units(item_size(i["Put"]["Item"]), 1024) if "Put" in i else 1.0
                         for i in params.get("TransactItems", []))
    return 1.0  # UpdateItem / DeleteItem: the stored item's size is not on the wire; count the minimum


def _read_units(operation: str, parsed: Mapping[str, Any], consistent: bool = True, body_bytes: int = 0) -> float:
    """Estimated read units: one per started 4 KB (half when eventually consistent), at least that per request.

    `body_bytes`: the response's length, when known. An item's JSON on the wire is never shorter than its DynamoDB
    size (names and strings at least their UTF-8 bytes, a number's text at least its stored bytes, base64 longer
    than its binary, every container longer than its parts), so a response of at most 4 KB holds items of at most
    4 KB in all: each read costs the minimum, exactly what the walk of its items would find."""
    if operation not in DYNAMODB_READS:
        return 0.0
    factor = 1.0 if consistent else 0.5
    if 0 < body_bytes <= 4096 and operation in ("GetItem", "Query", "Scan"):
        return factor
    if operation == "GetItem":
        return factor * _units(item_size(parsed.get("Item", {})), 4096)
    if operation in ("Query", "Scan"):
        return factor * _units(sum(item_size(i) for i in parsed.get("Items", [])), 4096)
    if operation == "BatchGetItem":
        return factor * sum(_units(item_size(i), 4096) for items in parsed.get("Responses", {}).values()
                            for i in items)
    return sum(_units(item_size(r.get("Item", {})), 4096) * 2 for r in parsed.get("Responses", []))


def _units(size: int, unit: int) -> float:
    return float(max(1, math.ceil(size / unit)))


def _content_length(http_response: Any) -> int:
    headers = getattr(http_response, "headers", None) or {}
    try:
        return int(headers.get("content-length", 0))
    except (TypeError, ValueError):
        return 0
