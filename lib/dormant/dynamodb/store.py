"""EventStore on DynamoDB (async, aiobotocore): one table, single-item conditional commits.

The composition: each capability is an object of its own over one `Table` (dormant.dynamodb.requests) — the commit
path (log), inbox items (messages) and the wait for them (inbox), responses and events (outputs), status and attention
items (listing), search items (search), flow-control slots (slots), callback lookup items (callbacks), deletion
(deletion), kept versions (versions) and the doctor (doctor) — and DynamoEventStore implements the port by delegation.
Every key is dormant.dynamodb.keys's. No TransactWriteItems anywhere. The layout, and why, is in docs/storage.md.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from collections.abc import Set as AbstractSet
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from dormant.core.callbacks import CallbackRecord
from dormant.core.clients import open_client
from dormant.core.records import (
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
    MatchCount,
    VersionInfo,
    WakeError,
)
from dormant.core.searchplan import SearchPlan
from dormant.core.slots import SlotLease, SlotRefusal, SlotRequest
from dormant.dynamodb.callbacks import CallbackItems
from dormant.dynamodb.deletion import Deletion
from dormant.dynamodb.doctor import Doctor
from dormant.dynamodb.inbox import InboxWaiter
from dormant.dynamodb.items import ITEM_LIMIT
from dormant.dynamodb.listing import AttentionItems, StatusItems
from dormant.dynamodb.log import CommitLog
from dormant.dynamodb.messages import InboxItems
from dormant.dynamodb.outputs import OutputItems
from dormant.dynamodb.requests import Table
from dormant.dynamodb.ring import HeadCache, Ring
from dormant.dynamodb.search import SearchItems
from dormant.dynamodb.settle import Settler
from dormant.dynamodb.sizes import SizeChecks
from dormant.dynamodb.slots import DynamoSlots
from dormant.dynamodb.table import PENDING_INDEX, TTL_ATTRIBUTE, client_config, create_table, table_definition
from dormant.dynamodb.versions import KeptVersions
from dormant.models import ValueCheck
from dormant.s3.blobs import S3Blobs
from dormant.s3.large_values import LargeValues
from dormant.settings import Settings
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import WorkflowRecord, WorkflowState

__all__ = ["ITEM_LIMIT", "PENDING_INDEX", "TTL_ATTRIBUTE", "DynamoEventStore",
           "client_config", "create_table", "table_definition"]


class DynamoEventStore:
    """EventStore on a DynamoDB-compatible table (AWS, moto server, dynalite, LocalStack, ...).

    Give it an aiobotocore DynamoDB client (whose lifecycle stays yours) or let `connect` make one from the
    settings:

        async with DynamoEventStore.connect(settings) as store:
            await store.create_table()   # tests and `dormant dev`; deployments create it from template.yaml

    `settle_on_load=False` (read-only users such as an API) skips checking, during loads, that the newest
    commit's responses/events were written; the actor's next commit still makes sure of it.
    """

    def __init__(self, client: Any, settings: Settings | None = None, *, settle_on_load: bool = True,
                 cache_size: int = 512, clock: Callable[[], float] = time.time, blobs: S3Blobs | None = None) -> None:
        """`blobs`: the bucket that takes values too big for the log (dormant.s3.large_values); None: none is."""
        self.client = client
        self.settings = settings if settings is not None else Settings()
        self.table = self.settings.table  # its name
        self.requests = Table(client, self.table)
        self.sizes = SizeChecks()  # dormant.dynamodb.sizes
        self.values = LargeValues(blobs, self.settings, clock=clock)
        self.ring = Ring(self.requests)
        self.heads = HeadCache(cache_size)
        self.messages = InboxItems(self.requests, clock=clock, dedupe_ttl_seconds=self.settings.dedupe_ttl_seconds)
        self.outputs = OutputItems(self.requests, self.settings, clock)
        self.status_items = StatusItems(self.requests)
        self.attention_items = AttentionItems(self.requests)
        self.search_items = SearchItems(self.requests)
        self.callback_items = CallbackItems(self.requests, self.settings)
        self.log = CommitLog(self.requests, self.settings, ring=self.ring, heads=self.heads, messages=self.messages,
                             settler=Settler(self.requests, self.outputs, self.status_items, self.search_items,
                                             self.callback_items),
                             sizes=self.sizes, values=self.values, clock=clock, settle_on_load=settle_on_load)
        self.inbox = InboxWaiter(self.messages, self.heads, self.values, self.log.load)
        self.slots = DynamoSlots(self.requests, clock)
        self.deletion = Deletion(self.requests, self.ring, self.heads, self.values, clock)
        self.versions = KeptVersions(self.ring, self.values)
        self.doctor = Doctor(self.ring, self.messages, self.values, clock)

    @classmethod
    @asynccontextmanager
    async def connect(cls, settings: Settings | None = None, *, session: Any = None,
                      **options: Any) -> AsyncIterator[DynamoEventStore]:
        """A store with its own client (endpoint, region and kind from the settings, dormant.core.clients),
        closed on exit; `session` as for `open_client`."""
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

    # -- the log (dormant.dynamodb.log) --------------------------------------------------------------------------
    async def create(self, ref: ActorRef, meta: ActorMeta, state: dict[str, Any], workflow: WorkflowRecord,
                     events: list[tuple[str, Any]], search: dict[str, list[Any]] | None = None) -> bool:
        return await self.log.create(ref, meta, state, workflow, events, search)

    async def exists(self, ref: ActorRef) -> bool:
        return await self.log.exists(ref)

    async def load(self, ref: ActorRef) -> ActorSnapshot | None:
        return await self.log.load(ref)

    async def commit(self, ref: ActorRef, expected_version: int, draft: CommitDraft) -> int:
        return await self.log.commit(ref, expected_version, draft)

    def check_message(self, ref: ActorRef, message: InboxMessage) -> None:
        self.log.check_message(ref, message)

    def check_creation(self, ref: ActorRef, meta: ActorMeta, state: dict[str, Any],
                       events: list[tuple[str, Any]]) -> None:
        self.log.check_creation(ref, meta, state, events)

    def check_commit(self, ref: ActorRef, version: int, draft: CommitDraft) -> None:
        self.log.check_commit(ref, version, draft)

    async def prepare_message(self, ref: ActorRef, message: InboxMessage) -> InboxMessage:
        return await self.values.prepare_message(ref, message)

    async def prepare_input(self, ref: ActorRef, value: Any) -> Any:
        return await self.values.prepare_input(ref, value)

    async def record_wake_error(self, ref: ActorRef, error: WakeError) -> None:
        if await self.log.exists(ref):
            await self.messages.write_wake_error(ref, error)

    async def delete(self, ref: ActorRef, *, at: float | None = None) -> bool:
        return await self.deletion.delete(ref, at)

    async def deleted_at(self, ref: ActorRef) -> float | None:
        return await self.deletion.deleted_at(ref)

    # -- the inbox (dormant.dynamodb.messages, dormant.dynamodb.inbox) ---------------------------------------------
    async def enqueue(self, ref: ActorRef, message: InboxMessage) -> bool:
        message = await self.values.prepare_message(ref, message)  # as sends do first (a no-op for them)
        item = self.messages.item(ref, message)
        self.sizes.message_item(ref, item, self.messages.parts(message))
        return await self.messages.put(ref, message.id, item)

    async def message_fingerprint(self, ref: ActorRef, message_id: str) -> str | None:
        return await self.messages.fingerprint(ref, message_id)

    async def wait_inbox(self, ref: ActorRef, known: AbstractSet[str], timeout: float) -> list[InboxMessage]:
        return await self.inbox.wait_inbox(ref, known, timeout)

    # -- responses and events (dormant.dynamodb.outputs) --------------------------------------------------------
    async def wait_response(self, ref: ActorRef, message_id: str, timeout: float) -> tuple[bool, Any]:
        found, response = await self.outputs.wait_response(ref, message_id, timeout)
        return found, await self.values.resolve(response)

    async def read_events(self, ref: ActorRef, after: int, limit: int) -> list[EventRecord]:
        return await self.values.resolve_events(await self.outputs.read_events(ref, after, limit))

    async def wait_events(self, ref: ActorRef, after: int, timeout: float) -> list[EventRecord]:
        return await self.values.resolve_events(await self.outputs.wait_events(ref, after, timeout))

    # -- listing, attention, search (dormant.dynamodb.listing, dormant.dynamodb.search) -------------------------
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

    async def search_actors(self, plan: SearchPlan, *, status: WorkflowState | None = None, limit: int = 100,
                            after: str | None = None) -> ActorPage:
        return await self.search_items.search(plan, status=status, limit=limit, after=after)

    async def count_matches(self, plan: SearchPlan, *, limit: int) -> MatchCount:
        return await self.search_items.count(plan, limit=limit)

    # -- flow-control slots (dormant.dynamodb.slots) ------------------------------------------------------------
    async def acquire_slot(self, request: SlotRequest) -> SlotLease | SlotRefusal:
        return await self.slots.acquire_slot(request)

    async def renew_slot(self, lease: SlotLease, until: float) -> bool:
        return await self.slots.renew_slot(lease, until)

    async def release_slot(self, lease: SlotLease, now: float) -> list[ActorRef]:
        return await self.slots.release_slot(lease, now)

    # -- callbacks, kept versions, values (dormant.dynamodb.callbacks, .versions, .doctor) ----------------------
    async def read_callback(self, token_hash: str) -> CallbackRecord | None:
        return await self.callback_items.read(token_hash)

    async def heartbeat_callback(self, token_hash: str, heartbeat_deadline: float, now: float) -> bool:
        return await self.callback_items.heartbeat(token_hash, heartbeat_deadline, now)

    async def retained_versions(self, ref: ActorRef) -> list[VersionInfo] | None:
        return await self.versions.retained_versions(ref)

    async def load_version(self, ref: ActorRef, version: int) -> ActorSnapshot | None:
        return await self.versions.load_version(ref, version)

    async def check_values(self, ref: ActorRef, *, repair: bool = False) -> ValueCheck | None:
        return await self.doctor.check_values(ref, repair=repair)
