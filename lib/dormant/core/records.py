"""The records the runtime and every backend exchange: an actor's identity, its stored messages, a loaded version,
listing entries and pages, events, kept versions, attention marks. Data only (pydantic: they cross the HTTP API and
the stores' JSON); what a store must do with them is dormant.ports."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import quote

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_validator,
)

from dormant.core.limits import ACTOR_ID, CARRIED_MESSAGE, KEY_PART, check_actor_id
from dormant.errors import InvalidKeyError
from dormant.workflow.caller import Caller
from dormant.workflow.history import HistoryEntry, WorkflowRecord, WorkflowState
from dormant.workflow.values import RESERVED_KEY, content_identity

MAX_KEY_PART = KEY_PART.maximum
MAX_CARRIED_BYTES = CARRIED_MESSAGE.maximum
"""Largest message (its JSON, plus the actor's input when the send creates the actor) a wake-up carries:
one SQS message is 256 KiB; the rest is the wake-up's envelope (actor, key: under 16 KiB)."""
MAX_ID_BYTES = ACTOR_ID.maximum  # the `status` index's sort key holds it (dormant.core.limits)
# What InboxMessage.fingerprint hashes: json.dumps(..., sort_keys=True, separators=(",", ":"), ensure_ascii=False)'s
# text, from one encoder (json.dumps with options makes one per call; fingerprints are stored, so the text is kept)
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


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
    traceparent: str | None = Field(None, exclude_if=lambda value: value is None)
    """The W3C trace context of the send (tracing on: dormant.runtime.tracing); written only when set, so a
    message sent without tracing is stored as before, and messages stored before this field load as None."""

    def fingerprint(self) -> str:
        """What makes two sends with one id the same request: kind, queue, body and arguments (not the times, nor
        which S3 objects hold its large values: each stored message has objects of its own, named by content)."""
        canonical = _CANONICAL.encode([self.kind, self.queue, self.body, self.args])
        if RESERVED_KEY in canonical:
            canonical = _CANONICAL.encode([self.kind, self.queue, content_identity(self.body),
                                           content_identity(self.args)])
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
    history: Sequence[HistoryEntry]
    """Its live entries: a list of models, or a StoredHistory (validated when read; the engine reads its JSON)."""
    inbox: list[InboxMessage]
    wake_error: WakeError | None = None
    search: dict[str, list[Any]] = Field(default_factory=dict)
    """Its search attributes as stored: name -> [type code, JSON value] (dormant.core.search)."""
    held_ids: set[str] = Field(default_factory=set)
    """Ids of every message the load saw stored (the inbox, and consumed ones not yet forgotten): a carried
    message whose id is here needs no storing."""

    @field_serializer("history", mode="wrap")
    def _history_as_list(self, history: Sequence[HistoryEntry], handler: SerializerFunctionWrapHandler) -> Any:
        # (a StoredHistory dumps as the list of entries it stands for, as a list of models does)
        return handler(history if isinstance(history, list) else list(history))


def listed_status(state: WorkflowState) -> WorkflowState:
    """The status a workflow state is listed under, the listing before it aside: the state itself, except that
    `running` (stored only by the commits in the middle of a wake-up) is `sleeping`. Commits decide with
    `listed_after`, which keeps a `pending` or `sleeping` listing through `running` commits."""
    return WorkflowState.SLEEPING if state is WorkflowState.RUNNING else state


def listed_after(previous: WorkflowState, state: WorkflowState) -> WorkflowState:
    """The listed status after a commit that stores `state`, the actor listed `previous` before it. A `running`
    commit (the middle of a wake-up) keeps a `pending` or `sleeping` listing as it is: the listing changes at the
    wake-up's last commit, so a first wake-up of several commits moves it once (pending -> its outcome), not twice
    (issue 29: a status item and two index units less). From any other status `running` is listed `sleeping`
    (`listed_status`): an actor reset or resumed from `completed` or `failed` is not listed as ended while it runs."""
    if state is WorkflowState.RUNNING and previous in (WorkflowState.PENDING, WorkflowState.SLEEPING):
        return previous
    return listed_status(state)


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
