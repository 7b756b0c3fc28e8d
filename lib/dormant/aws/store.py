"""EventStore on DynamoDB (async, aiobotocore): one table, single-item conditional commits.

One actor's partition (`pk` = ActorRef.id) holds a ring of commit slots `c#NNN` (every commit is one
conditional PutItem on its slot; every N-th carries a full snapshot, so a load is one Query of the ring),
inbox items `i#<id>` (pending, in the sparse `pending` index, then tombstones with a TTL), responses `r#<id>`
and events `e#<seq>` (TTL) and the last wake-up error `w#`. No TransactWriteItems anywhere. The layout, and
why, is in docs/storage.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

from dormant.aws import deletion, inbox
from dormant.aws.batches import ConditionFailed, present, put_all
from dormant.aws.items import (
    ITEM_LIMIT,
    RING_PREFIX,
    Head,
    Side,
    TornRead,
    commit_payload,
    compress,
    dumps,
    item_size,
    json_size,
    ring_key,
    too_large,
)
from dormant.aws.listing import STATUS_SK, AttentionItems, StatusItems
from dormant.aws.messages import InboxItems
from dormant.aws.side import EVENTS_PREFIX, RESPONSE_PREFIX, SideItems
from dormant.aws.table import PENDING_INDEX, TTL_ATTRIBUTE, client_config, create_table, table_definition
from dormant.errors import ItemTooLargeError, StorageError, VersionConflict
from dormant.ports import (
    ActorCount,
    ActorMeta,
    ActorPage,
    ActorRef,
    ActorSnapshot,
    ActorSummary,
    AttentionPage,
    AttentionReason,
    EventRecord,
    InboxMessage,
    WakeError,
    listed_status,
)
from dormant.settings import Settings
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import WorkflowRecord, WorkflowState

__all__ = ["ITEM_LIMIT", "PENDING_INDEX", "TTL_ATTRIBUTE", "DynamoEventStore", "client_config", "create_table",
           "table_definition"]

log = logging.getLogger(__name__)

SNAPSHOT_AFTER_BYTES = 96 * 1024  # also snapshot once the deltas since the last one are this big
_RING_PREFIX, _WAKE_ERROR = RING_PREFIX, "w#"
_WAKE_ERROR_ORDER = "!"  # sorts before every message in the `pending` index
_TORN_READ_RETRIES = 5


class DynamoEventStore:
    """EventStore on a DynamoDB-compatible table (AWS, moto server, dynalite, LocalStack, ...).

    Give it an aiobotocore DynamoDB client (whose lifecycle stays yours) or let `connect` make one from the
    settings:

        async with DynamoEventStore.connect(settings) as store:
            await store.create_table()   # tests and `dormant dev`; deployments create it from template.yaml

    `settle_on_load=False` (read-only users such as an API) skips checking, during loads, that the newest
    commit's responses/events were written; the actor's next commit still makes sure of it.
    """
    wait_inbox = inbox.wait_inbox  # EventStore.wait_inbox: polls the `pending` index (dormant.aws.inbox)

    def __init__(self, client: Any, settings: Settings | None = None, *, settle_on_load: bool = True,
                 cache_size: int = 512, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.settings = settings if settings is not None else Settings()
        self.table = self.settings.table
        self._settle_on_load = settle_on_load
        self._cache: OrderedDict[tuple[str, int], Head] = OrderedDict()
        self._cache_size = cache_size
        self._now = clock
        self.item_limit = ITEM_LIMIT  # tests raise it to reach the server's own check
        self._side = SideItems(self._call, self.table, self._expired)
        self._inbox = InboxItems(self._call, self._put_if, self._put_all, self.table, now=clock,
                                 dedupe_ttl_seconds=self.settings.dedupe_ttl_seconds)
        self.status_items = StatusItems(self._call, self._put_if, self.table)
        self.attention_items = AttentionItems(self._call, self.table)

    @classmethod
    @asynccontextmanager
    async def connect(cls, settings: Settings | None = None, *, session: Any = None,
                      **options: Any) -> AsyncIterator[DynamoEventStore]:
        """A store with its own client (endpoint, region and kind from the settings, dormant.aws.clients),
        closed on exit; `session` as for `open_client`."""
        from dormant.aws.clients import open_client

        settings = settings if settings is not None else Settings()
        async with open_client("dynamodb", settings, session=session) as client:
            yield cls(client, settings, **options)

    async def create_table(self) -> None:
        await create_table(self.client, self.table)

    # -- EventStore ----------------------------------------------------------------------------------
    async def create(self, ref: ActorRef, meta: ActorMeta, state: dict[str, Any], workflow: WorkflowRecord,
                     events: list[tuple[str, Any]]) -> bool:
        meta_json = meta.model_dump(mode="json")
        workflow_json = workflow.model_dump(mode="json")
        side = Side(events=[[i + 1, name, payload, meta.created_at] for i, (name, payload) in enumerate(events)],
                     at=self._now(), listed=(listed_status(workflow.state).value, meta.created_at))
        full = {"meta": meta_json, "state": dict(state), "workflow": workflow_json, "history": {},
                "seq": len(events)}
        # Incarnations sort by creation time: a commit of a deleted life never overwrites a later one's items.
        incarnation = f"{time.time_ns():020d}{uuid.uuid4().hex[:8]}"
        head = Head.from_snapshot(1, self.settings.snapshot_every, full, side, incarnation)
        item = self._commit_item(ref, head, {"f": full, **side.payload()}, snapshot=True, at=side.at)
        self._check_size(ref, "the first commit", item, head.full_parts() + self._side_parts(side))
        if not await self._put_if(item, "attribute_not_exists(pk)", {}):
            return False
        self._remember(ref, head)
        await self._settle(ref, head)
        return True

    async def exists(self, ref: ActorRef) -> bool:
        # Slot 0 holds version 1 (and later 1 + k*N) while the actor exists; a deletion's marker while it is deleted.
        key = {"pk": {"S": ref.id}, "sk": {"S": ring_key(1, 1)}}
        response = await self._call("GetItem", TableName=self.table, ConsistentRead=True, Key=key,
                                    ProjectionExpression="sk, gone")
        return "Item" in response and "gone" not in response["Item"]

    async def load(self, ref: ActorRef) -> ActorSnapshot | None:
        for attempt in range(_TORN_READ_RETRIES):
            ring_items, pending = await asyncio.gather(self._query_ring(ref), self._query_pending(ref))
            try:
                materialized = self._materialize(ref, ring_items)
                if materialized is None:
                    return None
                head, chain = materialized
                break
            except TornRead:
                await asyncio.sleep(0.01 * (attempt + 1))
        else:
            raise StorageError(f"could not read a consistent commit chain of {ref} in {_TORN_READ_RETRIES} tries")
        wake_errors = [item for item in pending if item["sk"]["S"] == _WAKE_ERROR]
        inbox, held = self._inbox.live(ref, [item for item in pending if "m" in item], chain)
        if not head.settled and self._settle_on_load:
            await self._settle(ref, head, probe=True)
        self._remember(ref, head)
        snapshot = head.snapshot(ref)
        snapshot.inbox = inbox
        snapshot.held_ids = held
        if wake_errors:
            snapshot.wake_error = WakeError.model_validate_json(wake_errors[0]["d"]["S"])
        return snapshot

    async def commit(self, ref: ActorRef, expected_version: int, draft: CommitDraft) -> int:
        base = await self._base(ref, expected_version)
        version = expected_version + 1
        now = self._now()
        side = Side(consumed=list(draft.consumed_ids), responses=dict(draft.responses),
                     events=[[base.event_seq + i + 1, name, payload, draft.committed_at] for i, (name, payload) in
                             enumerate(draft.events)], at=now)
        delta: dict[str, Any] = {"u": draft.upserts, "x": draft.deleted_prefixes}
        if draft.state is not None:
            delta["s"] = draft.state
        if draft.workflow is not None:
            delta["w"] = draft.workflow.model_dump(mode="json")
        if draft.workflow is not None:
            listed = listed_status(draft.workflow.state)
            if listed is not listed_status(WorkflowState(base.workflow["state"])):
                side.listed = (listed.value, draft.committed_at)  # the status item follows (in _settle)
        upsert_sizes = [json_size(entry) for entry in draft.upserts]
        head = base.advance(version, delta, side, upsert_sizes)
        side_parts = self._side_parts(side)
        # Every version must be able to become a snapshot, so the commit that makes the live history
        # too big is the one refused (not some later, unrelated one).
        full_size = sum(size for _, size in head.full_parts()) + sum(size for _, size in side_parts) + 256
        if full_size > self.item_limit:
            raise too_large(ref, f"the live history of version {version}", full_size,
                             head.full_parts() + side_parts)
        delta_text_size = sum(upsert_sizes) + json_size(draft.state) + json_size(delta.get("w"))
        snapshot = (version - base.snapshot_version >= base.ring
                    or base.delta_bytes + delta_text_size > SNAPSHOT_AFTER_BYTES)
        if snapshot:
            payload = {"f": head.full(), **side.payload()}
            head.snapshot_version, head.delta_bytes, head.chain_consumed = version, 0, tuple(side.consumed)
            parts = head.full_parts() + side_parts
        else:
            payload = {**delta, **side.payload()}
            head.delta_bytes = base.delta_bytes + delta_text_size
            parts = [(f"history entry {e['location']!r}", size) for e, size in zip(draft.upserts, upsert_sizes,
                                                                                   strict=True)]
            parts += [("state", json_size(draft.state)), ("workflow record", json_size(delta.get("w"))), *side_parts]
        item = self._commit_item(ref, head, payload, snapshot=snapshot, at=now)
        self._check_size(ref, f"commit {version}", item, parts)
        incarnation = {":c": {"S": base.incarnation}}
        if version <= base.ring:  # a free slot, or one left by a deleted incarnation of the actor
            condition, values = "attribute_not_exists(pk) OR c < :c", incarnation
        else:  # the slot must still hold the version one lap behind: any later writer got there first
            condition, values = "v = :previous AND c = :c", {":previous": {"N": str(version - base.ring)},
                                                            **incarnation}
        if snapshot and base.chain_consumed:
            # After this commit a load no longer reads the commits that consumed these messages: their
            # tombstones must exist first (already consumed, so writing them early is always right).
            await self._inbox.write_tombstones(ref, base.chain_consumed, version)
        if not await self._put_if(item, condition, values):
            raise VersionConflict(f"{ref}: version {expected_version} is no longer current (another commit won)")
        self._remember(ref, head)
        await self._settle(ref, head)
        return version

    async def enqueue(self, ref: ActorRef, message: InboxMessage) -> bool:
        item = self._inbox.item(ref, message)
        self._check_size(ref, "the message", item, self._inbox.parts(message))
        return await self._inbox.put(ref, message.id, item)

    async def message_fingerprint(self, ref: ActorRef, message_id: str) -> str | None:
        return await self._inbox.fingerprint(ref, message_id)

    async def record_wake_error(self, ref: ActorRef, error: WakeError) -> None:
        if not await self.exists(ref):
            return
        await self._call("PutItem", TableName=self.table, Item={
            "pk": {"S": ref.id}, "sk": {"S": _WAKE_ERROR}, "pq": {"S": _WAKE_ERROR_ORDER},
            "d": {"S": error.model_dump_json()}})

    async def wait_response(self, ref: ActorRef, message_id: str, timeout: float) -> tuple[bool, Any]:
        return await self._side.wait_response(ref, message_id, timeout)

    async def read_events(self, ref: ActorRef, after: int, limit: int) -> list[EventRecord]:
        return await self._side.read_events(ref, after, limit)

    async def wait_events(self, ref: ActorRef, after: int, timeout: float) -> list[EventRecord]:
        return await self._side.wait_events(ref, after, timeout)

    async def read_summary(self, ref: ActorRef) -> ActorSummary | None:
        return await self.status_items.read(ref)

    async def list_actors(self, actor_type: str, *, status: WorkflowState | None = None, limit: int = 100,
                          after: str | None = None) -> ActorPage:
        return await self.status_items.list(actor_type, status, limit, after)

    async def count_actors(self, actor_type: str, status: WorkflowState, *, limit: int) -> ActorCount:
        return await self.status_items.count(actor_type, status, limit)

    async def mark_attention(self, ref: ActorRef, reason: AttentionReason, since: float) -> None:
        await self.attention_items.mark(ref, reason, since)

    async def clear_attention(self, ref: ActorRef, since: float | None = None) -> None:
        await self.attention_items.clear(ref, since)

    async def list_attention(self, actor_type: str, *, limit: int = 100, after: str | None = None) -> AttentionPage:
        return await self.attention_items.list(actor_type, limit, after)

    async def delete(self, ref: ActorRef) -> bool:
        return await deletion.delete_actor(self, ref)

    # -- reading the ring ----------------------------------------------------------------------------
    async def _query_ring(self, ref: ActorRef) -> list[dict[str, Any]]:
        return await self._query_all(
            TableName=self.table, ConsistentRead=True, ScanIndexForward=False,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :ring)",
            ExpressionAttributeValues={":pk": {"S": ref.id}, ":ring": {"S": _RING_PREFIX}})

    async def _query_pending(self, ref: ActorRef) -> list[dict[str, Any]]:
        return await self._query_all(
            TableName=self.table, IndexName=PENDING_INDEX, ConsistentRead=True,
            KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": {"S": ref.id}})

    async def _query_all(self, **kwargs: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while True:
            response = await self._call("Query", **kwargs)
            items += response.get("Items", [])
            if "LastEvaluatedKey" not in response:
                return items
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def _materialize(self, ref: ActorRef, items: list[dict[str, Any]]) -> tuple[Head, list[Side]] | None:
        """The newest version: its snapshot plus the deltas after it. Returns it and the chain's side work;
        None when there is no live actor (no slot 0, or a deletion's marker there)."""
        anchor = next((item for item in items if item["sk"]["S"] == ring_key(1, 1)), None)
        if anchor is None or "gone" in anchor:
            return None
        incarnation = anchor.get("c", {}).get("S", "")
        # Slot 0 is written by the create and never deleted but by a deletion: items of another incarnation
        # are what a wake-up of a deleted actor committed late (dormant.aws.deletion); they are not this actor.
        by_version = {int(item["v"]["N"]): item for item in items if item.get("c", {}).get("S", "") == incarnation}
        newest = max(by_version)
        if "gone" in by_version[newest]:  # being deleted (dormant.aws.deletion)
            return None
        chain: list[dict[str, Any]] = []
        version = newest
        while True:
            item = by_version.get(version)
            if item is None:
                raise TornRead()
            chain.append(item)
            if "snap" in item:
                break
            version -= 1
        chain.reverse()  # snapshot first
        payloads = [commit_payload(item) for item in chain]
        sides = [Side.from_payload(payload, float(item["at"]["N"])) for item, payload in zip(chain, payloads,
                                                                                                strict=True)]
        cached = self._cache.get((ref.id, newest))
        if cached is not None and cached.incarnation == incarnation:
            return cached, sides
        head = Head.from_snapshot(int(chain[0]["v"]["N"]), int(chain[0]["n"]["N"]), payloads[0]["f"], sides[0],
                                  incarnation)
        for item, payload, side in zip(chain[1:], payloads[1:], sides[1:], strict=True):
            head = head.advance(int(item["v"]["N"]), payload, side)
            head.delta_bytes += len(item["z"]["B"])
        return head, sides

    def _live_inbox(self, ref: ActorRef, pending: list[dict[str, Any]], chain: list[Side]) -> list[InboxMessage]:
        """Pending messages minus those the chain consumed (dormant.aws.inbox polls with it)."""
        return self._inbox.live(ref, pending, chain)[0]

    # -- writing -------------------------------------------------------------------------------------
    def _commit_item(self, ref: ActorRef, head: Head, payload: dict[str, Any], *, snapshot: bool,
                     at: float) -> dict[str, dict[str, Any]]:
        item: dict[str, dict[str, Any]] = {
            "pk": {"S": ref.id}, "sk": {"S": ring_key(head.version, head.ring)}, "v": {"N": str(head.version)},
            "n": {"N": str(head.ring)}, "at": {"N": repr(at)}, "c": {"S": head.incarnation},
            "z": {"B": compress(payload)}}
        if snapshot:
            item["snap"] = {"BOOL": True}
        return item

    def _check_size(self, ref: ActorRef, what: str, item: dict[str, dict[str, Any]],
                    parts: Iterable[tuple[str, int]]) -> None:
        size = item_size(item)
        if size > self.item_limit:
            raise too_large(ref, what, size, parts)

    @staticmethod
    def _side_parts(side: Side) -> list[tuple[str, int]]:
        parts = [(f"the response to message {mid!r}", json_size(r)) for mid, r in side.responses.items()]
        if side.events:
            parts.append(("the events of this commit", json_size(side.events)))
        return parts

    async def _base(self, ref: ActorRef, expected_version: int) -> Head:
        """The materialized version a commit builds on; settled, so nothing of it can be lost."""
        head = self._cache.get((ref.id, expected_version))
        if head is None:
            snapshot = await self.load(ref)
            head = self._cache.get((ref.id, expected_version))
            if snapshot is None or head is None:
                found = snapshot.version if snapshot is not None else "no actor"
                raise VersionConflict(f"{ref}: expected version {expected_version}, found {found}")
        if not head.settled:  # loaded without settling (settle_on_load=False)
            await self._settle(ref, head, probe=True)
        return head

    async def _settle(self, ref: ActorRef, head: Head, *, probe: bool = False) -> None:
        """Write a version's responses and events as their own items (idempotent puts).

        A commit settles its own version before returning, and a commit needs its base settled, so only
        the newest version can be unsettled (a crash right after its commit): whoever loads it next
        finishes the job. `probe`: first read which of them exist, to write only the missing ones."""
        side, pk = head.side, {"S": ref.id}
        derived = [{"pk": pk, "sk": {"S": RESPONSE_PREFIX + mid}, "v": {"N": str(head.version)},
                    "d": {"S": dumps(response)},
                    TTL_ATTRIBUTE: {"N": str(int(side.at + self.settings.response_ttl_seconds))}}
                   for mid, response in side.responses.items()]
        if side.events:
            derived.append({"pk": pk, "sk": {"S": f"{EVENTS_PREFIX}{side.events[-1][0]:012d}"},
                            "v": {"N": str(head.version)}, "d": {"S": dumps(side.events)},
                            TTL_ATTRIBUTE: {"N": str(int(side.at + self.settings.event_ttl_seconds))}})
        keys = [item["sk"]["S"] for item in derived] + ([STATUS_SK] if side.listed else [])
        found = await present(self._call, self.table, ref.id, keys, head.version) if probe and keys else set()
        derived = [item for item in derived if item["sk"]["S"] not in found]
        if derived:
            await put_all(self._call, self.table, derived)
        if side.listed is not None and STATUS_SK not in found:
            await self.status_items.put(ref, status=side.listed[0], since=side.listed[1], version=head.version,
                                        created_at=float(head.meta["created_at"]), incarnation=head.incarnation)
        if probe and (derived or (side.listed and STATUS_SK not in found)):
            log.info("settled version %d of %s: re-wrote its derived item(s)", head.version, ref)
        head.settled = True

    async def _put_all(self, items: list[dict[str, Any]]) -> None:
        await put_all(self._call, self.table, items)


    async def _put_if(self, item: dict[str, Any], condition: str, values: dict[str, Any]) -> bool:
        """Conditional PutItem; False when the condition failed."""
        kwargs: dict[str, Any] = {"TableName": self.table, "Item": item, "ConditionExpression": condition}
        if values:
            kwargs["ExpressionAttributeValues"] = values
        try:
            await self._call("PutItem", **kwargs)
        except ConditionFailed:
            return False
        return True

    async def _call(self, operation: str, **kwargs: Any) -> Any:
        method = getattr(self.client, _SNAKE[operation])
        try:
            return await method(**kwargs)
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            message = error.response.get("Error", {}).get("Message", "")
            if code == "ConditionalCheckFailedException":
                raise ConditionFailed() from None
            if code == "ValidationException" and "size" in message.lower():
                raise ItemTooLargeError(f"DynamoDB refused an item of table {self.table} as over its 400 KB "
                                        f"limit ({message}); retrying cannot help") from error
            raise StorageError(f"DynamoDB {operation} on {self.table} failed: {code}: {message}") from error
        except BotoCoreError as error:
            raise StorageError(f"DynamoDB {operation} on {self.table} failed: {error}") from error

    # -- small helpers -------------------------------------------------------------------------------
    def _remember(self, ref: ActorRef, head: Head) -> None:
        key = (ref.id, head.version)
        known = self._cache.get(key)
        if known is not None and known.settled:
            head.settled = True
        self._cache[key] = head
        self._cache.move_to_end(key)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def _expired(self, item: dict[str, Any]) -> bool:
        # DynamoDB deletes expired items lazily (and dynalite never): filter on read.
        expires = item.get(TTL_ATTRIBUTE)
        return expires is not None and float(expires["N"]) < self._now()


_SNAKE = {"GetItem": "get_item", "PutItem": "put_item", "Query": "query", "BatchWriteItem": "batch_write_item",
          "BatchGetItem": "batch_get_item", "DeleteItem": "delete_item"}
