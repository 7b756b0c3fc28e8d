"""What the runtime needs from the outside world, by capability: small Protocols that backends (memory, DynamoDB,
SQS) implement, and the runtime and the engine know nothing else.

- `log`: an actor's life (create, load, commit, delete) and the checks before any write;
- `inbox`: messages stored idempotently by id; `outputs`: responses and events;
- `listing`, `attention`, `search`: finding actors; `versions`: kept versions; `values`: values kept elsewhere;
- `slots`: flow-control limits; `callbacks`: callback lookup records;
- `transport`: wake-ups; `clock`: the runtime's clock.

`EventStore` is every store capability together: what the runtime holds. The records they exchange (ActorRef,
InboxMessage, ActorSnapshot, ...) are dormant.core.records, re-exported here.
"""

from __future__ import annotations

from typing import Protocol

from dormant.core.records import (
    FINISHED,
    LISTED_STATUSES,
    MAX_CARRIED_BYTES,
    MAX_ID_BYTES,
    MAX_KEY_PART,
    ActorCount,
    ActorMeta,
    ActorPage,
    ActorRef,
    ActorSnapshot,
    ActorSummary,
    AttentionMark,
    AttentionPage,
    AttentionReason,
    Creation,
    EventRecord,
    InboxMessage,
    MatchCount,
    VersionInfo,
    WakeError,
    listed_status,
)
from dormant.ports.attention import Attention
from dormant.ports.callbacks import Callbacks
from dormant.ports.clock import Clock
from dormant.ports.inbox import Inbox
from dormant.ports.listing import Listing
from dormant.ports.log import ActorLog
from dormant.ports.outputs import Outputs
from dormant.ports.search import Search
from dormant.ports.slots import Slots
from dormant.ports.transport import Transport
from dormant.ports.values import Values
from dormant.ports.versions import Versions

__all__ = [
    "FINISHED", "LISTED_STATUSES", "MAX_CARRIED_BYTES", "MAX_ID_BYTES", "MAX_KEY_PART", "ActorCount", "ActorLog",
    "ActorMeta", "ActorPage", "ActorRef", "ActorSnapshot", "ActorSummary", "Attention", "AttentionMark",
    "AttentionPage", "AttentionReason", "Callbacks", "Clock", "Creation", "EventRecord", "EventStore", "Inbox",
    "InboxMessage", "Listing", "MatchCount", "Outputs", "Search", "Slots", "Transport", "Values", "VersionInfo",
    "Versions", "WakeError", "listed_status",
]


class EventStore(ActorLog, Inbox, Outputs, Listing, Attention, Search, Slots, Callbacks, Versions, Values, Protocol):
    """Durable per-actor storage: every store capability together (what the runtime holds). Every `commit` is
    atomic and conditional on `expected_version`."""
