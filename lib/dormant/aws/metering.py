"""Request metering: count DynamoDB and SQS requests, bytes and capacity units through botocore's event hooks.

    instrument(client)                  # once per (aio)botocore client
    with metering() as meter:           # everything the current task (and its children) sends counts here
        await wake_actor(service, ref)
    meter.dynamodb_writes, meter.write_units, meter.sqs_requests, meter.summary()

Scopes nest and are carried by a ContextVar, so concurrent wake-ups in one process each get their own
counts. Capacity units follow DynamoDB's on-demand rules from the item sizes seen on the wire: one write
unit per started KB written, one read unit per started 4 KB read (strongly consistent).
"""

from __future__ import annotations

import base64
import json
import math
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

DYNAMODB_READS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"})
DYNAMODB_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})

# Public on-demand prices (USD) used by cost estimates.
PRICE_PER_WRITE_UNIT = 0.625 / 1_000_000
PRICE_PER_READ_UNIT = 0.125 / 1_000_000
PRICE_PER_SQS_REQUEST = 0.40 / 1_000_000


@dataclass
class Meter:
    """Counts of AWS requests (by "service.Operation"), bytes on the wire and DynamoDB capacity units."""

    requests: Counter[str] = field(default_factory=Counter)
    bytes_sent: int = 0
    bytes_received: int = 0
    write_units: float = 0.0
    read_units: float = 0.0

    def count(self, service: str, operations: frozenset[str] | None = None) -> int:
        prefix = service + "."
        return sum(n for name, n in self.requests.items()
                   if name.startswith(prefix) and (operations is None or name[len(prefix):] in operations))

    @property
    def dynamodb_reads(self) -> int:
        return self.count("dynamodb", DYNAMODB_READS)

    @property
    def dynamodb_writes(self) -> int:
        return self.count("dynamodb", DYNAMODB_WRITES)

    @property
    def dynamodb_requests(self) -> int:
        return self.count("dynamodb")

    @property
    def sqs_requests(self) -> int:
        return self.count("sqs")

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())

    def cost(self) -> float:
        """USD at public on-demand prices for what was counted."""
        return (self.write_units * PRICE_PER_WRITE_UNIT + self.read_units * PRICE_PER_READ_UNIT
                + self.sqs_requests * PRICE_PER_SQS_REQUEST)

    def add(self, other: Meter) -> None:
        self.requests.update(other.requests)
        self.bytes_sent += other.bytes_sent
        self.bytes_received += other.bytes_received
        self.write_units += other.write_units
        self.read_units += other.read_units

    def copy(self) -> Meter:
        clone = Meter()
        clone.add(self)
        return clone

    def __sub__(self, other: Meter) -> Meter:
        """What was counted since `other` (an earlier copy of this meter)."""
        diff = Meter(requests=Counter(self.requests), bytes_sent=self.bytes_sent - other.bytes_sent,
                     bytes_received=self.bytes_received - other.bytes_received,
                     write_units=self.write_units - other.write_units, read_units=self.read_units - other.read_units)
        diff.requests.subtract(other.requests)
        diff.requests = +diff.requests  # drop zero counts
        return diff

    def summary(self) -> str:
        return (f"dynamodb {self.dynamodb_reads} read(s) {self.dynamodb_writes} write(s) "
                f"({self.read_units:g} RCU, {self.write_units:g} WCU), sqs {self.sqs_requests} request(s), "
                f"{self.bytes_sent} B sent, {self.bytes_received} B received")


_active: ContextVar[tuple[Meter, ...]] = ContextVar("dormant_meters", default=())
# botocore clients in threads (dormant.aws.clients) run these hooks in pool threads, on meters they share.
_counting = threading.Lock()


@contextmanager
def metering(meter: Meter | None = None) -> Iterator[Meter]:
    """Count every instrumented request made in this context (tasks started inside inherit it)."""
    scope = meter if meter is not None else Meter()
    token = _active.set((*_active.get(), scope))
    try:
        yield scope
    finally:
        _active.reset(token)


def instrument(client: Any, *, always: Meter | None = None) -> None:
    """Hook an (aio)botocore client: each request counts into the active meters and into `always`."""
    service = client.meta.service_model.service_name
    events = client.meta.events
    tag = f"dormant-metering-{id(client)}"

    def meters() -> tuple[Meter, ...]:
        active = _active.get()
        return (*active, always) if always is not None and always not in active else active

    def before_send(request: Any, event_name: str = "", **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        body = request.body or b""
        size = len(body.encode() if isinstance(body, str) else body) if isinstance(body, (bytes, str)) else 0
        writes = _write_units(operation, body) if service == "dynamodb" else 0.0
        with _counting:
            for meter in meters():
                meter.requests[f"{service}.{operation}"] += 1
                meter.bytes_sent += size
                meter.write_units += writes

    def after_call(http_response: Any, parsed: Mapping[str, Any], model: Any, event_name: str = "",
                   **_: Any) -> None:
        received = _content_length(http_response)
        reads = _read_units(model.name, parsed) if service == "dynamodb" else 0.0
        with _counting:
            for meter in meters():
                meter.bytes_received += received
                meter.read_units += reads

    events.register("before-send", before_send, unique_id=f"{tag}-send")
    events.register("after-call", after_call, unique_id=f"{tag}-call")


# -- DynamoDB item sizes and capacity units ------------------------------------------------------

def item_size(item: Mapping[str, Any]) -> int:
    """DynamoDB's size of an item in wire form ({"attr": {"S": "..."}}): names plus values, in bytes."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


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


def _write_units(operation: str, body: Any) -> float:
    if operation not in DYNAMODB_WRITES:
        return 0.0
    try:
        params = json.loads(body)
    except (TypeError, ValueError):
        return 1.0
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


def _read_units(operation: str, parsed: Mapping[str, Any]) -> float:
    """Strongly consistent reads (what the store uses): one unit per started 4 KB, at least one."""
    if operation not in DYNAMODB_READS:
        return 0.0
    if operation == "GetItem":
        return _units(item_size(parsed.get("Item", {})), 4096)
    if operation in ("Query", "Scan"):
        return _units(sum(item_size(i) for i in parsed.get("Items", [])), 4096)
    if operation == "BatchGetItem":
        return sum(_units(item_size(i), 4096) for items in parsed.get("Responses", {}).values() for i in items)
    return sum(_units(item_size(r.get("Item", {})), 4096) * 2 for r in parsed.get("Responses", []))


def _units(size: int, unit: int) -> float:
    return float(max(1, math.ceil(size / unit)))


def _content_length(http_response: Any) -> int:
    headers = getattr(http_response, "headers", None) or {}
    try:
        return int(headers.get("content-length", 0))
    except (TypeError, ValueError):
        return 0
