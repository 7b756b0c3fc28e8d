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
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

from dormant.dynamodb import callbacks, deletion, doctor, inbox, search, slots, versions
from dormant.dynamodb.batches import ConditionFailed, present, put_all
from dormant.dynamodb.items import (
    ITEM_LIMIT,
    RING_PREFIX,
    Head,
    Side,
    TornRead,
    dumps,
    json_size,
    ring_key,
    sized,
)
from dormant.dynamodb.listing import STATUS_SK, AttentionItems, StatusItems
from dormant.dynamodb.messages import InboxItems
from dormant.dynamodb.ring import RELEASES, commit_item, delta_of, materialize
from dormant.dynamodb.side import EVENTS_PREFIX, RESPONSE_PREFIX, SideItems
from dormant.dynamodb.sizes import SizeChecks, side_parts_of
from dormant.dynamodb.table import PENDING_INDEX, TTL_ATTRIBUTE, client_config, create_table, table_definition
from dormant.errors import StorageError, StorageRefusedError, VersionConflict
from dormant.models import ValueCheck
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
from dormant.s3.blobs import BlobMissing, S3Blobs
from dormant.s3.large_values import LargeValues
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
    wait_inbox = inbox.wait_inbox  # EventStore.wait_inbox: polls the `pending` index (dormant.dynamodb.inbox)
    acquire_slot, renew_slot, release_slot = slots.acquire_slot, slots.renew_slot, slots.release_slot  # (aws.slots)
    search_actors = search.search_actors  # EventStore.search_actors: Queries the `search` index (dynamodb.search)
    count_matches = search.count_matches
    deleted_at = deletion.deleted_at  # EventStore.deleted_at: the deletion mark (dormant.dynamodb.deletion)
    retained_versions, load_version = versions.retained_versions, versions.load_version  # fork/reset (aws.versions)
    read_callback, heartbeat_callback = callbacks.read_callback, callbacks.heartbeat_callback  # their lookup items

    def __init__(self, client: Any, settings: Settings | None = None, *, settle_on_load: bool = True,
                 cache_size: int = 512, clock: Callable[[], float] = time.time, blobs: S3Blobs | None = None) -> None:
        """`blobs`: the bucket that takes values too big for the log (dormant.s3.large_values); None: none is."""
        self.client = client
        self.settings = settings if settings is not None else Settings()
        self.table = self.settings.table
        self._settle_on_load = settle_on_load
        self._cache: OrderedDict[tuple[str, int], Head] = OrderedDict()
        self._cache_size = cache_size
        self._now = clock
        self.sizes = SizeChecks()  # dormant.dynamodb.sizes
        self.values = LargeValues(blobs, self.settings, clock=clock)
        self._side = SideItems(self._call, self.table, self._expired)
        self._inbox = InboxItems(self._call, self._put_if, self._put_all, self.table, now=clock,
                                 dedupe_ttl_seconds=self.settings.dedupe_ttl_seconds)
        self.status_items = StatusItems(self._call, self._put_if, self.table)
        self.attention_items = AttentionItems(self._call, self.table)
        self.callback_items = callbacks.CallbackItems(self._call, self.table, self.settings)

    @classmethod
    @asynccontextmanager
    async def connect(cls, settings: Settings | None = None, *, session: Any = None,
                      **options: Any) -> AsyncIterator[DynamoEventStore]:
        """A store with its own client (endpoint, region and kind from the settings, dormant.aws.clients),
        closed on exit; `session` as for `open_client`."""
        from dormant.aws.clients import open_client

        settings = settings if settings is not None else Settings()
        async with AsyncExitStack() as stack:
            client = await stack.enter_async_context(open_client("dynamodb", settings, session=session))
            if settings.bucket is not None and "blobs" not in options:
                s3 = await stack.enter_async_context(open_client("s3", settings, session=session))
                options["blobs"] = S3Blobs(s3, settings.bucket)
            yield cls(client, settings, **options)

    @property
    def item_limit(self) -> int:
        """Bytes per item the store writes at most (tests raise it to reach a server's own check)."""
        return self.sizes.item_limit

    @item_limit.setter
    def item_limit(self, value: int) -> None:
        self.sizes.item_limit = value

    async def create_table(self) -> None:
        await create_table(self.client, self.table)

    # -- EventStore ----------------------------------------------------------------------------------
    async def create(self, ref: ActorRef, meta: ActorMeta, state: dict[str, Any], workflow: WorkflowRecord,
                     events: list[tuple[str, Any]], search: dict[str, list[Any]] | None = None) -> bool:
        # Incarnations sort by creation time: a commit of a deleted life never overwrites a later one's items.
        incarnation = f"{time.time_ns():020d}{uuid.uuid4().hex[:8]}"
        state, events = await self.values.store_creation(ref, state, events)
        head, item = self._first_commit(ref, meta, state, workflow, events, incarnation, search or {})
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
        problem: Exception | None = None
        for attempt in range(_TORN_READ_RETRIES):
            ring_items, pending = await asyncio.gather(self._query_ring(ref), self._query_pending(ref))
            try:
                materialized = materialize(ring_items, lambda newest: self._cache.get((ref.id, newest)))
                if materialized is None:
                    return None
                head, chain = materialized
                inbox, held = self._inbox.live(ref, [item for item in pending if "m" in item], chain)
                # Values kept in S3: a reader of a version a later commit lapped may miss one; it reads again.
                fetched, inbox = await asyncio.gather(self.values.head_values(head),
                                                      self.values.resolve_inbox(ref, inbox))
                break
            except (TornRead, BlobMissing) as error:
                problem = error
                await asyncio.sleep(0.01 * (attempt + 1))
        else:
            raise StorageError(f"could not read a consistent version of {ref} in {_TORN_READ_RETRIES} tries: "
                               f"{problem or 'the commit chain kept changing'}")
        wake_errors = [item for item in pending if item["sk"]["S"] == _WAKE_ERROR]
        if not head.settled and self._settle_on_load:
            await self._settle(ref, head, probe=True)
        self._remember(ref, head)
        snapshot = head.snapshot(ref, fetched)
        snapshot.inbox = inbox
        snapshot.held_ids = held
        if wake_errors:
            snapshot.wake_error = WakeError.model_validate_json(wake_errors[0]["d"]["S"])
        return snapshot

    async def commit(self, ref: ActorRef, expected_version: int, draft: CommitDraft) -> int:
        base = await self._base(ref, expected_version)
        version = expected_version + 1
        now = self._now()
        draft = await self.values.store_draft(ref, base, version, draft)  # big values first (dormant.s3.large_values)
        side, delta = delta_of(base, draft, now)
        upsert_sizes = [sized(entry) for entry in draft.upserts]
        head = base.advance(version, delta, side, upsert_sizes)
        released = self.values.released(base, head)
        if released:
            head.releases[version] = released
        self.sizes.live(ref, head, side, base)
        side_parts = side_parts_of(side)
        delta_text_size = sum(size for size, _ in upsert_sizes) + json_size(draft.state) + json_size(delta.get("w"))
        snapshot = (version - base.snapshot_version >= base.ring
                    or base.delta_bytes + delta_text_size > SNAPSHOT_AFTER_BYTES)
        if snapshot:
            payload = {"f": head.full(), **side.payload()}
            head.snapshot_version, head.delta_bytes, head.chain_consumed = version, 0, tuple(side.consumed)
            parts = head.full_parts() + side_parts
        else:
            payload = {**delta, **side.payload()}
            head.delta_bytes = base.delta_bytes + delta_text_size
            parts = [(f"history entry {e['location']!r}", size) for e, (size, _) in zip(draft.upserts, upsert_sizes,
                                                                                        strict=True)]
            parts += [("state", json_size(draft.state)), ("workflow record", json_size(delta.get("w"))), *side_parts]
        item = commit_item(ref, head, payload, snapshot=snapshot, at=now)
        if released:  # deleted a lap later, when this slot is overwritten (dormant.s3.large_values)
            item[RELEASES] = {"SS": list(released)}
        self.sizes.item(ref, f"commit {version}", item, parts)
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
        await self.values.after_commit(ref, head, base.releases.get(version - base.ring, ()),
                                       lambda: self._pending_texts(ref))
        return version

    async def enqueue(self, ref: ActorRef, message: InboxMessage) -> bool:
        message = await self.values.prepare_message(ref, message)  # as sends do first (a no-op for them)
        item = self._inbox.item(ref, message)
        self.sizes.message_item(ref, item, self._inbox.parts(message))
        return await self._inbox.put(ref, message.id, item)

    # -- the checks before any write (EventStore; dormant.core.limits) ----------------------------------------------
    def check_message(self, ref: ActorRef, message: InboxMessage) -> None:
        message = self.values.check_message(ref, message)  # sized as stored: big values as references
        self.sizes.message_item(ref, self._inbox.item(ref, message, order=0), self._inbox.parts(message))

    def check_creation(self, ref: ActorRef, meta: ActorMeta, state: dict[str, Any],
                       events: list[tuple[str, Any]]) -> None:
        meta, state, events = self.values.check_creation(ref, meta, state, events)
        self._first_commit(ref, meta, state, WorkflowRecord(), events, "0" * 28)

    def check_commit(self, ref: ActorRef, version: int, draft: CommitDraft) -> None:
        draft = self.values.check_draft(ref, draft)  # sized as stored; the per-value ceiling
        base = self._cache.get((ref.id, version))
        if base is None:
            return  # not read here: the commit itself checks before it writes
        side, delta = delta_of(base, draft, draft.committed_at)
        head = base.advance(version + 1, delta, side)
        self.sizes.live(ref, head, side, base)

    async def prepare_message(self, ref: ActorRef, message: InboxMessage) -> InboxMessage:
        return await self.values.prepare_message(ref, message)

    async def prepare_input(self, ref: ActorRef, value: Any) -> Any:
        return await self.values.prepare_input(ref, value)

    async def message_fingerprint(self, ref: ActorRef, message_id: str) -> str | None:
        return await self._inbox.fingerprint(ref, message_id)

    async def record_wake_error(self, ref: ActorRef, error: WakeError) -> None:
        if not await self.exists(ref):
            return
        await self._call("PutItem", TableName=self.table, Item={
            "pk": {"S": ref.id}, "sk": {"S": _WAKE_ERROR}, "pq": {"S": _WAKE_ERROR_ORDER},
            "d": {"S": error.model_dump_json()}})

    async def wait_response(self, ref: ActorRef, message_id: str, timeout: float) -> tuple[bool, Any]:
        found, response = await self._side.wait_response(ref, message_id, timeout)
        return found, await self.values.resolve(response)

    async def read_events(self, ref: ActorRef, after: int, limit: int) -> list[EventRecord]:
        return await self.values.resolve_events(await self._side.read_events(ref, after, limit))

    async def wait_events(self, ref: ActorRef, after: int, timeout: float) -> list[EventRecord]:
        return await self.values.resolve_events(await self._side.wait_events(ref, after, timeout))

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

    async def delete(self, ref: ActorRef, *, at: float | None = None) -> bool:
        return await deletion.delete_actor(self, ref, at)

    async def check_values(self, ref: ActorRef, *, repair: bool = False) -> ValueCheck | None:
        return await doctor.check_values(self, ref, repair=repair)  # (dormant.dynamodb.doctor)

    # -- raw reads and writes for the doctor (dormant.dynamodb.doctor): an actor that cannot load is read this way -----
    async def read_ring(self, ref: ActorRef) -> list[dict[str, Any]]:
        """The raw items of the actor's commit ring (no S3 read)."""
        return await self._query_ring(ref)

    async def live_inbox_items(self, ref: ActorRef, head: Head) -> list[InboxMessage]:
        """The pending messages a load of `head` hands the workflow, as stored (values in S3 not read back)."""
        pending = [item for item in await self._query_pending(ref) if "m" in item]
        return self._inbox.live(ref, pending, [Side(consumed=list(head.chain_consumed), at=head.side.at)])[0]

    async def drop_messages(self, ref: ActorRef, message_ids: list[str], version: int) -> None:
        """Take pending messages out of the inbox for good (their tombstones, as a commit consuming them writes)."""
        await self._inbox.write_tombstones(ref, message_ids, version)

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

    async def _pending_texts(self, ref: ActorRef) -> list[str]:
        """The JSON of every pending inbox item (what the S3 sweep must not take from under it)."""
        return [item["m"]["S"] for item in await self._query_pending(ref) if "m" in item]

    async def _query_all(self, **kwargs: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while True:
            response = await self._call("Query", **kwargs)
            items += response.get("Items", [])
            if "LastEvaluatedKey" not in response:
                return items
            kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def _live_inbox(self, ref: ActorRef, pending: list[dict[str, Any]], chain: list[Side]) -> list[InboxMessage]:
        """Pending messages minus those the chain consumed (dormant.dynamodb.inbox polls with it)."""
        return self._inbox.live(ref, pending, chain)[0]

    # -- writing -------------------------------------------------------------------------------------
    def _first_commit(self, ref: ActorRef, meta: ActorMeta, state: dict[str, Any], workflow: WorkflowRecord,
                      events: list[tuple[str, Any]], incarnation: str,
                      search: dict[str, Any] | None = None) -> tuple[Head, dict[str, dict[str, Any]]]:
        """Version 1 as a head and its item, checked against the item limit."""
        side = Side(events=[[i + 1, name, payload, meta.created_at] for i, (name, payload) in enumerate(events)],
                    at=self._now(), listed=(listed_status(workflow.state).value, meta.created_at))
        full = {"meta": meta.model_dump(mode="json"), "state": dict(state),
                "workflow": workflow.model_dump(mode="json"), "history": {}, "seq": len(events),
                "search": search or {}, "since": meta.created_at}
        head = Head.from_snapshot(1, self.settings.snapshot_every, full, side, incarnation)
        item = commit_item(ref, head, {"f": full, **side.payload()}, snapshot=True, at=side.at)
        self.sizes.item(ref, "the first commit", item, head.full_parts() + side_parts_of(side))
        self.sizes.live(ref, head, side, None)
        return head, item

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
        keys = [item["sk"]["S"] for item in derived] + ([STATUS_SK] if side.listed else []) + search.sort_keys(head)
        found = await present(self._call, self.table, ref.id, keys, head.version) if probe and keys else set()
        derived = [item for item in derived if item["sk"]["S"] not in found]
        if derived:
            await put_all(self._call, self.table, derived)
        if side.listed is not None and STATUS_SK not in found:
            await self.status_items.put(ref, status=side.listed[0], since=side.listed[1], version=head.version,
                                        created_at=float(head.meta["created_at"]), incarnation=head.incarnation)
        searched = await search.settle(self, ref, head, found)  # its search items (dormant.dynamodb.search)
        await self.callback_items.write(ref, head)
        if probe and (derived or (side.listed and STATUS_SK not in found) or searched):
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
            # Classified by the error code, never by its message: servers word them differently.
            code = error.response.get("Error", {}).get("Code", "")
            message = error.response.get("Error", {}).get("Message", "")
            if code == "ConditionalCheckFailedException":
                raise ConditionFailed() from None
            if code == "ValidationException":
                raise StorageRefusedError(f"DynamoDB refused {operation} on {self.table} as invalid ({code}: "
                                          f"{message}); retrying cannot help. Dormant's checks should have refused "
                                          "this value before: please report it") from error
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
          "BatchGetItem": "batch_get_item", "DeleteItem": "delete_item", "UpdateItem": "update_item"}
