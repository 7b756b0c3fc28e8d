"""DynamoDB items of the event store: the commit-ring model (snapshots and deltas folded into the live
history) and the item codec (compressed JSON payloads, DynamoDB's size rules). No I/O here."""

from __future__ import annotations

import json
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from dormant.core.limits import ITEM, ServiceLimit
from dormant.core.records import ActorMeta, ActorRef, ActorSnapshot, listed_status
from dormant.core.search import apply_changes
from dormant.errors import ItemTooLargeError
from dormant.s3.offload import refs_in_text, resolve, sha_of
from dormant.workflow.history import CallbackChange, StoredHistory, WorkflowRecord, WorkflowState

# every item the store writes stays within this (dormant.core.limits: moto's is lower than AWS's)
ITEM_LIMIT = ITEM.maximum


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def compress(value: Any, texts: dict[str, str] | None = None) -> bytes:
    """Commit payloads are compressed JSON: their field names repeat, so they shrink 2-4x, and a commit
    of a step usually fits in one write unit (1 KB) and a load in one read unit. `texts`: the JSON of some of the
    payload's members (a dict's), made already: the same text as dumps(value), without serializing them again."""
    return zlib.compress((dumps(value) if not texts else object_text(value, texts)).encode(), 6)


def object_text(value: dict[str, Any], texts: dict[str, str]) -> str:
    """dumps(value), each member named in `texts` written as the JSON text given there (compact JSON of a dict is its
    members' texts, joined: the same characters)."""
    return "{" + ",".join(f"{dumps(key)}:{texts[key] if key in texts else dumps(member)}"
                          for key, member in value.items()) + "}"


def commit_payload(item: dict[str, dict[str, Any]]) -> Any:
    return json.loads(zlib.decompress(item["z"]["B"]))


def json_size(value: Any) -> int:
    """Bytes of the JSON form of `value` (what it costs inside an item)."""
    return len(dumps(value).encode())


def sized(value: Any) -> tuple[int, tuple[str, ...]]:
    """(JSON bytes, the S3 objects it refers to: dormant.s3.offload) of a stored value, from one serialization."""
    return sized_text(dumps(value))


def sized_text(text: str) -> tuple[int, tuple[str, ...]]:
    """`sized` of the value whose JSON is `text`."""
    return len(text) if text.isascii() else len(text.encode()), tuple(refs_in_text(text))


Sized = tuple[int, tuple[str, ...]]  # (JSON bytes, the S3 objects it refers to): `sized`


@dataclass(slots=True)
class Measured:
    """`sized` of a commit's new values (its delta's entries, state and workflow record), each measured once: by the
    commit from the texts it stores, by its check from the draft's sizes (dormant.dynamodb.log)."""

    upserts: list[Sized]
    state: Sized | None = None  # (None where the delta has none)
    workflow: Sized | None = None


def item_size(item: dict[str, dict[str, Any]]) -> int:
    """DynamoDB's size of a low-level item: attribute names plus values (numbers counted generously)."""
    total = 0
    for name, value in item.items():
        total += len(name.encode())
        if "S" in value:
            total += len(value["S"].encode())
        elif "B" in value:
            total += len(value["B"])
        elif "N" in value:
            total += 21
        else:
            total += 1
    return total


@dataclass
class Side:
    """What one commit writes besides its commit item; re-derivable from the commit item."""

    consumed: list[str] = field(default_factory=list)
    responses: dict[str, Any] = field(default_factory=dict)
    events: list[list[Any]] = field(default_factory=list)  # [seq, name, payload, at]
    at: float = 0.0
    listed: tuple[str, float] | None = None  # (status, since) when this commit changed the listed status
    # when this commit changed search attributes: the ones it unset (dormant.dynamodb.search)
    unset: list[str] | None = None
    callbacks: list[CallbackChange] = field(default_factory=list)  # lookup items to write (dormant.dynamodb.callbacks)

    def consumed_at(self) -> tuple[tuple[str, float], ...]:
        """(message id, when) of each message this commit consumed."""
        return tuple((message_id, self.at) for message_id in self.consumed)

    def payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"c": self.consumed, "r": self.responses, "e": self.events}
        if self.listed is not None:
            payload["l"] = list(self.listed)
        if self.unset is not None:
            payload["sx"] = self.unset
        if self.callbacks:
            payload["k"] = [change.model_dump(mode="json", exclude_defaults=True) for change in self.callbacks]
        return payload

    @staticmethod
    def from_payload(payload: dict[str, Any], at: float) -> Side:
        listed, unset = payload.get("l"), payload.get("sx")
        return Side(list(payload.get("c", [])), dict(payload.get("r", {})), list(payload.get("e", [])), at,
                    (str(listed[0]), float(listed[1])) if listed else None, list(unset) if unset is not None else None,
                    [CallbackChange.model_validate(change) for change in payload.get("k", ())])


@dataclass
class Head:
    """One materialized version of an actor. Immutable once cached: later versions copy, never edit."""

    version: int
    ring: int
    snapshot_version: int
    meta: dict[str, Any]
    state: dict[str, Any]
    workflow: dict[str, Any]
    history: dict[str, dict[str, Any]]
    sizes: dict[str, int]  # JSON bytes per history location, to check a snapshot would fit
    state_bytes: int
    workflow_bytes: int
    meta_bytes: int
    event_seq: int
    delta_bytes: int  # bytes of the delta items since the snapshot
    side: Side
    # (message id, when the commit that consumed it was written) from the snapshot to this version: their inbox items
    # are tombstoned only by the next snapshot commit (dormant.dynamodb.messages)
    chain_consumed: tuple[tuple[str, float], ...] = ()
    # the same for the chain before the snapshot, whose tombstones the snapshot commit wrote just before it: a load's
    # inbox Query answered before those tombstones (the two Queries run concurrently) still finds their pending items
    tombstoned: tuple[tuple[str, float], ...] = ()
    settled: bool = False  # this version's responses and events are known to be written
    incarnation: str = ""  # of this life of the actor: a re-created actor's commits never mix with a deleted one's
    # S3 objects this version refers to, by where (a history location, or "#state", "#meta", "#workflow"): sparse
    refs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # objects released by each version still in the ring (deleted once that version leaves it: large_values)
    releases: dict[int, tuple[str, ...]] = field(default_factory=dict)
    search: dict[str, list[Any]] = field(default_factory=dict)  # search attributes: name -> [type code, value]
    since: float = 0.0  # when the actor entered its listed status (what its search items say)
    # the listed status (dormant.core.records.listed_after): what the status item says once this version settled
    listed: str = WorkflowState.PENDING.value

    def advance(self, version: int, delta: dict[str, Any], side: Side, measured: Measured | None = None) -> Head:
        """The version `delta` makes of this one; `measured`: its values' sizes, known already (else measured here)."""
        history, sizes, refs = dict(self.history), dict(self.sizes), dict(self.refs)
        for prefix in delta.get("x", ()):
            below = prefix + "/"
            for location in [loc for loc in history if loc == prefix or loc.startswith(below)]:
                del history[location]
                del sizes[location]
                refs.pop(location, None)
        for index, entry in enumerate(delta.get("u", ())):
            location = entry["location"]
            history[location] = entry
            sizes[location], found = measured.upserts[index] if measured is not None else sized(entry)
            _set_refs(refs, location, found)
        state, workflow = delta.get("s"), delta.get("w")
        state_bytes, workflow_bytes = self.state_bytes, self.workflow_bytes
        if state is not None:
            state_bytes, found = measured.state if measured is not None and measured.state is not None else sized(state)
            _set_refs(refs, "#state", found)
        if workflow is not None:
            workflow_bytes, found = (measured.workflow if measured is not None and measured.workflow is not None
                                     else sized(workflow))
            _set_refs(refs, "#workflow", found)
        return Head(
            version=version, ring=self.ring, snapshot_version=self.snapshot_version, meta=self.meta,
            state=self.state if state is None else state, workflow=self.workflow if workflow is None else workflow,
            history=history, sizes=sizes, state_bytes=state_bytes, workflow_bytes=workflow_bytes,
            meta_bytes=self.meta_bytes, event_seq=side.events[-1][0] if side.events else self.event_seq,
            delta_bytes=self.delta_bytes, side=side, chain_consumed=self.chain_consumed + side.consumed_at(),
            tombstoned=self.tombstoned, incarnation=self.incarnation, refs=refs,
            releases={v: keys for v, keys in self.releases.items() if v > version - self.ring},
            search=apply_changes(self.search, delta["a"]) if "a" in delta else self.search,
            since=side.listed[1] if side.listed is not None else self.since,
            listed=side.listed[0] if side.listed is not None else self.listed)

    def hidden(self) -> dict[str, float]:
        """Message id -> when it was consumed, for every consumed message whose pending item a load may still read:
        the chain's since the snapshot, and the chain's before it (see `tombstoned`)."""
        return dict(self.tombstoned + self.chain_consumed)

    def all_refs(self) -> Counter[str]:
        """Every object this version refers to, with how many places refer to it."""
        return Counter(key for keys in self.refs.values() for key in keys)

    def known_content(self) -> dict[str, str]:
        """Content hash -> key of the objects this version refers to (a value with that content is referred to
        again, not written again)."""
        return {sha_of(key): key for keys in self.refs.values() for key in keys}

    def full(self) -> dict[str, Any]:
        return {"meta": self.meta, "state": self.state, "workflow": self.workflow, "history": self.history,
                "seq": self.event_seq, "search": self.search, "since": self.since, "listed": self.listed}

    def full_bytes(self) -> int:
        """JSON bytes of everything a snapshot of this version holds."""
        return (sum(self.sizes.values()) + self.state_bytes + self.workflow_bytes + self.meta_bytes
                + json_size(self.search))

    def full_parts(self) -> list[tuple[str, int]]:
        """(what, bytes) of everything a snapshot of this version holds, for size errors."""
        parts = [(f"history entry {loc!r}", size) for loc, size in self.sizes.items()]
        parts += [("state", self.state_bytes), ("workflow record", self.workflow_bytes),
                  ("actor metadata and input", self.meta_bytes), ("search attributes", json_size(self.search))]
        return parts

    def snapshot(self, ref: ActorRef, fetched: dict[str, Any] | None = None) -> ActorSnapshot:
        """The version as the runtime sees it; `fetched` (key -> value) reads back the values kept in S3. Its history
        is the entries' JSON (StoredHistory: no model per entry; a wake-up builds its records from the JSON and a
        corrupted entry fails there with pydantic's error, as a load of models did)."""
        search = apply_changes(self.search, {})
        if not fetched:
            snapshot = ActorSnapshot(ref=ref, version=self.version, meta=ActorMeta.model_validate(self.meta),
                                     state=dict(self.state), workflow=WorkflowRecord.model_validate(self.workflow),
                                     history=[], inbox=[], search=search)
            snapshot.history = StoredHistory(list(self.history.values()))
            return snapshot
        snapshot = ActorSnapshot(
            ref=ref, version=self.version, meta=ActorMeta.model_validate(resolve(self.meta, fetched)),
            state=dict(resolve(self.state, fetched)), workflow=WorkflowRecord.model_validate(
                resolve(self.workflow, fetched)), history=[], inbox=[], search=search)
        snapshot.history = StoredHistory([resolve(e, fetched) if e["location"] in self.refs else e
                                          for e in self.history.values()])
        return snapshot

    @staticmethod
    def from_snapshot(version: int, ring: int, full: dict[str, Any], side: Side, incarnation: str = "") -> Head:
        history: dict[str, dict[str, Any]] = full["history"]
        sizes: dict[str, int] = {}
        refs: dict[str, tuple[str, ...]] = {}
        for location, entry in history.items():
            sizes[location], found = sized(entry)
            _set_refs(refs, location, found)
        parts: dict[str, int] = {}
        for name in ("state", "workflow", "meta"):
            parts[name], found = sized(full[name])
            _set_refs(refs, f"#{name}", found)
        return Head(version=version, ring=ring, snapshot_version=version, meta=full["meta"], state=full["state"],
                    workflow=full["workflow"], history=history, sizes=sizes, state_bytes=parts["state"],
                    workflow_bytes=parts["workflow"], meta_bytes=parts["meta"], event_seq=int(full["seq"]),
                    delta_bytes=0, side=side, chain_consumed=side.consumed_at(), incarnation=incarnation,
                    refs=refs, search=dict(full.get("search", {})),
                    since=float(full.get("since", full["meta"].get("created_at", 0.0))),
                    listed=str(full.get("listed") or listed_status(WorkflowState(full["workflow"]["state"])).value))
        # (a snapshot written before issue 29 has no "listed": its status item says its state's listed status)


def _set_refs(refs: dict[str, tuple[str, ...]], where: str, found: tuple[str, ...]) -> None:
    if found:
        refs[where] = found
    else:
        refs.pop(where, None)


class TornRead(Exception):
    """The ring changed while it was being read (no gap-free chain to a snapshot): read again."""


Parts = Iterable[tuple[str, int]] | Callable[[], Iterable[tuple[str, int]]]
"""(what, bytes) of an item's parts, named in a size error: or a function that measures them (only on that error)."""


def too_large(ref: ActorRef, what: str, size: int, parts: Parts, limit: ServiceLimit = ITEM) -> ItemTooLargeError:
    parts = list(parts() if callable(parts) else parts)
    biggest = max(parts, key=lambda part: part[1], default=("(nothing)", 0))
    error = ItemTooLargeError(
        f"{what} of an actor of type {ref.name!r} is {size:,} bytes, over the limit ({limit.name}): "
        f"{limit.describe()}. "
        f"The biggest of its {len(parts):,} parts is {biggest[0]} ({biggest[1]:,} bytes). Keep step outputs, "
        "messages and state small, and the entries of one run few: "
        "store large payloads elsewhere (e.g. S3) and record a reference. Retrying cannot help.")
    error.limit = limit
    return error
