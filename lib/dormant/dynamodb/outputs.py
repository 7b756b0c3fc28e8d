"""Responses and events of the DynamoDB store: TTL items in the actor's partition, written after the commit that
made them (the store's settling: dormant.dynamodb.settle), read by the clients that wait for them: a
`send(wait=True)` on the schedule dormant.runtime.reply_timing learns (the first read at the actor type's median
wake-up latency, then reads spaced by the answers' spread and a read's price in API time), event long-polls
with short, growing polls."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from dormant.core.records import ActorRef, EventRecord
from dormant.dynamodb.items import Head, dumps
from dormant.dynamodb.keys import events_after, events_key, item_key, response_key
from dormant.dynamodb.requests import Item, Table
from dormant.dynamodb.table import TTL_ATTRIBUTE
from dormant.runtime.reply_timing import TIMING, ReadSchedule
from dormant.settings import Settings

POLL_FIRST, POLL_MAX = 0.02, 0.25
T = TypeVar("T")


async def poll(fetch: Callable[[], Awaitable[T | None]], timeout: float, key: str | None = None,
               schedule: ReadSchedule | None = None) -> T | None:
    """`fetch()` until it returns something or `timeout` passes: at once, then at intervals that double up to
    POLL_MAX, or when `schedule` says (which is told what each read found).

    With `key` (an actor id) a pause also ends when `changed(key)` is called: in a process that runs the API
    and the worker together (`dormant dev`), a commit for that actor makes the waiting request look again at
    once instead of at its next interval. Elsewhere nothing calls it and the intervals alone apply."""
    started = time.monotonic()
    deadline = started + timeout
    interval = POLL_FIRST
    while True:
        if schedule is not None:
            ahead = min(schedule.pause(time.monotonic() - started), deadline - time.monotonic())
            if ahead > 0:
                await _pause(key, ahead)
        at = time.monotonic()
        found = await fetch()
        if schedule is not None:
            schedule.looked(at - started, found is not None)
        remaining = deadline - time.monotonic()
        if found is not None or remaining <= 0:
            return found
        if schedule is None:
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


class OutputItems:
    """Writes and reads the response and event items of one table."""

    def __init__(self, table: Table, settings: Settings, clock: Callable[[], float]) -> None:
        self.table = table
        self._response_ttl = settings.response_ttl_seconds
        self._event_ttl = settings.event_ttl_seconds
        self._now = clock

    def items_of(self, ref: ActorRef, head: Head) -> list[Item]:
        """The items of `head`'s responses and events (idempotent puts: a settling written again writes the same)."""
        side, version = head.side, {"N": str(head.version)}
        items: list[Item] = [{**item_key(ref.id, response_key(mid)), "v": version, "d": {"S": dumps(response)},
                              TTL_ATTRIBUTE: {"N": str(int(side.at + self._response_ttl))}}
                             for mid, response in side.responses.items()]
        if side.events:
            items.append({**item_key(ref.id, events_key(side.events[-1][0])), "v": version,
                          "d": {"S": dumps(side.events)}, TTL_ATTRIBUTE: {"N": str(int(side.at + self._event_ttl))}})
        return items

    def _expired(self, item: Item) -> bool:
        # DynamoDB deletes expired items lazily (and dynalite never): filter on read.
        expires = item.get(TTL_ATTRIBUTE)
        return expires is not None and float(expires["N"]) < self._now()

    async def wait_response(self, ref: ActorRef, message_id: str, timeout: float) -> tuple[bool, Any]:
        async def fetch() -> tuple[bool, Any] | None:
            item = await self.table.get(item_key(ref.id, response_key(message_id)))
            if item is None or self._expired(item):
                return None
            return True, json.loads(item["d"]["S"])

        # A zero timeout is one look now (a last check), not a wait to schedule or learn from.
        schedule = TIMING.schedule(ref.name) if timeout > 0 else None
        return await poll(fetch, timeout, ref.id, schedule) or (False, None)

    async def read_events(self, ref: ActorRef, after: int, limit: int) -> list[EventRecord]:
        records: list[EventRecord] = []
        start: Item | None = None
        low, high = events_after(after)
        while len(records) < limit:
            # Items are keyed by the last seq of their commit: the first one past `after` may start before it.
            page = await self.table.query_page("pk = :pk AND sk BETWEEN :low AND :high",
                                               {":pk": {"S": ref.id}, ":low": {"S": low}, ":high": {"S": high}},
                                               start=start)
            for item in page.items:
                if self._expired(item):
                    continue
                for seq, name, payload, at in json.loads(item["d"]["S"]):
                    if seq > after and len(records) < limit:
                        records.append(EventRecord(seq=seq, name=name, payload=payload, at=at))
            start = page.last_key
            if start is None:
                break
        return records

    async def wait_events(self, ref: ActorRef, after: int, timeout: float) -> list[EventRecord]:
        async def fetch() -> list[EventRecord] | None:
            return await self.read_events(ref, after, 1000) or None

        return await poll(fetch, timeout, ref.id) or []
