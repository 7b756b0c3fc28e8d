"""A callback's lookup record: how `POST /callbacks/{token}`, which knows no actor key, finds the actor holding the
callback, and what that actor's commits say of it (EventStore.read_callback; written by each store's commit), and the
rules every store follows when it writes one: which state changes are allowed (`may_replace`) and when a heartbeat
moves it (`heartbeat_allowed`)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from dormant.core.records import ActorRef
from dormant.workflow.history import CallbackChange, CallbackState

CALLBACK_RETENTION = 24 * 3600.0
"""Seconds a closed callback's lookup record is kept (the DynamoDB store: `response_ttl_seconds`), for
`GET /callbacks/{token}` and for a retried completion to be answered as the same one."""


class CallbackRecord(BaseModel):
    """A callback's lookup record, kept by the store under the token's hash: which actor holds the callback
    (`POST /callbacks/{token}` knows no key), and what the commits of that actor say of it."""

    token_hash: str
    callback_id: str
    completion_id: str | None = Field(None, description="The id of its completion message (None: a callback "
                                                        "opened before it was recorded, `callback-<id>`)")
    name: str
    location: str
    actor: str
    key: tuple[str, ...]
    actor_created_at: float = Field(description="The actor's creation: a re-created actor is another one")
    state: CallbackState
    deadline: float | None = None
    heartbeat_timeout: float | None = None
    heartbeat_deadline: float | None = Field(None, description="Moved by each heartbeat")
    version: int = Field(description="The actor's version whose commit wrote this state")
    at: float = Field(description="When the workflow opened or closed it")
    expires_at: float | None = Field(None, description="When the store may forget it (None: while it is open "
                                                       "without a deadline)")

    @property
    def ref(self) -> ActorRef:
        return ActorRef(name=self.actor, key=self.key)


def callback_record(ref: ActorRef, created_at: float, version: int, change: CallbackChange,
                    retention: float = CALLBACK_RETENTION) -> CallbackRecord:
    """The lookup record a commit of `change` writes (open: kept past its deadline; closed: `retention` more)."""
    if change.state != "open":
        expires: float | None = change.at + retention
    else:
        expires = change.deadline + retention if change.deadline is not None else None
    return CallbackRecord(**change.model_dump(), actor=ref.name, key=ref.key, actor_created_at=created_at,
                          version=version, expires_at=expires)


def replaceable(state: CallbackState) -> tuple[CallbackState, ...]:
    """The stored states a commit's record in `state` may be written over, besides no record at all: an open record
    only where none is; a closed one over an open one (or none). So a record never goes back (closed to open), a
    closed one is never closed again another way, and a commit written again (a re-settled DynamoDB commit) never
    undoes a heartbeat's move of an open one."""
    return () if state == "open" else ("open",)


def may_replace(stored: CallbackState | None, state: CallbackState) -> bool:
    """Whether a commit's record in `state` is written over the stored record's `stored` state (None: none)."""
    return stored is None or stored in replaceable(state)


def heartbeat_allowed(state: CallbackState, heartbeat_deadline: float | None, now: float) -> bool:
    """Whether a heartbeat at `now` moves a record: it is open and its heartbeat deadline has not passed (a record
    without one takes no heartbeat). The move is forward only: a heartbeat asking for less changes nothing and
    still counts."""
    return state == "open" and heartbeat_deadline is not None and now < heartbeat_deadline
