"""Sizes measured once: a commit's draft reuses what the check before a step's result was accepted measured.

A step's result is checked before it is accepted (`Execution.check_storable`): the host measures the JSON of a
preview of the next commit, the step's entry as it will be stored included. The commit that follows stores the same
values; measuring them again would serialize every step's result twice. `reused_sizes` hands the commit the
preview's sizes when its values are the preview's (equal entries, the same state, responses and event payloads);
anything else leaves the draft unmeasured, and its store measures it (dormant.core.limits.draft_sizes). A state a step
changed is measured by the engine, which knows its shape from its check (`StateCell.known_size`: its big strings, and
whether it holds a float): the preview then carries its sizes into the store's check (`measured`).
"""

from __future__ import annotations

from operator import attrgetter
from typing import Any, cast

from dormant.workflow.entries import Entry
from dormant.workflow.history import EntryKind
from dormant.workflow.host import CommitDraft, DraftSizes
from dormant.workflow.sizing import Unmeasured, json_size, json_sizes, json_total


def measured(draft: CommitDraft, state_size: int | None = None, unmeasured: tuple[Unmeasured, ...] = (),
             together: bool = False) -> DraftSizes:
    """The JSON sizes of `draft`'s values; `state_size`: its state's, known already (but for the strings
    `unmeasured`, if any). `together`: its entries measured as one text, each entry's size only when read (for a
    store that decides by their sum: DraftSizes.of_entries)."""
    upserts = draft.upserts
    if together and len(upserts) > 1 and not draft.responses and not draft.events:  # (a step's commit, mostly)
        return DraftSizes.of_entries(upserts, json_total(upserts),
                                     json_size(draft.state) if state_size is None else state_size, [], [], unmeasured)
    return DraftSizes(
        upserts=[json_size(upserts[0])] if len(upserts) == 1 else json_sizes(upserts),  # (a step's preview: one)
        state=json_size(draft.state) if state_size is None else state_size,
        responses=[json_size(response) for response in draft.responses.values()] if draft.responses else [],
        events=[json_size(payload) for _, payload in draft.events] if draft.events else [], unmeasured=unmeasured)


# The fields of some kinds only (dormant.workflow.entries.Entry) that a completed step's entry keeps, read at once; at
# their defaults (the class's own values) the entry's JSON leaves them out. (error, failure_kind and retry_at are
# cleared by the completion.)
_KEPT_RARE = attrgetter("throttled_since", "rollback_done", "rollback_error", "deadline", "iteration", "loop_state",
                        "messages", "timed_out", "branches", "winner", "items", "removed_kind", "callback")
_RARE_DEFAULTS = _KEPT_RARE(Entry)
# Bytes of a completed step entry's JSON but for its location, name and output: braces, the eleven keys it can have
# (each quoted, a colon and a comma), its kind's text, "completed", two ints of at most 63 bits (20 characters with a
# sign) and four floats (Python writes a finite float in at most 24 characters: -1.2345678901234567e-308).
_ENTRY_FIXED = (2 + sum(len(key) + 4 for key in ("location", "kind", "name", "seq", "status", "output", "attempts",
                                                 "started_at", "ended_at", "created_at", "updated_at"))
                + 2 * 2 + max(len(kind.value) + 2 for kind in EntryKind) + len('"completed"') + 2 * 20 + 4 * 24)


def completed_entry_bound(entry: Entry, output: Any, attempt: int, at: float) -> int | None:
    """At least the JSON bytes of `entry` completed with `output` (attempt `attempt`, ended at `at`: the entry
    `Execution.check_storable` previews), known without serializing it; None where it is not known at once (an output
    that is a list or an object, a field of some kinds set, a value of an unusual type): then it is measured."""
    location, name, seq, started = entry.location, entry.name, entry.seq, entry.started_at
    if (type(location) is not str or type(name) is not str or type(seq) is not int or type(attempt) is not int
            or seq.bit_length() > 63 or attempt.bit_length() > 63 or type(entry.created_at) is not float
            or type(at) is not float or (started is not None and type(started) is not float)
            or (entry.extra is not None and _KEPT_RARE(entry) != _RARE_DEFAULTS)):  # (no `extra`: all at default)
        return None
    kind = type(output)
    if output is None or kind is bool or kind is float:  # (a finite float: to_json refuses the others)
        size = 24
    elif kind is int:
        if output.bit_length() > 63:
            return None
        size = 20
    elif kind is str:
        size = 6 * len(output) + 2  # (a character takes at most six bytes: `\u001f`)
    else:
        return None
    return _ENTRY_FIXED + 6 * (len(location) + len(name)) + size


def reused_sizes(preview: CommitDraft, draft: CommitDraft) -> DraftSizes | None:
    """`draft`'s sizes, each value's taken from `preview` where it stores the same value, measured where not (an
    entry changed since, or new); None when `preview` was not measured (the store then measures `draft` itself).
    Both were made from the same objects (the engine's entries, the state's dump, the step's output), so an equal
    value here is the same JSON text (an entry's output is also required to be the very object the preview held)."""
    sizes = preview.sizes
    if sizes is None:
        return None
    state = draft.state
    same_state = state is preview.state or state == preview.state
    previewed, upserts = preview.upserts, draft.upserts
    # per entry of `draft`: its size in the preview, None where the preview does not hold it (measured then)
    if len(previewed) == 1:  # (a step's preview: the entry it completed, and what the commit adds beside it)
        only = previewed[0]
        location = only["location"]
        position = -1
        for index, entry in enumerate(upserts):  # (a draft's locations are distinct: at most one is the preview's)
            if entry["location"] == location:
                position = index
                break
        if position < 0 or not _same_entry(only, upserts[position]):
            found = json_sizes(upserts)
        elif len(upserts) == 1:
            found = sizes.upserts
        else:  # (the others measured together, the preview's size in its place)
            found = json_sizes(upserts[:position] + upserts[position + 1:])
            found.insert(position, sizes.upserts[0])
    else:
        by_location = {entry["location"]: (entry, size) for entry, size in zip(previewed, sizes.upserts, strict=True)}
        known: list[int | None] = []
        for entry in upserts:
            seen = by_location.get(entry["location"])
            known.append(seen[1] if seen is not None and _same_entry(seen[0], entry) else None)
        found = _measured_where_unknown(upserts, known)
    responses, events = sizes.responses, sizes.events
    if draft.responses or draft.events or preview.responses or preview.events:  # (rare in a step's commit)
        responses = _reused(list(draft.responses.values()), list(preview.responses.values()), responses)
        events = _reused([payload for _, payload in draft.events], [payload for _, payload in preview.events], events)
    if same_state and sizes.state_least != sizes.state_most:  # (the preview's state size, its strings unmeasured)
        return sizes.with_values(found, responses, events)
    return DraftSizes(upserts=found, state=sizes.state_least if same_state else json_size(state), responses=responses,
                      events=events)


def _measured_where_unknown(values: list[Any], known: list[int | None]) -> list[int]:
    """`known`, each None replaced by the size of the value in its place (those measured together: json_sizes)."""
    if None not in known:
        return cast("list[int]", known)
    missing = iter(json_sizes([value for value, size in zip(values, known, strict=True) if size is None]))
    return [next(missing) if size is None else size for size in known]


def _same_entry(previewed: dict[str, Any], entry: dict[str, Any]) -> bool:
    return previewed.get("output") is entry.get("output") and previewed == entry


def _reused(values: list[Any], previewed: list[Any], sizes: list[int]) -> list[int]:
    """The sizes of `values`, taken from `sizes` (of `previewed`) where the value is the very same object in the
    same place."""
    return [sizes[index] if index < len(previewed) and previewed[index] is value else json_size(value)
            for index, value in enumerate(values)]
