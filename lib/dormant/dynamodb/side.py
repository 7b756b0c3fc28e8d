"""Responses and events of the DynamoDB store: TTL items next to the actor's partition, read by the
clients that wait for them (`send(wait=True)`, event long-polls) with short, growing polls."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from dormant.ports import ActorRef, EventRecord

RESPONSE_PREFIX, EVENTS_PREFIX = "r#", "e#"
POLL_FIRST, POLL_MAX = 0.02, 0.25
T = TypeVar("T")

Call = Callable[..., Awaitable[Any]]


async def poll(fetch: Callable[[], Awaitable[T | None]], timeout: float, key: str | None = None) -> T | None:
    """`fetch()` until it returns something or `timeout` passes (intervals double up to POLL_MAX).

    With `key` (an actor id) a pause also ends when `changed(key)` is called: in a process that runs the API
    and the worker together (`dormant dev`), a commit for that actor makes the waiting request look again at
    once instead of at its next interval. Elsewhere nothing calls it and the intervals alone apply."""
    deadline = time.monotonic() + timeout
    interval = POLL_FIRST
    while True:
        found = await fetch()
        remaining = deadline - time.monotonic()
        if found is not None or remaining <= 0:
            return found
        await _pause(key, min(interval, remaining))
        interval = min(interval * 2, POLL_MAX)


_waiting: dict[str, list[asyncio.Future[None]]] = {}


def changed(key: str) -> None:
    """Something of actor `key` was just committed by this process: its waiting polls look again now."""
    for future in _waiting.pop(key, []):
        if not future.done():
            future.get_loop().call_soon_threadsafe(_resolve, future)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _pause(key: str | None, seconds: float) -> None:
    if key is None:
        await asyncio.sleep(seconds)
        return
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiters = _waiting.setdefault(key, [])
    waiters.append(future)
    try:
        await asyncio.wait_for(future, seconds)
    except TimeoutError:
        pass
    finally:
        if future in waiters:
            waiters.remove(future)
        if not waiters and _waiting.get(key) is waiters:
            del _waiting[key]


class SideItems:
    """Reads the response and event items of one table."""

    def __init__(self, call: Call, table: str, expired: Callable[[dict[str, Any]], bool]) -> None:
        self._call = call
        self._table = table
        self._expired = expired

    async def wait_response(self, ref: ActorRef, message_id: str, timeout: float) -> tuple[bool, Any]:
        async def fetch() -> tuple[bool, Any] | None:
            response = await self._call("GetItem", TableName=self._table, ConsistentRead=True,
                                        Key={"pk": {"S": ref.id}, "sk": {"S": RESPONSE_PREFIX + message_id}})
            item = response.get("Item")
            if item is None or self._expired(item):
                return None
            return True, json.loads(item["d"]["S"])

        return await poll(fetch, timeout, ref.id) or (False, None)

    async def read_events(self, ref: ActorRef, after: int, limit: int) -> list[EventRecord]:
        records: list[EventRecord] = []
        start: dict[str, Any] | None = None
        while len(records) < limit:
            # Items are keyed by the last seq of their commit: the first one past `after` may start before it.
            kwargs: dict[str, Any] = {
                "TableName": self._table, "ConsistentRead": True,
                "KeyConditionExpression": "pk = :pk AND sk BETWEEN :low AND :high",
                "ExpressionAttributeValues": {":pk": {"S": ref.id}, ":low": {"S": f"{EVENTS_PREFIX}{after + 1:012d}"},
                                              ":high": {"S": f"{EVENTS_PREFIX}~"}}}
            if start is not None:
                kwargs["ExclusiveStartKey"] = start
            response = await self._call("Query", **kwargs)
            for item in response.get("Items", []):
                if self._expired(item):
                    continue
                for seq, name, payload, at in json.loads(item["d"]["S"]):
                    if seq > after and len(records) < limit:
                        records.append(EventRecord(seq=seq, name=name, payload=payload, at=at))
            start = response.get("LastEvaluatedKey")
            if start is None:
                break
        return records

    async def wait_events(self, ref: ActorRef, after: int, timeout: float) -> list[EventRecord]:
        async def fetch() -> list[EventRecord] | None:
            return await self.read_events(ref, after, 1000) or None

        return await poll(fetch, timeout, ref.id) or []
