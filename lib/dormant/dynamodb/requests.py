"""The store's requests to its table: one object over an aiobotocore-faced client (dormant.core.clients) and the
table's name, with the few operations the store makes, and their errors classified in one place.

Classified by the error's code, never by its message (servers word them differently): a failed condition is a
False answer of the conditional operations; ValidationException is StorageRefusedError (retrying cannot help);
everything else StorageError. Batches retry what the server left unprocessed (throttling) with backoff. Only
DynamoDB's item-level actions the deployed roles grant (`OPERATIONS`; tests/deploy checks the roles against it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

from dormant.core.limits import BATCH_GET, BATCH_WRITE
from dormant.errors import StorageError, StorageRefusedError

Item = dict[str, Any]
Values = dict[str, Any]

# DynamoDB action -> the client's method: everything the store calls while it runs
OPERATIONS = {"GetItem": "get_item", "PutItem": "put_item", "Query": "query", "BatchWriteItem": "batch_write_item",
              "BatchGetItem": "batch_get_item", "DeleteItem": "delete_item", "UpdateItem": "update_item"}
BATCH_WRITE_MAX, BATCH_GET_MAX = BATCH_WRITE.maximum, BATCH_GET.maximum
BATCH_ATTEMPTS = 6


class _ConditionFailed(Exception):
    """ConditionalCheckFailedException: the conditional operations answer False."""


@dataclass(slots=True)
class Page:
    """One page of a Query: its items (or only their count, with Select=COUNT) and where the next one starts."""

    items: list[Item]
    count: int
    last_key: Item | None


class Table:
    """The requests of one store to one table (the client's lifecycle is its owner's)."""

    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self.name = name

    # -- single items -------------------------------------------------------------------------------------------
    async def put(self, item: Item, condition: str | None = None, values: Values | None = None,
                  names: dict[str, str] | None = None) -> bool:
        """PutItem, conditional when `condition` is given; False when the condition failed (nothing written)."""
        return await self._conditional("PutItem", self._with(
            {"Item": item}, condition=condition, values=values, names=names))

    async def get(self, key: Item, *, projection: str | None = None,
                  names: dict[str, str] | None = None) -> Item | None:
        """A strongly consistent GetItem; None when there is no such item."""
        kwargs = self._with({"Key": key, "ConsistentRead": True}, names=names)
        if projection is not None:
            kwargs["ProjectionExpression"] = projection
        item: Item | None = (await self._call("GetItem", **kwargs)).get("Item")
        return item

    async def delete(self, key: Item, condition: str | None = None, values: Values | None = None,
                     names: dict[str, str] | None = None) -> bool:
        """DeleteItem, conditional when `condition` is given; False when the condition failed."""
        return await self._conditional("DeleteItem", self._with(
            {"Key": key}, condition=condition, values=values, names=names))

    async def update(self, key: Item, expression: str, condition: str | None = None, values: Values | None = None,
                     names: dict[str, str] | None = None) -> bool:
        """UpdateItem; False when its condition failed."""
        return await self._conditional("UpdateItem", self._with(
            {"Key": key, "UpdateExpression": expression}, condition=condition, values=values, names=names))

    # -- queries ----------------------------------------------------------------------------------------------------
    async def query_page(self, key_condition: str, values: Values, *, index: str | None = None,
                         consistent: bool = True, forward: bool = True, limit: int | None = None,
                         start: Item | None = None, projection: str | None = None,
                         names: dict[str, str] | None = None, count_only: bool = False,
                         filter_expression: str | None = None) -> Page:
        """One page of a Query (a global index reads eventually consistent: pass `consistent=False`);
        `filter_expression`: what it leaves out is still read and billed, but neither sent nor parsed."""
        kwargs = self._with({"KeyConditionExpression": key_condition}, values=values, names=names)
        if filter_expression is not None:
            kwargs["FilterExpression"] = filter_expression
        if index is not None:
            kwargs["IndexName"] = index
        if consistent:
            kwargs["ConsistentRead"] = True
        if not forward:
            kwargs["ScanIndexForward"] = False
        if limit is not None:
            kwargs["Limit"] = limit
        if start is not None:
            kwargs["ExclusiveStartKey"] = start
        if projection is not None:
            kwargs["ProjectionExpression"] = projection
        if count_only:
            kwargs["Select"] = "COUNT"
        response = await self._call("Query", **kwargs)
        items = response.get("Items", [])
        return Page(items=items, count=int(response.get("Count", len(items))),
                    last_key=response.get("LastEvaluatedKey"))

    async def query(self, key_condition: str, values: Values, **options: Any) -> list[Item]:
        """Every item a Query finds, page after page (options as `query_page`'s, but `start`)."""
        items: list[Item] = []
        start: Item | None = None
        while True:
            page = await self.query_page(key_condition, values, start=start, **options)
            items += page.items
            if page.last_key is None:
                return items
            start = page.last_key

    async def count(self, key_condition: str, values: Values, **options: Any) -> int:
        """How many items a Query finds (Select=COUNT, page after page)."""
        counted, start = 0, None
        while True:
            page = await self.query_page(key_condition, values, start=start, count_only=True, **options)
            counted += page.count
            if page.last_key is None:
                return counted
            start = page.last_key

    # -- batches ----------------------------------------------------------------------------------------------------
    async def put_all(self, items: Sequence[Item]) -> None:
        """Unconditional puts of independent items, BatchWriteItem in pages of 25."""
        await self._batch_write([{"PutRequest": {"Item": item}} for item in items])

    async def delete_all(self, keys: Sequence[Item]) -> None:
        """Deletes of independent items, BatchWriteItem in pages of 25."""
        await self._batch_write([{"DeleteRequest": {"Key": key}} for key in keys])

    async def get_all(self, keys: Sequence[Item], projection: str, *, give_up: bool = False) -> list[Item]:
        """The items of `keys` that exist (strongly consistent BatchGetItem, in pages of 100). Keys the server keeps
        leaving unprocessed raise StorageError, or with `give_up` are left out."""
        found: list[Item] = []
        for first in range(0, len(keys), BATCH_GET_MAX):
            wanted = list(keys[first:first + BATCH_GET_MAX])
            for attempt in range(BATCH_ATTEMPTS):
                response = await self._call("BatchGetItem", RequestItems={self.name: {
                    "Keys": wanted, "ConsistentRead": True, "ProjectionExpression": projection}})
                found += response.get("Responses", {}).get(self.name, [])
                wanted = response.get("UnprocessedKeys", {}).get(self.name, {}).get("Keys", [])
                if not wanted:
                    break
                await asyncio.sleep(0.02 * 2 ** attempt)
            else:
                if not give_up:
                    raise StorageError(f"DynamoDB kept throttling BatchGetItem on {self.name}")
        return found

    async def _batch_write(self, requests: list[Item]) -> None:
        for first in range(0, len(requests), BATCH_WRITE_MAX):
            page = requests[first:first + BATCH_WRITE_MAX]
            for attempt in range(BATCH_ATTEMPTS):
                response = await self._call("BatchWriteItem", RequestItems={self.name: page})
                page = response.get("UnprocessedItems", {}).get(self.name, [])
                if not page:
                    break
                await asyncio.sleep(0.02 * 2 ** attempt)
            else:
                raise StorageError(f"DynamoDB kept throttling BatchWriteItem on {self.name}; "
                                   "the next load of the actor writes the rest")

    # -- the one place a request is made ------------------------------------------------------------------------
    def _with(self, kwargs: dict[str, Any], *, condition: str | None = None, values: Values | None = None,
              names: dict[str, str] | None = None) -> dict[str, Any]:
        kwargs["TableName"] = self.name
        if condition is not None:
            kwargs["ConditionExpression"] = condition
        if values:
            kwargs["ExpressionAttributeValues"] = values
        if names:
            kwargs["ExpressionAttributeNames"] = names
        return kwargs

    async def _conditional(self, operation: str, kwargs: dict[str, Any]) -> bool:
        try:
            await self._call(operation, **kwargs)
        except _ConditionFailed:
            return False
        return True

    async def _call(self, operation: str, **kwargs: Any) -> Any:
        method = getattr(self.client, OPERATIONS[operation])
        try:
            return await method(**kwargs)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            message = error.response.get("Error", {}).get("Message", "")
            if code == "ConditionalCheckFailedException":
                raise _ConditionFailed() from None
            if code == "ValidationException":
                raise StorageRefusedError(f"DynamoDB refused {operation} on {self.name} as invalid ({code}: "
                                          f"{message}); retrying cannot help. Dormant's checks should have refused "
                                          "this value before: please report it") from error
            raise StorageError(f"DynamoDB {operation} on {self.name} failed: {code}: {message}") from error
        except BotoCoreError as error:
            raise StorageError(f"DynamoDB {operation} on {self.name} failed: {error}") from error
