"""dormant.aws.metering against real servers: capacity units as DynamoDB reports them (DynamoDB Local applies
AWS's rules, indexes included), estimates where a server reports nothing (moto), and SQS requests as billed
(64 KB chunks, FIFO apart from standard)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from dormant.aws.metering import Meter, instrument, metering
from dormant.dynamodb.table import table_definition
from tests.integration.conftest import shared_session


async def _dynamodb(endpoint: str, *, capacity: bool) -> AsyncIterator[tuple[Any, str, Meter, list[bytes]]]:
    """A DynamoDB client on the store's table definition, metered; also every request body it sends."""
    table = f"metering-{uuid.uuid4().hex[:10]}"
    async with shared_session().create_client("dynamodb", endpoint_url=endpoint, region_name="us-east-1") as client:
        await client.create_table(**table_definition(table))
        meter, bodies = Meter(), []
        client.meta.events.register("before-send.dynamodb", lambda request, **_: bodies.append(request.body))
        instrument(client, always=meter, capacity=capacity)
        yield client, table, meter, bodies
        await client.delete_table(TableName=table)


@pytest.fixture
async def reported(dynamodb_local_server: str) -> AsyncIterator[tuple[Any, str, Meter, list[bytes]]]:
    async for made in _dynamodb(dynamodb_local_server, capacity=True):
        yield made


@pytest.fixture
async def estimated(moto_server: str) -> AsyncIterator[tuple[Any, str, Meter, list[bytes]]]:
    async for made in _dynamodb(moto_server, capacity=False):
        yield made


def _inbox_item(message_id: str, size: int = 100) -> dict[str, Any]:
    return {"pk": {"S": "actor"}, "sk": {"S": f"i#{message_id}"}, "pq": {"S": f"0001#{message_id}"},
            "m": {"S": "x" * size}}


def _status_item(status: str) -> dict[str, Any]:
    return {"pk": {"S": "actor"}, "sk": {"S": "s#"}, "lt": {"S": "counter"}, "ls": {"S": f"{status}#actor"}}


async def test_reported_capacity_counts_what_each_index_costs(reported: tuple[Any, str, Meter, list[bytes]]) -> None:
    client, table, meter, bodies = reported

    def step() -> Meter:
        return meter.copy()

    before = step()
    await client.put_item(TableName=table, Item=_inbox_item("m1"))  # a pending message: table + `pending` index
    put = meter - before
    assert (put.write_units, put.index_write_units, put.capacity_reported) == (1, 1, 1)
    assert b'"ReturnConsumedCapacity": "INDEXES"' in bodies[-1] or b'"ReturnConsumedCapacity":"INDEXES"' in bodies[-1]

    before = step()  # its tombstone: the item leaves the index, which costs an index write too
    await client.put_item(TableName=table, Item={"pk": {"S": "actor"}, "sk": {"S": "i#m1"}, "t": {"N": "1"}})
    assert ((meter - before).write_units, (meter - before).index_write_units) == (1, 1)

    before = step()
    await client.put_item(TableName=table, Item=_status_item("pending"))
    await client.put_item(TableName=table, Item=_status_item("sleeping"))  # the index key changes: delete + put
    changes = meter - before
    assert (changes.write_units, changes.index_write_units) == (2, 3)

    before = step()
    await client.put_item(TableName=table, Item={"pk": {"S": "actor"}, "sk": {"S": "c#000"},
                                                 "z": {"B": b"z" * 1500}})  # 2 KB started: 2 units, no index
    assert ((meter - before).write_units, (meter - before).index_write_units) == (2, 0)


async def test_reported_reads_never_fall_below_the_minimum(reported: tuple[Any, str, Meter, list[bytes]]) -> None:
    client, table, meter, _ = reported
    query = {"TableName": table, "KeyConditionExpression": "pk = :p",
             "ExpressionAttributeValues": {":p": {"S": "nobody"}}}
    before = meter.copy()
    await client.query(IndexName="pending", ConsistentRead=True, **query)  # DynamoDB Local reports 0 units
    empty = meter - before
    assert (empty.read_units, empty.capacity_reported) == (1, 1)  # AWS bills an empty strong read its minimum
    before = meter.copy()
    await client.query(IndexName="status", KeyConditionExpression="lt = :t",
                       ExpressionAttributeValues={":t": {"S": "nothing"}}, TableName=table)
    assert (meter - before).read_units == 0.5  # global indexes read eventually consistent: half


async def test_a_failed_conditional_write_is_billed_at_its_estimate(
        reported: tuple[Any, str, Meter, list[bytes]]) -> None:
    client, table, meter, _ = reported
    await client.put_item(TableName=table, Item=_inbox_item("m2"))
    before = meter.copy()
    with pytest.raises(client.exceptions.ConditionalCheckFailedException):
        await client.put_item(TableName=table, Item=_inbox_item("m2"), ConditionExpression="attribute_not_exists(pk)")
    failed = meter - before
    assert (failed.write_units, failed.capacity_reported, failed.requests["dynamodb.PutItem"]) == (1, 0, 1)


async def test_estimates_without_capacity_change_no_request(estimated: tuple[Any, str, Meter, list[bytes]]) -> None:
    client, table, meter, bodies = estimated
    with metering() as scope:
        await client.put_item(TableName=table, Item=_inbox_item("m1", size=1500))
        await client.query(TableName=table, ConsistentRead=True, KeyConditionExpression="pk = :p",
                           ExpressionAttributeValues={":p": {"S": "actor"}})
        await client.query(TableName=table, IndexName="status", KeyConditionExpression="lt = :t",
                           ExpressionAttributeValues={":t": {"S": "nothing"}})
        # moto answers this one with a ConsumedCapacity nobody asked for (not AWS's rules): the estimate counts
        await client.batch_write_item(RequestItems={table: [
            {"DeleteRequest": {"Key": {"pk": {"S": "actor"}, "sk": {"S": f"i#m{n}"}}}} for n in range(3)]})
    assert all(b"ReturnConsumedCapacity" not in body for body in bodies)
    assert (scope.write_units, scope.index_write_units, scope.capacity_reported) == (5, 0, 0)
    assert scope.read_units == 1.5  # the strong Query's minimum, and half of one for the index Query
    assert meter.requests == scope.requests == {"dynamodb.PutItem": 1, "dynamodb.Query": 2,
                                                "dynamodb.BatchWriteItem": 1}


async def test_sqs_requests_are_billed_per_64_kb_and_by_queue_kind(moto_server: str) -> None:
    async with shared_session().create_client("sqs", endpoint_url=moto_server, region_name="us-east-1") as sqs:
        name = uuid.uuid4().hex[:10]
        fifo = (await sqs.create_queue(QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true"}))["QueueUrl"]
        standard = (await sqs.create_queue(QueueName=name))["QueueUrl"]
        meter = Meter()
        instrument(sqs, always=meter)
        await sqs.send_message(QueueUrl=fifo, MessageBody="small", MessageGroupId="g", MessageDeduplicationId="1")
        await sqs.send_message(QueueUrl=standard, MessageBody="y" * (100 * 1024))  # two started 64 KB chunks
        await sqs.send_message_batch(QueueUrl=standard, Entries=[
            {"Id": str(n), "MessageBody": json.dumps({"n": n})} for n in range(10)])  # ten small ones: one request
        assert meter.sqs_billed == {"fifo": 1, "standard": 3}
        before = meter.copy()
        received = await sqs.receive_message(QueueUrl=standard, MaxNumberOfMessages=10)
        assert sum(len(m["Body"]) for m in received["Messages"]) > 64 * 1024  # the big one came back
        assert (meter - before).sqs_billed == {"standard": 2}  # billed by the payload it returned
        assert meter.sqs_requests == 4 and sum(meter.sqs_billed.values()) == 6


def test_meters_add_and_subtract_every_count() -> None:
    first = Meter(write_units=2, index_write_units=1, capacity_reported=3, read_units=0.5)
    first.requests["dynamodb.PutItem"] += 2
    first.sqs_billed["fifo"] += 3
    total = first.copy()
    total.add(first)
    assert (total.write_units, total.index_write_units, total.capacity_reported, total.read_units) == (4, 2, 6, 1)
    assert total.sqs_billed == {"fifo": 6} and total.requests == {"dynamodb.PutItem": 4}
    diff = total - first
    assert diff == first and (diff - first) == Meter()  # zero counts are dropped


async def test_a_session_asks_for_capacity_for_the_clients_made_from_it(dynamodb_local_server: str) -> None:
    """What the Lambda handlers' clients get when a benchmark hooks the shared botocore session first."""
    from botocore.session import get_session as botocore_session  # type: ignore[import-untyped]

    from dormant.aws.clients import open_client
    from dormant.aws.metering import ask_consumed_capacity
    from dormant.settings import Settings

    session = botocore_session()
    ask_consumed_capacity(session)
    settings = Settings(endpoint_url=dynamodb_local_server, region="us-east-1")
    table = f"metering-{uuid.uuid4().hex[:10]}"
    async with open_client("dynamodb", settings, kind="threads", session=session) as client:
        await client.create_table(**table_definition(table))
        meter = Meter()
        instrument(client, always=meter)  # no capacity=True: the session's hook asks for it
        await client.put_item(TableName=table, Item=_inbox_item("m1"))
        assert (meter.write_units, meter.index_write_units, meter.capacity_reported) == (1, 1, 1)
        await client.delete_table(TableName=table)
