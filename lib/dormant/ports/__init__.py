"""What the runtime needs from the outside world: an event store, a transport and a clock.

Backends (memory, AWS) implement these Protocols; the runtime and the engine know nothing else.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dormant.core.limits import ACTOR_ID, CARRIED_MESSAGE, KEY_PART, check_actor_id
from dormant.core.searchplan import SearchPlan
from dormant.core.slots import SlotLease, SlotRefusal, SlotRequest
from dormant.errors import InvalidKeyError
from dormant.models import ValueCheck
from dormant.workflow.caller import Caller
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import HistoryEntry, WorkflowRecord, WorkflowState
from dormant.workflow.values import RESERVED_KEY, content_identity

if TYPE_CHECKING:  # (callback_records imports ActorRef from here)
    from dormant.core.callbacks import CallbackRecord

MAX_KEY_PART = KEY_PART.maximum
MAX_CARRIED_BYTES = CARRIED_MESSAGE.maximum
"""Largest message (its JSON, plus the actor's input when the send creates the actor) a wake-up carries:
one SQS message is 256 KiB; the rest is the wake-up's envelope (actor, key: under 16 KiB)."""
MAX_ID_BYTES = ACTOR_ID.maximum  # the `status` index's sort key holds it (dormant.core.limits)


class ActorRef(BaseModel):
    """Identity of one actor: its type name and its key (a list of strings)."""

    model_config = ConfigDict(frozen=True)

    name: str
    key: tuple[str, ...]

    @field_validator("key")
    @classmethod
    def _check_key(cls, key: tuple[str, ...]) -> tuple[str, ...]:
        if not key:
            raise InvalidKeyError("an actor key needs at least one part")
        for index, part in enumerate(key):
            if not isinstance(part, str) or not part or len(part) > MAX_KEY_PART:
                raise InvalidKeyError(f"actor key parts must be non-empty strings of at most {MAX_KEY_PART} "
                                      f"characters (part {index + 1} is not)")
            try:
                part.encode("utf-8")
            except UnicodeEncodeError:
                raise InvalidKeyError(f"actor key part {index + 1} contains a lone surrogate (U+D800-U+DFFF), "
                                      "which is not valid UTF-8") from None
        return key

    @model_validator(mode="after")
    def _check_id_size(self) -> ActorRef:
        check_actor_id(self.id)
        return self

    @functools.cached_property
    def id(self) -> str:
        """Stable storage id: percent-encoded name and key parts joined by '/' (computed once: hot path)."""
        return "/".join([quote(self.name, safe="")] + [quote(p, safe="") for p in self.key])

    def __str__(self) -> str:
        return f"{self.name}{list(self.key)}"


class InboxMessage(BaseModel):
    """A message persisted in an actor's inbox: a queue message or a scheduled action."""

    id: str
    queue: str
    body: Any = None
    created_at: float
    kind: Literal["queue", "action", "callback"] = "queue"
    args: list[Any] = Field(default_factory=list)
    not_before: float | None = None
    sender: Caller | None = None
    """Who sent it (the workflow sees it as `message.sender`); None for messages stored before senders were."""

    def fingerprint(self) -> str:
        """What makes two sends with one id the same request: kind, queue, body and arguments (not the times, nor
        which S3 objects hold its large values: each stored message has objects of its own, named by content)."""
        canonical = json.dumps([self.kind, self.queue, self.body, self.args], sort_keys=True, separators=(",", ":"),
                               ensure_ascii=False)
        if RESERVED_KEY in canonical:
            canonical = json.dumps([self.kind, self.queue, content_identity(self.body), content_identity(self.args)],
                                   sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]


class Creation(BaseModel):
    """A wake-up that may find its actor missing carries how to create it (the request's actor input)."""

    input: Any = None
    caller: Caller | None = None
    """Who asked for the creation (on_create's `c.caller`)."""
    requested_at: float | None = None
    """When it was asked for, on the runtime's clock: a deletion after that wins over it (None: wake-ups sent
    before this field was: judged by their message's time, or not at all)."""


class EventRecord(BaseModel):
    seq: int
    name: str
    payload: Any
    at: float


class ActorMeta(BaseModel):
    name: str
    key: tuple[str, ...]
    created_at: float
    input: Any = None


class WakeError(BaseModel):
    """The last failed wake-up of an actor (e.g. a poison message on its way to the DLQ)."""

    message: str
    at: float
    receive_count: int = 1
    version: int | None = None  # the actor's version after the failure; a later commit makes it stale
    failures: int = 0  # wake-ups failed by the actor's own errors (not the infrastructure's) since that version


class ActorSnapshot(BaseModel):
    """Everything a wake-up reads: one consistent version of the actor."""

    ref: ActorRef
    version: int
    meta: ActorMeta
    state: dict[str, Any]
    workflow: WorkflowRecord
    history: list[HistoryEntry]
    inbox: list[InboxMessage]
    wake_error: WakeError | None = None
    search: dict[str, list[Any]] = Field(default_factory=dict)
    """Its search attributes as stored: name -> [type code, JSON value] (dormant.core.search)."""
    held_ids: set[str] = Field(default_factory=set)
    """Ids of every message the load saw stored (the inbox, and consumed ones not yet forgotten): a carried
    message whose id is here needs no storing."""


def listed_status(state: WorkflowState) -> WorkflowState:
    """The status an actor is listed under: its workflow state, except that `running` (stored only by the
    commits in the middle of a wake-up) is listed as `sleeping`. So a wake-up that commits several times
    changes the listing at most once, and a busy actor's commits never rewrite it."""
    return WorkflowState.SLEEPING if state is WorkflowState.RUNNING else state


LISTED_STATUSES = tuple(state for state in WorkflowState if state is not WorkflowState.RUNNING)
FINISHED = (WorkflowState.COMPLETED, WorkflowState.TERMINATED)  # ended workflows: they take no more messages


class ActorSummary(BaseModel):
    """One actor in a listing: what the store keeps per actor for listing it (docs/storage.md)."""

    name: str
    key: tuple[str, ...]
    status: WorkflowState
    since: float = Field(description="When the actor entered this status (epoch seconds)")
    version: int = Field(description="The actor's version that entered it (in a search: the version that wrote the "
                                     "attributes and status found)")
    created_at: float
    attributes: dict[str, Any] | None = Field(None, description="Its search attributes, in a search's results "
                                                                  "(null in a plain listing)")


class ActorPage(BaseModel):
    actors: list[ActorSummary]
    cursor: str | None = Field(None, description="Pass back to get the next page; null: this was the last")


class MatchCount(BaseModel):
    """How many actors of a type match a search, per listed status, counted up to a limit in all."""

    counts: dict[str, int] = Field(description="Per listed status (statuses without matches are left out)")
    exact: bool = Field(description="False when counting stopped at the limit (there are more)")


class VersionInfo(BaseModel):
    """One version of an actor that its store still keeps: a fork or a reset can start from it."""

    version: int
    committed_at: float = Field(description="When its commit was stored (epoch seconds)")
    status: WorkflowState = Field(description="The workflow's state at this version")
    entries: int = Field(description="Live history entries at this version")
    changed: list[str] | None = Field(None, description="Locations its commit wrote or removed (at most 20; null "
                                                        "for the oldest kept version, whose commit is not kept)")
    more_changed: int = Field(0, description="How many more locations it changed than `changed` lists")
    received: list[str] | None = Field(None, description="Ids of the messages its commit recorded as received "
                                                         "(null for the oldest kept version)")
    consumed: int = Field(description="Inbox messages its commit consumed (received, run or discarded)")


class ActorCount(BaseModel):
    """How many actors of a type are listed in one status, counted up to a limit."""

    count: int = Field(description="Actors counted (at most the limit asked for)")
    exact: bool = Field(description="False when there are more than `count` (counting stopped at the limit)")


AttentionReason = Literal["retry", "wake_error"]


class AttentionMark(BaseModel):
    """An actor that may need an operator although its listed status is a live one (`sleeping`): a step of it waits
    for a retry (`retry`), or its last wake-up failed (`wake_error`). Marks are advisory: written after the commit
    or the failure they follow, they may be stale, so readers confirm them on the actor's status
    (dormant.runtime.attention)."""

    name: str
    key: tuple[str, ...]
    reason: AttentionReason
    since: float = Field(description="When it was marked (epoch seconds)")


class AttentionPage(BaseModel):
    marks: list[AttentionMark]
    cursor: str | None = Field(None, description="Pass back to get the next page; null: this was the last")


class EventStore(Protocol):
    """Durable per-actor storage. Every `commit` is atomic and conditional on `expected_version`."""

    async def create(self, ref: ActorRef, meta: ActorMeta, state: dict[str, Any], workflow: WorkflowRecord,
                     events: list[tuple[str, Any]], search: dict[str, list[Any]] | None = None) -> bool:
        """Create the actor at version 1 (with the search attributes its on_create set); False (and no change) if it
        exists already."""
        ...

    async def exists(self, ref: ActorRef) -> bool: ...

    async def load(self, ref: ActorRef) -> ActorSnapshot | None: ...

    async def commit(self, ref: ActorRef, expected_version: int, draft: CommitDraft) -> int:
        """Store a commit; returns the new version. Raises VersionConflict if the version moved."""
        ...

    async def enqueue(self, ref: ActorRef, message: InboxMessage) -> bool:
        """Persist a message idempotently by id; False when this id was seen before."""
        ...

    # The checks every request path makes before its first write (no I/O; dormant.core.limits): a value the store
    # cannot hold is refused up front with ItemTooLargeError naming the limit, and nothing is stored or sent.
    def check_message(self, ref: ActorRef, message: InboxMessage) -> None:
        """Raise if `enqueue(ref, message)` could not store the message."""
        ...

    def check_creation(self, ref: ActorRef, meta: ActorMeta, state: dict[str, Any],
                       events: list[tuple[str, Any]]) -> None:
        """Raise if `create` could not store this actor's first version."""
        ...

    def check_commit(self, ref: ActorRef, version: int, draft: CommitDraft) -> None:
        """Raise if a commit of `draft` on `version` could not be stored. A store that has not read `version`
        may let it pass: `commit` checks again before it writes, and raises the same error then."""
        ...

    async def prepare_message(self, ref: ActorRef, message: InboxMessage) -> InboxMessage:
        """The message as this store keeps it and its wake-up carries it: values too big for an item written
        elsewhere first (the DynamoDB store's S3 bucket), references in their place. Call after check_message."""
        ...

    async def prepare_input(self, ref: ActorRef, value: Any) -> Any:
        """An actor's input as this store keeps it and a creating wake-up carries it (as prepare_message)."""
        ...

    async def message_fingerprint(self, ref: ActorRef, message_id: str) -> str | None:
        """The fingerprint of the stored message with this id (pending or consumed, within the dedupe
        window), None if unknown: how a reused idempotency key is compared with the first request."""
        ...

    async def wait_response(self, ref: ActorRef, message_id: str, timeout: float) -> tuple[bool, Any]:
        """(True, response) once a completable message is answered, (False, None) after `timeout`."""
        ...

    async def wait_inbox(self, ref: ActorRef, known: AbstractSet[str], timeout: float) -> list[InboxMessage]:
        """Pending inbox messages of `ref` (in send order) whose ids are not in `known`, as soon as there is
        one, or [] after `timeout` seconds. A running wake-up's in-process queue wait uses it."""
        ...

    async def read_events(self, ref: ActorRef, after: int, limit: int) -> list[EventRecord]: ...

    async def wait_events(self, ref: ActorRef, after: int, timeout: float) -> list[EventRecord]:
        """Events after `after`, waiting up to `timeout` seconds for the first one."""
        ...

    async def record_wake_error(self, ref: ActorRef, error: WakeError) -> None:
        """Remember why the last wake-up failed (shown by status until a later commit); replaces the
        previous one; does nothing if the actor does not exist."""
        ...

    async def read_summary(self, ref: ActorRef) -> ActorSummary | None:
        """The actor's listing entry (one cheap read; None if it does not exist). It follows each commit
        that changes the listed status (a crash between the two is repaired by the next load)."""
        ...

    async def list_actors(self, actor_type: str, *, status: WorkflowState | None = None, limit: int = 100,
                          after: str | None = None) -> ActorPage:
        """Actors of one type, optionally of one listed status, in listing order, `limit` at most per page;
        `after` is the previous page's cursor. Listings may lag a commit briefly (DynamoDB's index)."""
        ...

    async def count_actors(self, actor_type: str, status: WorkflowState, *, limit: int) -> ActorCount:
        """How many actors of a type are listed in `status`, counting at most `limit` (then `exact` is False).
        Cheap: DynamoDB counts with Select=COUNT Queries of the listing's index, one per 1 MB of status items."""
        ...

    async def search_actors(self, plan: SearchPlan, *, status: WorkflowState | None = None, limit: int = 100,
                            after: str | None = None) -> ActorPage:
        """The actors of `plan.actor_type` whose search attributes satisfy every condition of `plan` (and of the
        listed `status`), ordered by the value of the attribute the plan reads, at most `limit` per page; `after` is
        the previous page's cursor. Each summary carries the actor's `attributes`. DynamoDB: Queries of the `search`
        index, never a Scan (docs/storage.md); like the listing, it may lag a commit briefly."""
        ...

    async def count_matches(self, plan: SearchPlan, *, limit: int) -> MatchCount:
        """How many actors match `plan`, per listed status, counting at most `limit` in all."""
        ...

    async def mark_attention(self, ref: ActorRef, reason: AttentionReason, since: float) -> None:
        """Mark the actor as one that may need an operator (replaces an earlier mark of it)."""
        ...

    async def clear_attention(self, ref: ActorRef, since: float | None = None) -> None:
        """Remove the actor's mark; with `since`, only the mark made at that time (a newer one stays)."""
        ...

    async def list_attention(self, actor_type: str, *, limit: int = 100, after: str | None = None) -> AttentionPage:
        """The marked actors of a type, by storage id, `limit` at most per page; `after` is the previous page's
        cursor. Like the listing, it may lag a write briefly (DynamoDB's index)."""
        ...

    async def delete(self, ref: ActorRef, *, at: float | None = None) -> bool:
        """Remove every item of the actor; True if it existed. Safe to re-run after an interruption; while
        it runs the actor loads as missing; afterwards a create starts it afresh.

        `at`: when, on the runtime's clock. The store keeps it (`deleted_at`, one small item that outlives the
        actor): a wake-up carrying a request made before it — a creation, a message — is dropped, never
        re-creates the actor or delivers the message to a later life (the delete wins, whatever the queues keep)."""
        ...

    async def deleted_at(self, ref: ActorRef) -> float | None:
        """When the actor was last deleted (`delete(ref, at=...)`), None if never."""
        ...


    # Flow control (dormant.core.flow, docs/semantics.md "Limits"): single-item conditional writes in one partition per
    # limit, never in an actor's. Leases are on the runtime's clock (`now`), which the caller passes.
    async def acquire_slot(self, request: SlotRequest) -> SlotLease | SlotRefusal:
        """A slot of the limit (if it has a concurrency) and a start in the current window (if it has a rate), or
        a refusal saying why. A holder that holds a slot already (a re-run after a crash) gets that slot again."""
        ...

    async def renew_slot(self, lease: SlotLease, until: float) -> bool:
        """Move the slot's expiry to `until`; False when the holder no longer holds it (its lease ran out)."""
        ...

    async def release_slot(self, lease: SlotLease, now: float) -> list[ActorRef]:
        """Free the slot (if the holder still holds it) and take the oldest waiter out of the line: the actors to
        wake (at most one)."""
        ...

    # -- kept versions (dormant.runtime.versions: which versions a store keeps, and why) ------------------
    async def retained_versions(self, ref: ActorRef) -> list[VersionInfo] | None:
        """The versions of the actor the store can still rebuild, oldest first (None: no such actor). Bounded:
        at most `snapshot_every` of them, the newest included."""
        ...

    async def load_version(self, ref: ActorRef, version: int) -> ActorSnapshot | None:
        """The actor as it was at `version`: meta, state, workflow record and live history (values kept elsewhere
        read back; the inbox and held ids empty). None: no such actor; VersionNotRetainedError (naming the kept
        range) for a version the store does not keep."""
        ...

    # -- values kept outside the items (dormant.s3.large_values; `dormant doctor`) ----------------------------
    async def check_values(self, ref: ActorRef, *, repair: bool = False) -> ValueCheck | None:
        """Every value the actor keeps outside its items (S3), checked: what is missing, and which kept versions are
        whole. With `repair`: a missing object is restored from another one with the same content; a pending
        message whose body is lost is taken out of the inbox; a lost value of the live version is replaced by a
        marker (the caller then marks the actor failed). None: no such actor. A store that keeps every value in its
        items reports them intact."""
        ...

    # Callbacks (dormant.workflow.callbacks): a commit's `draft.callbacks` open and close lookup records, written
    # with the commit (the DynamoDB store writes them right after its commit item, and again on a load of that
    # version if it crashed in between). An open record is written once, a closed one over an open one only: a
    # record never goes back, and a heartbeat's move is never undone by a re-written commit.
    async def read_callback(self, token_hash: str) -> CallbackRecord | None:
        """The lookup record of the callback whose token hashes to `token_hash` (one read; None if unknown). It
        may be past `expires_at`: the caller says what that means."""
        ...

    async def heartbeat_callback(self, token_hash: str, heartbeat_deadline: float, now: float) -> bool:
        """Move an open callback's heartbeat deadline forward to `heartbeat_deadline` (one conditional write,
        nothing else: the actor is not woken). False, changing nothing, when the record is gone, closed, or its
        heartbeat deadline passed before `now`."""
        ...


class Transport(Protocol):
    """Delivers wake-ups: now, or at an absolute time (timers, retries, scheduled actions)."""

    async def wake(self, ref: ActorRef, *, at: float | None = None, reason: str | None = None,
                   message: InboxMessage | None = None, creation: Creation | None = None) -> None:
        """Wake `ref` now or at `at`. `reason` names what the wake-up is about (e.g. a message id):
        wake-ups with the same reason may be collapsed into one by the transport.

        A request that stores something and wakes the actor sends the wake-up first, carrying what it
        stores (`message`, and `creation` when the actor may not exist yet): whoever runs the wake-up stores
        what is missing, so a request cut off after this call still completes (docs/semantics.md)."""
        ...


class Clock(Protocol):
    @property
    def realtime(self) -> bool:
        """True when time passes by itself (the system clock); False for a test clock that stands still
        unless moved: a wake-up then never waits in process for time to pass with nothing else running."""
        ...

    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    async def sleep_until(self, moment: float) -> None:
        """Return once `now()` has reached `moment` (a clock that stands still: once it is moved there)."""
        ...
