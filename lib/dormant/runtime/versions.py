"""Which versions of an actor its store keeps, so that a fork or a reset can start from one (docs/storage.md, "Kept
versions"). Pure: both stores use it, neither does I/O here.

The DynamoDB store keeps a ring of N commit items (N = `snapshot_every`, 16 by default): a commit carries a full
snapshot once the last one is N versions back (or once the deltas since it weigh SNAPSHOT_AFTER_BYTES: `snapshot_due`,
`commit_weight`), the others carry deltas. A version can be rebuilt while its snapshot and every delta after it are
still in the ring, so the kept versions run from the oldest snapshot still in the ring to the newest version: between 1
and N of them, the newest always. `VersionRing` is the same ring for the memory store (TestEnv keeps the versions
production keeps); `describe` tells what each kept version is, for both.

A kept version holds what was live then: finished loop iterations that loop compaction (`history_keep`) had deleted by
then are not in it, whatever version one goes back to.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter

from dormant.core.limits import draft_sizes, json_size
from dormant.core.search import apply_changes
from dormant.errors import VersionNotRetainedError
from dormant.ports import ActorMeta, ActorRef, ActorSnapshot, VersionInfo
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import HistoryEntry, Row, WorkflowRecord, WorkflowState, entry_of

SNAPSHOT_AFTER_BYTES = 96 * 1024
"""A commit also carries a snapshot once the deltas since the last one weigh this much (`commit_weight`)."""
MAX_CHANGED = 20  # locations listed per version
_HISTORY = TypeAdapter(list[HistoryEntry])


@dataclass(frozen=True)
class Materialized:
    """One kept version, rebuilt: what the actor was at it (JSON, as the stores keep it)."""

    version: int
    at: float
    meta: dict[str, Any]
    state: dict[str, Any]
    workflow: dict[str, Any]
    history: dict[str, dict[str, Any]]  # location -> entry
    consumed: int
    search: dict[str, list[Any]] = field(default_factory=dict)  # its search attributes: name -> [type code, value]


@dataclass(slots=True)
class _Slot:
    version: int
    at: float
    full: dict[str, Any] | None  # a snapshot: meta, state, workflow, history (a list of entries, or by location)
    delta: dict[str, Any] | None  # u (upserts), x (deleted prefixes), s (state), w (workflow)
    consumed: int


def json_weight(value: Any) -> int:
    """UTF-8 bytes of `value`'s compact JSON."""
    return json_size(value)


def commit_weight(upserts: Sequence[Any], state: Any, workflow: Any) -> int:
    """What a delta weighs towards SNAPSHOT_AFTER_BYTES: the JSON of its history entries, state and workflow record
    as the workflow made them. Every store weighs the values before it offloads any (a value kept in S3 weighs its
    JSON, not its reference), so the versions a store keeps do not depend on where it keeps big values: TestEnv keeps
    the versions a deployed actor keeps (tests/contract/test_versions.py)."""
    return sum(json_weight(entry) for entry in upserts) + json_weight(state) + json_weight(workflow)


def snapshot_due(version: int, snapshot_version: int, ring: int, weight_since: int, weight: int) -> bool:
    """Whether commit `version` carries a full snapshot: the last one is `ring` versions back, or the deltas since it
    (`weight_since`) and this one (`weight`) pass SNAPSHOT_AFTER_BYTES. The one rule of both stores."""
    return version - snapshot_version >= ring or weight_since + weight > SNAPSHOT_AFTER_BYTES


class VersionRing:
    """The memory store's ring of the last `size` commits, snapshots and deltas chosen as the DynamoDB store
    chooses them (sizes measured on the JSON text, as a DynamoDB store measures the commits it wrote itself)."""

    def __init__(self, size: int, full: dict[str, Any], at: float) -> None:
        self.size = size
        self._slots: deque[_Slot] = deque([_Slot(1, at, full, None, 0)], maxlen=size)
        self._snapshot_version = 1
        self._delta_bytes = 0

    def __eq__(self, other: object) -> bool:  # (tests compare whole stores before and after an operation)
        return isinstance(other, VersionRing) and (self.size, list(self._slots), self._snapshot_version,
                                                   self._delta_bytes) == (other.size, list(other._slots),
                                                                          other._snapshot_version, other._delta_bytes)

    __hash__ = None  # type: ignore[assignment]

    def add(self, version: int, draft: CommitDraft, workflow: dict[str, Any] | None,
            full: Callable[[], dict[str, Any]]) -> bool:
        """Keep commit `version` (`draft`, its workflow record as JSON); `full()` is the actor after it. True when it
        is kept as a snapshot."""
        sizes = draft.sizes  # (measured once: the store's limit check measured them already)
        if sizes is None:
            sizes = draft_sizes(draft)
        others = sizes.upserts_total + (4 if workflow is None else json_size(workflow))
        # (a snapshot is due for the least the state can weigh, or for its exact size: strings of a state not
        # measured yet are measured only when their bounds do not decide)
        weight = others + sizes.state_least
        due = snapshot_due(version, self._snapshot_version, self.size, self._delta_bytes, weight)
        if not due and sizes.state_least != sizes.state_most:
            weight = others + sizes.state
            due = snapshot_due(version, self._snapshot_version, self.size, self._delta_bytes, weight)
        if due:
            self._slots.append(_Slot(version, draft.committed_at, full(), None, len(draft.consumed_ids)))
            self._snapshot_version, self._delta_bytes = version, 0
            return True
        delta = {"u": draft.upserts, "x": draft.deleted_prefixes, "s": draft.state, "w": workflow}
        if draft.search:
            delta["a"] = draft.search  # (as the DynamoDB ring's deltas carry them: a fork or reset restores them)
        self._slots.append(_Slot(version, draft.committed_at, None, delta, len(draft.consumed_ids)))
        self._delta_bytes += weight
        return False

    def versions(self) -> list[Materialized]:
        """Every kept version, oldest first."""
        start = next(index for index, slot in enumerate(self._slots) if slot.full is not None)
        found: list[Materialized] = []
        current: dict[str, Any] = {}
        for slot in list(self._slots)[start:]:
            if slot.full is not None:
                current = {**slot.full, "history": _by_location(slot.full["history"])}
            else:
                assert slot.delta is not None
                current = apply_delta(current, slot.delta)
            found.append(Materialized(slot.version, slot.at, current["meta"], current["state"], current["workflow"],
                                      current["history"], slot.consumed, current.get("search", {})))
        return found


def _by_location(history: dict[str, dict[str, Any]] | list[dict[str, Any] | Row]) -> dict[str, dict[str, Any]]:
    """A snapshot's history by location (the memory store keeps its entries alone, as rows: see _Actor.full)."""
    if isinstance(history, dict):
        return dict(history)
    entries = [entry_of(item) for item in history]
    return {entry["location"]: entry for entry in entries}


def apply_delta(current: dict[str, Any], delta: dict[str, Any]) -> dict[str, Any]:
    """The actor after a delta (as a commit applies it: deleted prefixes first, then the upserts)."""
    history = dict(current["history"])
    for prefix in delta.get("x") or ():
        below = prefix + "/"
        for location in [loc for loc in history if loc == prefix or loc.startswith(below)]:
            del history[location]
    for entry in delta.get("u") or ():
        history[entry["location"]] = entry
    return {"meta": current["meta"], "state": current["state"] if delta.get("s") is None else delta["s"],
            "workflow": current["workflow"] if delta.get("w") is None else delta["w"], "history": history,
            "search": apply_changes(current.get("search", {}), delta.get("a") or {})}


def pick(versions: Sequence[Materialized], version: int) -> Materialized:
    """The kept `version`; VersionNotRetainedError naming what is kept."""
    for kept in versions:
        if kept.version == version:
            return kept
    raise not_retained(version, versions)


def snapshot_of(ref: ActorRef, kept: Materialized) -> ActorSnapshot:
    """A kept version as the runtime reads it (nothing in its inbox: that is the actor's now, not the version's)."""
    return ActorSnapshot(ref=ref, version=kept.version, meta=ActorMeta.model_validate(kept.meta),
                         state=dict(kept.state), workflow=WorkflowRecord.model_validate(kept.workflow),
                         history=_HISTORY.validate_python(list(kept.history.values())), inbox=[],
                         search=apply_changes(kept.search, {}))


def not_retained(version: int, versions: Sequence[Materialized]) -> VersionNotRetainedError:
    oldest, newest = versions[0].version, versions[-1].version
    kept = f"version {oldest}" if oldest == newest else f"versions {oldest} to {newest}"
    why = ("it is newer than the actor" if version > newest else
           "the store keeps only its last snapshot and the commits after it (docs/storage.md, \"Kept versions\")")
    return VersionNotRetainedError(f"version {version} is not kept ({why}); the actor keeps {kept}")


def describe(versions: Sequence[Materialized]) -> list[VersionInfo]:
    """What each kept version is: its status, its size, what its commit changed and received."""
    described: list[VersionInfo] = []
    previous: Materialized | None = None
    for kept in versions:
        changed: list[str] | None = None
        received: list[str] | None = None
        if previous is not None:
            before = previous.history
            changed = [loc for loc, entry in kept.history.items() if before.get(loc) != entry]
            changed += [loc for loc in before if loc not in kept.history]
            known = _message_ids(before)
            received = [mid for mid in _message_ids(kept.history) if mid not in known]
        described.append(VersionInfo(
            version=kept.version, committed_at=kept.at, status=WorkflowState(kept.workflow.get("state", "pending")),
            entries=len(kept.history), changed=changed[:MAX_CHANGED] if changed is not None else None,
            more_changed=max(0, len(changed) - MAX_CHANGED) if changed is not None else 0, received=received,
            consumed=kept.consumed))
        previous = kept
    return described


def received_after(versions: Sequence[Materialized], version: int) -> list[str]:
    """Ids of the messages the workflow recorded as received after `version` (and still kept), in order."""
    base = pick(versions, version)
    known = _message_ids(base.history)
    found: dict[str, None] = {}
    for kept in versions:
        if kept.version > version:
            found.update((mid, None) for mid in _message_ids(kept.history) if mid not in known)
    return list(found)


def _message_ids(history: dict[str, dict[str, Any]]) -> list[str]:
    return [message["id"] for entry in history.values() if entry.get("kind") == "message"
            for message in entry.get("messages") or ()]
