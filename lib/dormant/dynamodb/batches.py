"""Batched DynamoDB requests of the event store: BatchWriteItem (puts and deletes of independent items) and
BatchGetItem, each retried with backoff on what the server left unprocessed (throttling)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from dormant.core.limits import BATCH_GET, BATCH_WRITE
from dormant.errors import StorageError

BATCH_WRITE_MAX, BATCH_GET_MAX = BATCH_WRITE.maximum, BATCH_GET.maximum
_ATTEMPTS = 6

Call = Callable[..., Awaitable[Any]]


class ConditionFailed(Exception):
    """A conditional write's condition did not hold (ConditionalCheckFailedException)."""


async def batch_write(call: Call, table: str, requests: list[dict[str, Any]]) -> None:
    """BatchWriteItem `requests` ({"PutRequest": ...} or {"DeleteRequest": ...}) in pages of 25."""
    for start in range(0, len(requests), BATCH_WRITE_MAX):
        page = requests[start:start + BATCH_WRITE_MAX]
        for attempt in range(_ATTEMPTS):
            response = await call("BatchWriteItem", RequestItems={table: page})
            page = response.get("UnprocessedItems", {}).get(table, [])
            if not page:
                break
            await asyncio.sleep(0.02 * 2 ** attempt)
        else:
            raise StorageError(f"DynamoDB kept throttling BatchWriteItem on {table}; "
                               "the next load of the actor writes the rest")


async def put_all(call: Call, table: str, items: list[dict[str, Any]]) -> None:
    await batch_write(call, table, [{"PutRequest": {"Item": item}} for item in items])


async def delete_all(call: Call, table: str, keys: list[dict[str, Any]]) -> None:
    await batch_write(call, table, [{"DeleteRequest": {"Key": key}} for key in keys])


async def present(call: Call, table: str, pk: str, sort_keys: list[str], version: int) -> set[str]:
    """Which of these items of partition `pk` exist, written for `version` (their `v`)."""
    found: set[str] = set()
    for start in range(0, len(sort_keys), BATCH_GET_MAX):
        keys: list[dict[str, Any]] = [{"pk": {"S": pk}, "sk": {"S": sk}}
                                      for sk in sort_keys[start:start + BATCH_GET_MAX]]
        for attempt in range(_ATTEMPTS):
            response = await call("BatchGetItem", RequestItems={table: {
                "Keys": keys, "ConsistentRead": True, "ProjectionExpression": "sk, v"}})
            for item in response.get("Responses", {}).get(table, []):
                if int(item["v"]["N"]) == version:
                    found.add(item["sk"]["S"])
            keys = response.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
            if not keys:
                break
            await asyncio.sleep(0.02 * 2 ** attempt)
        else:
            raise StorageError(f"DynamoDB kept throttling BatchGetItem on {table}")
    return found
