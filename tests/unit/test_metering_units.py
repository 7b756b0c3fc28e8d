"""dormant.aws.metering's read units: a response short enough to prove its items small is not walked, and the meter
still counts what the walk of its items would (no request is made: the client's requests are answered in process)."""

from __future__ import annotations

import base64
import json
import math
import random
from typing import Any

import pytest

from dormant.aws.metering import DYNAMODB_READS, DYNAMODB_WRITES, Meter, instrument, item_size, metering
from dormant.core.clients import open_client
from dormant.settings import Settings

SETTINGS = Settings(endpoint_url="http://127.0.0.1:1", region="us-east-1")


def _value(rng: random.Random, depth: int = 0) -> tuple[Any, Any]:
    """(wire form, parsed form) of a random attribute value: every type, non-ASCII text, nesting."""
    kind = rng.choice(["S", "N", "B", "BOOL", "NULL", "SS", "NS", "BS"] + (["L", "M"] if depth < 2 else []))
    text = "".join(rng.choice("ab\u00e9\u4e2d\U0001f600\"\\\n") for _ in range(rng.randint(1, 40)))
    number = str(rng.choice([0, -1, 7, 12345678901234567890, -0.5, 3.25e10]))
    if kind == "S":
        return {"S": text}, {"S": text}
    if kind == "N":
        return {"N": number}, {"N": number}
    if kind == "B":
        raw = rng.randbytes(rng.randint(1, 300))
        return {"B": base64.b64encode(raw).decode()}, {"B": raw}
    if kind == "BOOL":
        return {"BOOL": True}, {"BOOL": True}
    if kind == "NULL":
        return {"NULL": True}, {"NULL": True}
    if kind == "SS":
        return {"SS": [text, text + "x"]}, {"SS": [text, text + "x"]}
    if kind == "NS":
        return {"NS": [number, "1"]}, {"NS": [number, "1"]}
    if kind == "BS":
        raw = rng.randbytes(rng.randint(1, 50))
        return {"BS": [base64.b64encode(raw).decode()]}, {"BS": [raw]}
    pairs = [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if kind == "L":
        return {"L": [w for w, _ in pairs]}, {"L": [p for _, p in pairs]}
    names = [f"k{i}\u00e9" for i in range(len(pairs))]
    return ({"M": {n: w for n, (w, _) in zip(names, pairs, strict=True)}},
            {"M": {n: p for n, (_, p) in zip(names, pairs, strict=True)}})


def _items(rng: random.Random, count: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    wire, parsed = [], []
    for _ in range(count):
        pairs = {f"a{i}": _value(rng) for i in range(rng.randint(1, 6))}
        wire.append({name: w for name, (w, _) in pairs.items()})
        parsed.append({name: p for name, (_, p) in pairs.items()})
    return wire, parsed


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_an_items_wire_json_is_never_shorter_than_its_size(ensure_ascii: bool) -> None:
    rng = random.Random(28)
    for _ in range(300):
        wire, parsed = _items(rng, rng.randint(0, 4))
        body = json.dumps({"Items": wire, "Count": len(wire)}, ensure_ascii=ensure_ascii).encode()
        assert len(body) >= sum(item_size(item) for item in parsed)


@pytest.mark.parametrize("consistent", [True, False])
async def test_read_units_are_what_the_walk_finds_on_either_side_of_4_kb(consistent: bool) -> None:
    from botocore.awsrequest import AWSResponse  # type: ignore[import-untyped]

    rng = random.Random(4096)
    meter = Meter()
    answers: list[bytes] = []
    expected = 0.0
    small = large = 0
    for _ in range(60):
        wire, parsed = _items(rng, rng.randint(0, 30))
        answers.append(json.dumps({"Items": wire, "Count": len(wire), "ScannedCount": len(wire)}).encode())
        size = sum(item_size(item) for item in parsed)
        expected += (1.0 if consistent else 0.5) * max(1, math.ceil(size / 4096))
        small, large = small + (len(answers[-1]) <= 4096), large + (len(answers[-1]) > 4096)
    assert small > 10 and large > 10  # both ways are taken

    class Raw:
        def __init__(self, body: bytes) -> None:
            self.body = body

        def stream(self, **_: Any) -> Any:
            yield self.body

    def answer(request: Any, **_: Any) -> Any:
        body = answers.pop(0)
        return AWSResponse("http://127.0.0.1:1/", 200, {"content-length": str(len(body))}, Raw(body))

    async with open_client("dynamodb", SETTINGS, kind="threads") as client:
        instrument(client)
        client.meta.events.register("before-send", answer)
        with metering(meter):
            for _ in range(60):
                await client.query(TableName="t", KeyConditionExpression="pk = :pk", ConsistentRead=consistent,
                                   ExpressionAttributeValues={":pk": {"S": "a"}})
    assert meter.read_units == pytest.approx(expected)
    assert meter.calls["dynamodb.Query"] == meter.requests["dynamodb.Query"] == 60


async def test_metering_scopes_nest_and_end_even_when_their_block_raises() -> None:
    """The worker opens a scope per wake-up: each request counts into every scope open around it, and a scope that
    ended (by an error too) counts nothing more."""
    outer, inner = Meter(), Meter()
    body = json.dumps({"Items": [], "Count": 0}).encode()

    def answer(**_: Any) -> Any:
        from botocore.awsrequest import AWSResponse  # type: ignore[import-untyped]

        class Raw:
            def stream(self, **_: Any) -> Any:
                yield body

        return AWSResponse("http://127.0.0.1:1/", 200, {"content-length": str(len(body))}, Raw())

    async def query() -> None:
        await client.query(TableName="t", KeyConditionExpression="pk = :pk", ExpressionAttributeValues={
            ":pk": {"S": "a"}})

    async with open_client("dynamodb", SETTINGS, kind="threads") as client:
        instrument(client)
        client.meta.events.register("before-send", answer)
        with metering(outer) as opened:
            assert opened is outer
            with pytest.raises(RuntimeError), metering(inner):
                await query()
                raise RuntimeError("the wake-up failed")
            await query()  # the inner scope ended with its error: the outer alone counts this
        await query()  # no scope open
        with metering() as fresh:
            await query()
    assert (outer.calls["dynamodb.Query"], inner.calls["dynamodb.Query"], fresh.calls["dynamodb.Query"]) == (2, 1, 1)
    assert fresh is not outer and fresh.requests["dynamodb.Query"] == 1


def test_a_meter_s_request_counts_classify_each_request_once() -> None:
    """The one-pass counts (the wake-up record's) and the properties agree with counting by service and operation."""
    meter = Meter()
    meter.requests.update({"dynamodb.Query": 2, "dynamodb.GetItem": 1, "dynamodb.PutItem": 3,
                           "dynamodb.BatchWriteItem": 1, "dynamodb.DescribeTable": 4, "sqs.SendMessage": 2,
                           "sqs.ReceiveMessage": 5, "s3.PutObject": 7, "malformed": 9})
    by_service = {"dynamodb_reads": meter.count("dynamodb", DYNAMODB_READS),
                  "dynamodb_writes": meter.count("dynamodb", DYNAMODB_WRITES), "sqs": meter.count("sqs")}
    assert meter.request_counts() == by_service == {"dynamodb_reads": 3, "dynamodb_writes": 4, "sqs": 7}
    assert (meter.dynamodb_reads, meter.dynamodb_writes, meter.sqs_requests) == (3, 4, 7)
