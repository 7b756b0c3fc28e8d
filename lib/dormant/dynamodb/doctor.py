"""`dormant doctor` on the DynamoDB store: an actor's references to values kept in S3 checked against the bucket,
and repaired where that is possible (EventStore.check_values; docs/operations.md, "Lost values").

Issue 26 found a way objects were deleted while a pending message and a version still referred to them (fixed in
dormant.s3.large_values); an actor it hit cannot load (every load raises BlobMissing). This reads what a load
cannot: the raw commit ring (every kept version, as Head references: no S3 read), the pending inbox items and the
actor's S3 prefix, so it works on an actor that no longer loads.

A repair, in order:
1. **Recovered by content**: object keys name the SHA-256 of their bytes, so another object of the actor with the
   same hash is the same value (the bug deleted one message's object while another message's, with the same
   content, remained). It is read, its hash checked, and written under the missing key: exact.
2. **A lost message body**: the pending message is taken out of the inbox (its tombstone is written, as a commit
   consuming it would): the actor can load and run on without it. Its id is reported.
3. **A lost value of the live version** (state, history entry, input, record): the missing object is written as a
   marker, `{"__dormant_lost__": {"object": key}}`, so the actor loads again; the caller (dormant.runtime.doctor)
   then marks it failed, naming what was lost. Older kept versions whose values are all there are listed: a reset
   to one of them brings the actor back as it was then.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from dormant.core.records import ActorRef, InboxMessage
from dormant.dynamodb.items import Head
from dormant.dynamodb.messages import InboxItems
from dormant.dynamodb.ring import Ring
from dormant.dynamodb.versions import kept_heads
from dormant.models import StoredValueProblem, ValueCheck
from dormant.s3.blobs import BlobMissing, S3Blobs
from dormant.s3.large_values import DURABLE, LargeValues
from dormant.s3.offload import refs_in, refs_in_text, sha_of

LOST_MARKER = "__dormant_lost__"


def where_in(version: int, location: str) -> str:
    """How a report names a place of a version that refers to S3 (a history location, or #state, #workflow,
    #meta)."""
    named = {"#state": "the state", "#workflow": "the workflow's record", "#meta": "the actor's input"}
    return f"version {version}: {named.get(location, f'history entry {location!r}')}"


class Doctor:
    """Checks (and repairs) the values of one table's actors kept in S3; `clock`: the store's (when a dropped
    message's tombstone was written)."""

    def __init__(self, ring: Ring, messages: InboxItems, values: LargeValues, clock: Callable[[], float]) -> None:
        self.ring = ring
        self.messages = messages
        self.values = values
        self._now = clock

    async def check_values(self, ref: ActorRef, *, repair: bool) -> ValueCheck | None:
        """See the module docstring. None: no such actor."""
        heads = kept_heads(await self.ring.items(ref))
        if heads is None:
            return None
        newest = heads[-1][0]
        # Every reference, and where it is: kept versions (oldest first), then the live inbox.
        places: dict[str, list[str]] = {}
        for head, _ in heads:
            for location, keys in head.refs.items():
                for key in keys:
                    places.setdefault(key, []).append(where_in(head.version, location))
        inbox = await self.live_inbox(ref, newest)
        for message in inbox:
            for key in refs_in([message.body, message.args]):
                places.setdefault(key, []).append(f"inbox message {message.id}")
        values = self.values
        if values.blobs is None or not places:
            return _report(ref, "intact", len(places), [], [head.version for head, _ in heads], [],
                           "every value of the actor is in its items" if not places else
                           "the actor refers to S3 objects, but this store has no bucket (DORMANT_BUCKET)")
        listed = {listed.key for listed in await values.blobs.list(values.prefix(ref, DURABLE))}
        missing = await _missing(values.blobs, places, listed)
        problems: list[StoredValueProblem] = []
        dropped: list[str] = []
        if missing and repair:
            recovered = await _recover(values.blobs, missing, listed)
            lost = {key: where for key, where in missing.items() if key not in recovered}
            problems += [StoredValueProblem(where=where, object=key, outcome="recovered")
                         for key in recovered for where in missing[key]]
            dropped = sorted({where.removeprefix("inbox message ") for wheres in lost.values() for where in wheres
                              if where.startswith("inbox message ")})
            if dropped:
                await self.drop_messages(ref, dropped, newest.version)
            live = [key for key, wheres in lost.items()
                    if any(w.startswith(f"version {newest.version}:") for w in wheres)]
            if live:  # the actor must load to be marked failed: a marker in each lost value's place
                await values.blobs.put_many({key: json.dumps({LOST_MARKER: {"object": key}}).encode()
                                             for key in live})
            problems += [StoredValueProblem(where=where, object=key, outcome="lost")
                         for key, wheres in lost.items() for where in wheres]
        else:
            problems += [StoredValueProblem(where=where, object=key, outcome="missing")
                         for key, wheres in missing.items() for where in wheres]
        unusable = {int(p.where.split(":")[0].removeprefix("version ")) for p in problems
                    if p.outcome != "recovered" and p.where.startswith("version ")}
        intact = [head.version for head, _ in heads if head.version not in unusable]
        if not missing:
            return _report(ref, "intact", len(places), [], intact, [], f"all {len(places)} S3 reference(s) resolve")
        if not repair:
            return _report(ref, "lost", len(places), problems, intact, [],
                           f"{len(missing)} referenced S3 object(s) are missing: run with repair to recover those "
                           "whose content another object holds")
        lost_count = sum(1 for p in problems if p.outcome == "lost")
        if not lost_count:
            return _report(ref, "repaired", len(places), problems, intact, [],
                           f"{len(missing)} missing S3 object(s) recovered from objects with the same content")
        return _report(ref, "lost", len(places), problems, intact, dropped,
                       f"{lost_count} value(s) have no copy left: " + "; ".join(sorted({p.where for p in problems
                                                                                        if p.outcome == "lost"})))

    async def live_inbox(self, ref: ActorRef, head: Head) -> list[InboxMessage]:
        """The pending messages a load of `head` hands the workflow, as stored (values in S3 not read back)."""
        pending = await self.messages.pending(ref)
        return self.messages.live(ref, pending, head.hidden())[0]

    async def drop_messages(self, ref: ActorRef, message_ids: list[str], version: int) -> None:
        """Take pending messages out of the inbox for good (their tombstones, as a commit consuming them writes)."""
        now = self._now()
        await self.messages.write_tombstones(ref, [(message_id, now) for message_id in message_ids], version)


def _report(ref: ActorRef, outcome: str, references: int, problems: list[StoredValueProblem], intact: list[int],
            dropped: list[str], message: str) -> ValueCheck:
    return ValueCheck.model_validate({"actor": ref.name, "key": list(ref.key), "outcome": outcome,
                                      "references": references, "problems": problems, "intact_versions": intact,
                                      "dropped_messages": dropped, "message": message})


async def _missing(blobs: S3Blobs, places: dict[str, list[str]], listed: set[str]) -> dict[str, list[str]]:
    """key -> where, of each referenced object not in `listed`, the parts named inside present objects included."""
    missing = {key: wheres for key, wheres in places.items() if key not in listed}
    wanted = [(key, wheres) for key, wheres in places.items() if key in listed]
    seen = set(places)
    while wanted:
        key, wheres = wanted.pop()
        try:
            data = (await blobs.get_many([key]))[key]
        except BlobMissing:  # deleted since the listing (a lap of the ring): no longer referred to by a kept version
            continue
        for part in refs_in_text(data.decode()):
            inside = [f"{where} (a part of {key})" for where in wheres]
            if part not in listed:
                missing.setdefault(part, []).extend(inside)
            elif part not in seen:
                seen.add(part)
                wanted.append((part, inside))
    return missing


async def _recover(blobs: S3Blobs, missing: dict[str, list[str]], listed: set[str]) -> set[str]:
    """Restore each missing object whose content another listed object holds (its hash checked); the keys done."""
    by_content: dict[str, list[str]] = {}
    for key in listed:
        by_content.setdefault(sha_of(key), []).append(key)
    recovered: set[str] = set()
    for key in missing:
        sha = sha_of(key)
        for source in sorted(by_content.get(sha, ())):
            try:
                data = (await blobs.get_many([source]))[source]
            except BlobMissing:
                continue
            if hashlib.sha256(data).hexdigest() == sha:
                await blobs.put_many({key: data})
                recovered.add(key)
                break
    return recovered

