"""In-process event store and transport: tests, offline replay and embedded development.

The store keeps JSON (what a real store would hold), never live objects, and can be told to fail
its Nth call, before or after applying it, to prove crash safety. It follows the rules every store follows as
dormant.core writes them: message de-duplication (core.dedupe), callback record changes (core.callbacks), listing
cursors (core.cursors), search plans (core.searchplan).

Its clock is the runtime's: every write the runtime makes carries its clock's reading (a commit's `committed_at`, a
message's `created_at`, a deletion's `at`), and the store's time is the latest of them, unless a `clock` is given. So
under TestEnv's virtual clock a dedupe window ends when the test moves the clock past it.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from dormant.core import limits
from dormant.core.callbacks import CallbackRecord, callback_record, heartbeat_allowed, may_replace
from dormant.core.cursors import check_attention_cursor, check_cursor, listing_key, page_of
from dormant.core.dedupe import DEDUPE_WINDOW, dedupe_until, is_duplicate
from dormant.core.limits import check_draft, check_values
from dormant.core.records import (
    ActorCount,
    ActorMeta,
    ActorPage,
    ActorRef,
    ActorSnapshot,
    ActorSummary,
    AttentionMark,
    AttentionPage,
    AttentionReason,
    EventRecord,
    InboxMessage,
    MatchCount,
    VersionInfo,
    WakeError,
    listed_after,
    listed_status,
)
from dormant.core.search import apply_changes, plain
from dormant.core.searchplan import SearchPlan, select
from dormant.errors import StorageError, VersionConflict
from dormant.memory.history import CompactHistory
from dormant.memory.slots import MemorySlots
from dormant.models import ValueCheck
from dormant.runtime.versions import VersionRing, describe, pick, snapshot_of
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import StoredHistory, WorkflowRecord, WorkflowState

RECENTLY_CONSUMED = 256  # one validation call per load, not one per entry
_STATE_OF = {state.value: state for state in WorkflowState}  # (a dict, not the enum's call by value, per commit)


class InjectedFault(StorageError):
    """A failure the test asked for (see MemoryEventStore.fail_call)."""


@dataclass(slots=True)
class _Seen:
    """A message id the actor's inbox stored: its fingerprint, and until when it is a duplicate (None: pending)."""

    fingerprint: str | None  # None: consumed without being stored here first (no request to compare with)
    until: float | None = None


@dataclass
class _Actor:
    version: int
    meta: dict[str, Any]
    state: dict[str, Any]
    workflow: dict[str, Any]
    history: CompactHistory
    inbox: dict[str, dict[str, Any]]  # insertion order = send order
    seen_ids: dict[str, _Seen] = field(default_factory=dict)  # message ids stored and still duplicates (or were)
    # What a load reports held beside the inbox: bounded, as DynamoDB's (its consumed, not yet tombstoned ones),
    # so a load's cost does not grow with the actor's age.
    recently_consumed: deque[str] = field(default_factory=lambda: deque(maxlen=RECENTLY_CONSUMED))
    responses: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    wake_error: dict[str, Any] | None = None
    summary: dict[str, Any] | None = None  # the listing entry: rewritten only when the listed status changes
    attention: dict[str, Any] | None = None  # its attention mark (AttentionMark's JSON), if any
    search: dict[str, list[Any]] = field(default_factory=dict)  # its search attributes: name -> [type code, value]
    search_version: int = 1  # the version that last changed its attributes or listed status (what a search shows)
    kept: VersionRing | None = None  # the versions a fork or reset can start from (dormant.runtime.versions)
    # (id, when) of the messages consumed since the last snapshot commit but one: held until a snapshot commit starts
    # their window (dormant.core.dedupe, as DynamoDB's tombstones)
    unwindowed: list[tuple[str, float]] = field(default_factory=list)

    def full(self) -> dict[str, Any]:
        """A kept snapshot (dormant.runtime.versions): entries are replaced on upsert, never changed, so shallow; the
        history as its entries alone, as kept (each is stored under its own location): a list, a fifth of a dict."""
        return {"meta": self.meta, "state": self.state, "workflow": self.workflow,
                "history": self.history.rows(), "search": dict(self.search)}


@dataclass
class CommitLogEntry:
    ref: ActorRef
    version: int
    draft: CommitDraft


class MemoryEventStore:
    """EventStore in memory, with fault injection and a log of every commit."""

    slots_answer_at_once: ClassVar[bool] = True
    """Its `acquire_slot_now` and `release_slot_now` answer the slot calls without a coroutine (dormant.runtime.slots
    looks for this on the store's type, so a wrapper that forwards attributes is never bypassed)."""

    def __init__(self, *, keep_commit_log: bool = True, snapshot_every: int = 16,
                 dedupe_ttl_seconds: float = DEDUPE_WINDOW, clock: Callable[[], float] | None = None) -> None:
        """`keep_commit_log` records every commit (crash-safety tests read it); long runs can turn it off.
        `snapshot_every`: the versions kept per actor, as the DynamoDB store's setting (dormant.runtime.versions).
        `dedupe_ttl_seconds`: the dedupe window (dormant.core.dedupe), as `Settings.dedupe_ttl_seconds`. `clock`: the
        store's (None: the latest time the runtime's writes carried; see the module docstring)."""
        self._keep_commit_log = keep_commit_log
        self._snapshot_every = snapshot_every
        self._dedupe_window = float(dedupe_ttl_seconds)
        self._clock = clock
        self._latest = 0.0  # the latest time a write carried
        self._checked: CommitDraft | None = None  # the last draft check_commit passed
        self._actors: dict[str, _Actor] = {}
        self._early: dict[str, _Actor] = {}  # inboxes of actors that do not exist yet
        self._deleted_at: dict[str, float] = {}  # when each actor was last deleted (it outlives the actor)
        self.callbacks: dict[str, dict[str, Any]] = {}  # callback lookup records by token hash (outlive actors)
        self._changed = asyncio.Condition()
        self._waiting = 0  # callers inside _wait_until
        self.calls = 0
        self.commit_log: list[CommitLogEntry] = []
        self._fail_at: dict[int, Literal["before", "after"]] = {}
        self.on_call: Callable[[int, str], None] | None = None
        self.slots = MemorySlots(self._enter, self._leave)  # the flow-control limits' items (memory.slots)
        self.acquire_slot, self.renew_slot, self.release_slot = self.slots.acquire, self.slots.renew, self.slots.release
        # The slot calls answered at once (see `slots_answer_at_once`)
        self.acquire_slot_now, self.release_slot_now = self.slots.acquire_now, self.slots.release_now

    # -- fault injection -----------------------------------------------------------------------
    def fail_call(self, number: int, when: Literal["before", "after"] = "before") -> None:
        """Make call number `number` (1-based, counted from now on) raise InjectedFault:
        "before" changes nothing, "after" applies the call and then fails (a lost reply)."""
        self._fail_at[self.calls + number] = when

    def pending_faults(self) -> int:
        return len(self._fail_at)

    def clear_faults(self) -> None:
        """Drop faults that have not fired yet."""
        self._fail_at.clear()

    def _enter(self, operation: str) -> Literal["before", "after"] | None:
        self.calls += 1
        if self.on_call is not None:
            self.on_call(self.calls, operation)
        if not self._fail_at:  # no fault armed: a count and nothing more
            return None
        when = self._fail_at.pop(self.calls, None)
        if when == "before":
            raise InjectedFault(f"injected failure before {operation} (call {self.calls})")
        return when

    def _leave(self, when: Literal["before", "after"] | None, operation: str) -> None:
        if when == "after":
            raise InjectedFault(f"injected failure after {operation} (call {self.calls})")

    async def _notify(self) -> None:
        if not self._waiting:  # nobody waits: skip the condition's lock (a commit per step adds up)
            return
        async with self._changed:
            self._changed.notify_all()

    async def _wait_until(self, ready: Callable[[], bool], timeout: float) -> bool:
        """Wait (at most `timeout` seconds) until `ready()`; False on timeout."""
        self._waiting += 1
        try:
            async with self._changed:
                await asyncio.wait_for(self._changed.wait_for(ready), timeout)
        except TimeoutError:
            return False
        finally:
            self._waiting -= 1
        return True

    def _now(self, carried: float | None = None) -> float:
        """The store's time, after a write that carried `carried` (the runtime's clock then)."""
        if carried is not None and carried > self._latest:
            self._latest = carried
        return self._clock() if self._clock is not None else self._latest

    # -- EventStore ----------------------------------------------------------------------------
    async def create(self, ref: ActorRef, meta: ActorMeta, state: dict[str, Any], workflow: WorkflowRecord,
                     events: list[tuple[str, Any]], search: dict[str, list[Any]] | None = None) -> bool:
        when = self._enter("create")
        self._now(meta.created_at)
        if ref.id in self._actors:
            self._leave(when, "create")
            return False
        early = self._early.pop(ref.id, None)
        record = _Actor(version=1, meta=meta.model_dump(mode="json"), state=dict(state),
                        workflow=workflow.model_dump(mode="json"), history=CompactHistory(),
                        inbox=early.inbox if early else {}, seen_ids=early.seen_ids if early else {},
                        search=apply_changes({}, search or {}))
        self._append_events(record, events, meta.created_at)
        record.kept = VersionRing(self._snapshot_every, record.full(), meta.created_at)
        record.summary = ActorSummary(name=ref.name, key=ref.key, status=listed_status(workflow.state),
                                      since=meta.created_at, version=1,
                                      created_at=meta.created_at).model_dump(mode="json")
        self._actors[ref.id] = record
        await self._notify()
        self._leave(when, "create")
        return True

    async def exists(self, ref: ActorRef) -> bool:
        when = self._enter("exists")
        found = ref.id in self._actors
        self._leave(when, "exists")
        return found

    async def load(self, ref: ActorRef) -> ActorSnapshot | None:
        when = self._enter("load")
        record = self._actors.get(ref.id)
        self._leave(when, "load")
        if record is None:
            return None
        snapshot = ActorSnapshot(
            ref=ref, version=record.version, meta=ActorMeta.model_validate(record.meta), state=dict(record.state),
            workflow=WorkflowRecord.model_validate(record.workflow), history=[],
            inbox=[InboxMessage.model_validate(m) for m in record.inbox.values()],
            wake_error=WakeError.model_validate(record.wake_error) if record.wake_error else None,
            held_ids={*record.inbox, *record.recently_consumed}, search=apply_changes(record.search, {}))
        # No model per entry: a wake-up builds its working records from the JSON (dormant.workflow.entries)
        snapshot.history = StoredHistory(record.history.rows())
        return snapshot

    async def commit(self, ref: ActorRef, expected_version: int, draft: CommitDraft) -> int:
        when = self._enter("commit")
        consumed_at = self._now(draft.committed_at)
        record = self._actors.get(ref.id)
        if record is None or record.version != expected_version:
            raise VersionConflict(f"{ref}: expected version {expected_version}, "
                                  f"found {record.version if record else 'no actor'}")
        if draft is not self._checked:  # (the runtime checks every draft first: not twice)
            self.check_commit(ref, expected_version, draft)
        history = record.history  # (a commit's changes in one call each, not one per entry)
        for prefix in draft.deleted_prefixes:
            history.delete_prefix(prefix)
        history.upsert(draft.upserts)
        if draft.state is not None:
            record.state = dict(draft.state)
        if draft.workflow is not None:
            record.workflow = draft.workflow.model_dump(mode="json")
        for message_id in draft.consumed_ids:  # held (until None) until a snapshot commit starts their window
            record.inbox.pop(message_id, None)
            seen = record.seen_ids.get(message_id)
            if seen is None:
                record.seen_ids[message_id] = _Seen(None)  # (its window starts with a snapshot commit)
            else:
                seen.until = None
            record.recently_consumed.append(message_id)
        if draft.responses:
            record.responses.update(draft.responses)
        if draft.events:
            self._append_events(record, draft.events, draft.committed_at)
        record.version += 1
        if draft.search and apply_changes(record.search, draft.search) != record.search:
            record.search, record.search_version = apply_changes(record.search, draft.search), record.version
        snapshot = record.kept is None or record.kept.add(
            record.version, draft, record.workflow if draft.workflow is not None else None, record.full)
        if snapshot:
            self._start_windows(record, [(message_id, consumed_at) for message_id in draft.consumed_ids])
        elif draft.consumed_ids:  # (their windows wait for a snapshot commit: _start_windows)
            record.unwindowed += [(message_id, consumed_at) for message_id in draft.consumed_ids]
        for change in draft.callbacks:  # the allowed changes of a record: dormant.core.callbacks
            known = self.callbacks.get(change.token_hash)
            if may_replace(known["state"] if known is not None else None, change.state):
                self.callbacks[change.token_hash] = callback_record(
                    ref, float(record.meta["created_at"]), record.version, change).model_dump()
        if draft.workflow is not None and record.summary is not None:
            listed = listed_after(_STATE_OF[record.summary["status"]], draft.workflow.state)
            if listed.value != record.summary["status"]:
                record.summary = {**record.summary, "status": listed.value, "since": draft.committed_at,
                                  "version": record.version}
                record.search_version = record.version
        if self._keep_commit_log:
            self.commit_log.append(CommitLogEntry(ref, record.version, draft))
        if self._waiting:
            await self._notify()
        self._leave(when, "commit")
        return record.version

    def _start_windows(self, record: _Actor, consumed: list[tuple[str, float]]) -> None:
        """The dedupe rule (dormant.core.dedupe): a snapshot commit starts the window of the ids consumed before it
        since the last one, from their consumption (DynamoDB writes their tombstones then); its own (`consumed`) wait
        for the next."""
        for message_id, at in record.unwindowed:
            seen = record.seen_ids.get(message_id)
            if seen is not None and seen.until is None:
                seen.until = dedupe_until(at, self._dedupe_window)
        record.unwindowed = consumed

    # The checks before any write (EventStore): memory has no item limit, but it refuses what the DynamoDB store
    # refuses wherever it runs, a value over the per-value ceiling (dormant.core.limits.VALUE), so a test in TestEnv
    # fails where production would. Keys, message ids and a message's size in its wake-up are the runtime's.
    def check_message(self, ref: ActorRef, message: InboxMessage) -> None:
        check_values(ref.name, [("the message body", message.body), ("the action's arguments", message.args)])

    def check_creation(self, ref: ActorRef, meta: ActorMeta, state: dict[str, Any],
                       events: list[tuple[str, Any]]) -> None:
        check_values(ref.name, [("the actor's input", meta.input), ("the state", state),
                           *((f"the payload of event {name!r}", payload) for name, payload in events)])

    def check_commit(self, ref: ActorRef, version: int, draft: CommitDraft) -> None:
        check_draft(ref.name, draft)
        self._checked = draft

    @classmethod
    def commit_value_ceiling(cls) -> int | None:
        """The most JSON bytes each value of a draft may take for `check_commit` to pass it whatever else the draft
        holds (dormant.workflow.host.WorkflowHost's `value_ceiling`): the per-value ceiling, all it checks; None for a
        subclass that checks drafts its own way."""
        return limits.VALUE.maximum if cls.check_commit is MemoryEventStore.check_commit else None

    async def prepare_message(self, ref: ActorRef, message: InboxMessage) -> InboxMessage:
        return message  # memory keeps values of any size as they are

    async def prepare_input(self, ref: ActorRef, value: Any) -> Any:
        return value

    async def enqueue(self, ref: ActorRef, message: InboxMessage) -> bool:
        when = self._enter("enqueue")
        now = self._now(message.created_at)
        record = self._actors.get(ref.id)
        if record is None:  # messages are kept even before the actor exists
            record = self._early.setdefault(ref.id, _Actor(version=0, meta={}, state={}, workflow={},
                                                             history=CompactHistory(), inbox={}))
        seen = record.seen_ids.get(message.id)
        if seen is not None and is_duplicate(seen.until, now):
            self._leave(when, "enqueue")
            return False
        record.seen_ids[message.id] = _Seen(message.fingerprint())
        record.inbox[message.id] = message.model_dump(mode="json")
        await self._notify()  # a running wake-up may be waiting for it (wait_inbox)
        self._leave(when, "enqueue")
        return True

    async def message_fingerprint(self, ref: ActorRef, message_id: str) -> str | None:
        when = self._enter("message_fingerprint")
        record = self._actors.get(ref.id) or self._early.get(ref.id)
        seen = record.seen_ids.get(message_id) if record is not None else None
        self._leave(when, "message_fingerprint")
        return seen.fingerprint if seen is not None and is_duplicate(seen.until, self._now()) else None

    async def wait_response(self, ref: ActorRef, message_id: str, timeout: float) -> tuple[bool, Any]:
        def ready() -> bool:
            record = self._actors.get(ref.id)
            return record is not None and message_id in record.responses

        if not ready() and not await self._wait_until(ready, timeout):  # (a zero timeout still looks once)
            return False, None
        return True, self._actors[ref.id].responses[message_id]

    async def wait_inbox(self, ref: ActorRef, known: AbstractSet[str], timeout: float) -> list[InboxMessage]:
        def fresh() -> list[dict[str, Any]]:
            record = self._actors.get(ref.id)
            if record is None:
                return []
            return [m for mid, m in record.inbox.items() if mid not in known]

        if not fresh() and not await self._wait_until(lambda: bool(fresh()), timeout):
            return []
        return [InboxMessage.model_validate(m) for m in fresh()]

    async def read_events(self, ref: ActorRef, after: int, limit: int) -> list[EventRecord]:
        record = self._actors.get(ref.id)
        if record is None:
            return []
        return [EventRecord.model_validate(e) for e in record.events if e["seq"] > after][:limit]

    async def wait_events(self, ref: ActorRef, after: int, timeout: float) -> list[EventRecord]:
        def ready() -> bool:
            record = self._actors.get(ref.id)
            return record is not None and bool(record.events) and record.events[-1]["seq"] > after

        if not ready() and not await self._wait_until(ready, timeout):
            return []
        return await self.read_events(ref, after, 1000)

    async def record_wake_error(self, ref: ActorRef, error: WakeError) -> None:
        when = self._enter("record_wake_error")
        record = self._actors.get(ref.id)
        if record is not None:
            record.wake_error = error.model_dump(mode="json")
        self._leave(when, "record_wake_error")

    async def read_summary(self, ref: ActorRef) -> ActorSummary | None:
        when = self._enter("read_summary")
        record = self._actors.get(ref.id)
        self._leave(when, "read_summary")
        return ActorSummary.model_validate(record.summary) if record is not None and record.summary else None

    async def list_actors(self, actor_type: str, *, status: WorkflowState | None = None, limit: int = 100,
                          after: str | None = None) -> ActorPage:
        if after is not None:
            check_cursor(actor_type, status, after)
        when = self._enter("list_actors")
        listed: list[tuple[str, ActorSummary]] = []
        for record in self._actors.values():
            if record.summary is None or record.summary["name"] != actor_type:
                continue
            summary = ActorSummary.model_validate(record.summary)
            place = listing_key(summary.status, ActorRef(name=summary.name, key=summary.key))
            if (status is None or summary.status is status) and (after is None or place > after):
                listed.append((place, summary))
        self._leave(when, "list_actors")
        page, cursor = page_of(listed, limit)
        return ActorPage(actors=page, cursor=cursor)

    async def count_actors(self, actor_type: str, status: WorkflowState, *, limit: int) -> ActorCount:
        when = self._enter("count_actors")
        found = sum(1 for record in self._actors.values() if record.summary is not None
                    and record.summary["name"] == actor_type and record.summary["status"] == status.value)
        self._leave(when, "count_actors")
        return ActorCount(count=min(found, max(0, limit)), exact=found <= limit)

    async def search_actors(self, plan: SearchPlan, *, status: WorkflowState | None = None, limit: int = 100,
                            after: str | None = None) -> ActorPage:
        when = self._enter("search_actors")
        rows = [(actor_id, r.search, {**r.summary, "version": r.search_version, "attributes": plain(r.search)})
                for actor_id, r in self._actors.items() if r.summary and r.summary["name"] == plan.actor_type
                and (status is None or r.summary["status"] == status.value)]
        found, cursor = select(plan, rows, limit, after)
        self._leave(when, "search_actors")
        return ActorPage(actors=[ActorSummary.model_validate(row) for row in found], cursor=cursor)

    async def count_matches(self, plan: SearchPlan, *, limit: int) -> MatchCount:
        page = await self.search_actors(plan, limit=limit)  # the first `limit` matches, as DynamoDB counts them
        return MatchCount(counts=dict(Counter(s.status.value for s in page.actors)), exact=page.cursor is None)

    async def mark_attention(self, ref: ActorRef, reason: AttentionReason, since: float) -> None:
        when = self._enter("mark_attention")
        record = self._actors.get(ref.id)
        if record is not None:
            record.attention = AttentionMark(name=ref.name, key=ref.key, reason=reason,
                                             since=since).model_dump(mode="json")
        self._leave(when, "mark_attention")

    async def clear_attention(self, ref: ActorRef, since: float | None = None) -> None:
        when = self._enter("clear_attention")
        record = self._actors.get(ref.id)
        if record is not None and record.attention is not None and (since is None
                                                                   or record.attention["since"] == since):
            record.attention = None
        self._leave(when, "clear_attention")

    async def list_attention(self, actor_type: str, *, limit: int = 100, after: str | None = None) -> AttentionPage:
        if after is not None:
            check_attention_cursor(actor_type, after)
        when = self._enter("list_attention")
        marked = [(actor_id, AttentionMark.model_validate(record.attention))
                  for actor_id, record in self._actors.items()
                  if record.attention is not None and record.attention["name"] == actor_type
                  and (after is None or actor_id > after)]
        self._leave(when, "list_attention")
        page, cursor = page_of(marked, limit)
        return AttentionPage(marks=page, cursor=cursor)

    async def read_callback(self, token_hash: str) -> CallbackRecord | None:
        when = self._enter("read_callback")
        found = self.callbacks.get(token_hash)
        self._leave(when, "read_callback")
        return CallbackRecord.model_validate(found) if found is not None else None

    async def heartbeat_callback(self, token_hash: str, heartbeat_deadline: float, now: float) -> bool:
        when = self._enter("heartbeat_callback")
        found = self.callbacks.get(token_hash) or {}
        moved = bool(found) and heartbeat_allowed(found["state"], found.get("heartbeat_deadline"), now)
        if moved:
            found["heartbeat_deadline"] = max(found["heartbeat_deadline"], heartbeat_deadline)
        self._leave(when, "heartbeat_callback")
        return moved

    async def delete(self, ref: ActorRef, *, at: float | None = None) -> bool:
        when = self._enter("delete")
        self._now(at)
        existed = self._actors.pop(ref.id, None) is not None
        self._early.pop(ref.id, None)
        if at is not None:
            self._deleted_at[ref.id] = max(at, self._deleted_at.get(ref.id, at))
        await self._notify()
        self._leave(when, "delete")
        return existed

    async def deleted_at(self, ref: ActorRef) -> float | None:
        return self._deleted_at.get(ref.id)

    async def retained_versions(self, ref: ActorRef) -> list[VersionInfo] | None:
        record = self._actors.get(ref.id)
        return describe(record.kept.versions()) if record is not None and record.kept is not None else None

    async def load_version(self, ref: ActorRef, version: int) -> ActorSnapshot | None:
        record = self._actors.get(ref.id)
        if record is None or record.kept is None:
            return None
        return snapshot_of(ref, pick(record.kept.versions(), version))

    async def check_values(self, ref: ActorRef, *, repair: bool = False) -> ValueCheck | None:
        record = self._actors.get(ref.id)
        if record is None:
            return None
        kept = [info.version for info in describe(record.kept.versions())] if record.kept is not None else []
        return ValueCheck(actor=ref.name, key=list(ref.key), outcome="intact", references=0, intact_versions=kept,
                          message="this store keeps every value in memory, with the actor: nothing can be missing")

    # -- helpers for tests and tools -------------------------------------------------------------
    def actor_ids(self) -> list[str]:
        return list(self._actors)

    def ref_of(self, actor_id: str) -> ActorRef:
        """The ref of a stored actor, by its storage id."""
        meta = self._actors[actor_id].meta
        return ActorRef(name=meta["name"], key=tuple(meta["key"]))

    def latest_time(self) -> float:
        """The latest time the stored actors record (their creation, their history entries' updates): where a clock
        of a new deploy over this store starts at the earliest."""
        latest = 0.0
        for record in self._actors.values():
            latest = max(latest, float(record.meta.get("created_at", 0.0)))
            for entry in record.history.values():
                latest = max(latest, float(entry.get("updated_at", 0.0)))
        return latest

    def responses(self, ref: ActorRef) -> dict[str, Any]:
        return dict(self._actors[ref.id].responses)

    def inbox_ids(self, ref: ActorRef) -> list[str]:
        return list(self._actors[ref.id].inbox)

    @staticmethod
    def _append_events(record: _Actor, events: list[tuple[str, Any]], at: float) -> None:
        for name, payload in events:
            seq = (record.events[-1]["seq"] if record.events else 0) + 1
            record.events.append({"seq": seq, "name": name, "payload": payload, "at": at})
