"""The DynamoDB store's large values: what goes to S3, what comes back, and when objects are deleted.

- **Out.** Before a commit, a send's wake-up or an actor's creation is written, every value whose JSON is over
  `Settings.offload_threshold_bytes` becomes an S3 object and the items keep a reference (dormant.s3.offload). The
  objects are written first, so an item never refers to an object that is not there. A value over the per-value
  ceiling (dormant.core.limits.VALUE) is refused before anything is written.
- **Back.** A load fetches the objects its live version and live inbox refer to, concurrently, through a bounded
  cache of immutable objects (dormant.s3.blobs): one GET per object per warm process, none for an object the
  process wrote itself.
- **Owned.** Every object has exactly one owner, named in its key: the stored message that carried it
  (`<sha>-m<random>`: each stored message's objects are its own, even when two messages carry the same content), or
  the actor's versions (`<sha>-v<version that first stored it>`). A version refers again only to objects its base
  version refers to (its known content) and to those of the messages its own commit consumes: a consumed message
  leaves the inbox in that commit, so its objects pass from the message to the versions, and nothing else can
  refer to them. (Referring to another pending message's object, as the inbox's content map once did, let a
  version release an object that message still needed: issue 26.) A big value made of big parts is an object that
  names its parts; parts have keys of their own (`p/<sha>-<owner>`), never an item's, and are referred to again
  only by a version whose objects already name them.
- **Deleted.** A commit records the objects its version no longer refers to (`r` on its commit item). They are deleted
  by the commit that overwrites that slot of the ring, a full lap later: no version a reader can still load refers to
  them then, and a reader holding an older one reads again (`BlobMissing`). By the ownership rule no later version or
  message can refer to a released object; the deletion also skips any the newest version or the inbox this process saw
  refer to, as a second guard. Objects nothing refers to (a commit that lost its race, a wake-up killed after writing
  them, the parts of a deleted object made of parts) are swept every `blob_sweep_every` versions (whether or not the
  newest refers to anything): the actor's prefix is listed and objects that no kept version, pending message or object
  they refer to names, older than `blob_orphan_grace_seconds`, are deleted. Deleting an actor deletes its prefixes;
  `dormant doctor` checks an actor's references against the bucket and repairs what it can.
- **Responses and events** go under `ephemeral/`: their items expire after a day, and so do their objects (a
  lifecycle rule deployed, the sweep locally).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from typing import Any

from dormant.core.limits import VALUE, draft_sizes, value_too_large
from dormant.core.records import ActorRef, EventRecord, InboxMessage
from dormant.s3.blobs import BlobMissing, S3Blobs
from dormant.s3.offload import (
    Offloaded,
    Offloader,
    nested_refs,
    refs_in,
    refs_in_text,
    resolve,
    sha_of,
    stored_size,
)
from dormant.settings import Settings
from dormant.workflow.execution import CommitDraft

log = logging.getLogger("dormant.s3.large_values")
DURABLE, EPHEMERAL = "actors/", "ephemeral/"
_DAY = 24 * 3600
_PARTS = "p/"  # under an actor's prefix: objects only other objects name (dormant.s3.offload.Offloader)
_PARTS_KEPT = 100_000
PendingTexts = Callable[[], Awaitable[list[str]]]  # the JSON of the actor's pending inbox items
_HEADER_FIELDS = frozenset({"location", "kind", "name", "seq", "status", "attempts", "retry_at", "deadline",
                            "iteration", "timed_out", "winner", "removed_kind", "created_at", "updated_at",
                            "rollback_done"})


def actor_hash(ref: ActorRef) -> str:
    return hashlib.sha256(ref.id.encode()).hexdigest()[:32]


class LargeValues:
    """The S3 side of one DynamoEventStore (see the module docstring); `blobs` None: nothing is offloaded."""

    def __init__(self, blobs: S3Blobs | None, settings: Settings, *, clock: Callable[[], float] = time.time) -> None:
        """`clock`: the store's (a sweep compares the objects' ages with it)."""
        self.blobs = blobs
        self._now = clock
        self.threshold = settings.offload_threshold_bytes
        self.sweep_every = settings.blob_sweep_every
        self.grace = settings.blob_orphan_grace_seconds
        self.ephemeral_age = max(settings.response_ttl_seconds, settings.event_ttl_seconds) + _DAY
        # actor id -> message id -> (content hash -> key) of the objects the items of its pending messages name, as
        # seen on loads: a commit that consumes one of them refers to those (they pass to the actor's versions)
        self._inbox_known: dict[str, dict[str, dict[str, str]]] = {}
        # object made of parts -> the keys of its parts (immutable: the key names the content), as this process
        # wrote or read them; bounded
        self._parts: OrderedDict[str, tuple[str, ...]] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.blobs is not None

    def prefix(self, ref: ActorRef, kind: str = DURABLE) -> str:
        return f"{kind}{actor_hash(ref)}/"

    # -- out -----------------------------------------------------------------------------------------------
    async def prepare_message(self, ref: ActorRef, message: InboxMessage) -> InboxMessage:
        """The message as it is stored and carried: big body or arguments in S3 (written now)."""
        if not self.enabled:
            return message
        # A new owner per stored message (not per id: an id may come back once its dedupe window ends, while the
        # versions still hold, and may delete, the objects of its first use).
        origin = f"m{uuid.uuid4().hex[:16]}"
        offloader = self._offloader(ref, origin, DURABLE, {})
        body = self._store(ref, offloader, message.body, "the message body")
        args = self._store(ref, offloader, message.args, "the action's arguments")
        if not (body.objects or args.objects):
            return message  # (nothing goes to S3: the message as it is, references it holds, a carried one's, too)
        await self._put(body, args)
        return message.model_copy(update={"body": body.value, "args": args.value})

    async def prepare_input(self, ref: ActorRef, value: Any) -> Any:
        """An actor's input as it is stored and carried."""
        if not self.enabled:
            return value
        offloader = self._offloader(ref, f"i{uuid.uuid4().hex[:16]}", DURABLE, {})  # (the actor's, as a message's)
        stored = self._store(ref, offloader, value, "the actor's input")
        await self._put(stored)
        return stored.value

    async def store_draft(self, ref: ActorRef, base_content: Mapping[str, str], base_refs: Iterable[str],
                          version: int, draft: CommitDraft) -> CommitDraft:
        """`draft`, a commit of `version`, with its values in stored form; the new objects are written before this
        returns. Its base version refers to `base_refs`, whose content hashes name them in `base_content`."""
        if not self.enabled:
            return draft
        inbox = self._inbox_known.get(ref.id, {})
        # (forgotten once consumed: what no longer is in the inbox must not keep the lap's deletion from them)
        consumed = [inbox.pop(mid) for mid in draft.consumed_ids if mid in inbox]
        known = {sha: key for objects in consumed for sha, key in objects.items()}
        known.update(base_content)
        # Parts are referred to again only where an object this version keeps names them: they live as long as it.
        parts = self.parts_of([*base_refs, *(key for objects in consumed for key in objects.values())])
        known_parts = {sha_of(key): key for key in parts if _PARTS in key}  # (older parts may be top objects too)
        durable = self._offloader(ref, f"v{version}", DURABLE, known, known_parts)
        ephemeral = self._offloader(ref, f"v{version}", EPHEMERAL, {})
        results: list[Offloaded] = []
        sizes = draft_sizes(draft)  # (the engine measured them once: a value within the threshold stays as it is)

        def keep(value: Any, what: str, offloader: Offloader = durable) -> Any:
            stored = self._store(ref, offloader, value, what)
            results.append(stored)
            return stored.value

        def kept(value: Any, size: int, what: str, offloader: Offloader = durable) -> Any:
            return value if size <= self.threshold else keep(value, what, offloader)

        upserts = [self._entry(entry, keep) if size > self.threshold else entry
                   for entry, size in zip(draft.upserts, sizes.upserts, strict=True)]
        state = kept(draft.state, sizes.state, "the state") if draft.state is not None else None
        workflow = draft.workflow
        if workflow is not None and workflow.output is not None:
            workflow = workflow.model_copy(update={"output": keep(workflow.output, "the workflow's result")})
        responses = {mid: kept(value, size, "a response", ephemeral)
                     for (mid, value), size in zip(draft.responses.items(), sizes.responses, strict=True)}
        events = [(name, kept(payload, size, f"the payload of event {name!r}", ephemeral))
                  for (name, payload), size in zip(draft.events, sizes.events, strict=True)]
        await self._put(*results)
        self._learn(part for result in results for part in result.containers.items())
        # (replace: every other field of the draft — search changes, callbacks... — is carried as it is)
        return dataclasses.replace(draft, upserts=upserts, state=state, responses=responses, events=events,
                                   workflow=workflow)

    async def store_creation(self, ref: ActorRef, state: dict[str, Any], events: list[tuple[str, Any]]
                             ) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
        """Version 1's state and events (on_create's) in stored form, written first."""
        if not self.enabled:
            return state, events
        durable, ephemeral = self._offloader(ref, "v1", DURABLE, {}), self._offloader(ref, "v1", EPHEMERAL, {})
        stored_state = self._store(ref, durable, state, "the state")
        stored_events = [(name, self._store(ref, ephemeral, payload, f"the payload of event {name!r}"))
                         for name, payload in events]
        await self._put(stored_state, *(stored for _, stored in stored_events))
        return stored_state.value, [(name, stored.value) for name, stored in stored_events]

    def _estimate(self, ref: ActorRef, value: Any, what: str) -> Any:
        """A stand-in of `value`'s stored size (no hashing, nothing written); ItemTooLargeError over the ceiling."""
        size, total = stored_size(value, self.threshold)
        if total > VALUE.maximum:
            raise value_too_large(ref.name, what, total)
        return value if size == total else {"__estimate__": "x" * max(0, size - 20)}

    def check_message(self, ref: ActorRef, message: InboxMessage) -> InboxMessage:
        """The message as it would be stored, for sizing (EventStore.check_message)."""
        if not self.enabled:
            return message
        body, args = self._estimate(ref, message.body, "the message body"), self._estimate(ref, message.args,
                                                                                           "the action's arguments")
        if body is message.body and args is message.args:
            return message
        return message.model_copy(update={"body": body, "args": args})

    def check_creation(self, ref: ActorRef, meta: Any, state: dict[str, Any], events: list[tuple[str, Any]]
                       ) -> tuple[Any, dict[str, Any], list[tuple[str, Any]]]:
        """Version 1 as it would be stored, for sizing (EventStore.check_creation)."""
        if not self.enabled:
            return meta, state, events
        return (meta.model_copy(update={"input": self._estimate(ref, meta.input, "the actor's input")}),
                self._estimate(ref, state, "the state"),
                [(name, self._estimate(ref, payload, "an event payload")) for name, payload in events])

    def check_draft(self, ref: ActorRef, draft: CommitDraft) -> CommitDraft:
        """What `store_draft` would store, sized without hashing or writing (EventStore.check_commit): values in S3
        replaced by references of the largest size; raises ItemTooLargeError over the per-value ceiling."""
        if not self.enabled:
            return draft

        sizes = draft_sizes(draft)  # (the engine measured them once: a value within the threshold stays as it is)

        def estimate(value: Any, what: str) -> Any:
            return self._estimate(ref, value, what)

        def estimated(value: Any, size: int, what: str) -> Any:
            return value if size <= self.threshold else self._estimate(ref, value, what)

        return dataclasses.replace(
            draft, upserts=[self._entry(entry, estimate) if size > self.threshold else entry
                            for entry, size in zip(draft.upserts, sizes.upserts, strict=True)],
            state=estimated(draft.state, sizes.state, "the state") if draft.state is not None else None,
            responses={mid: estimated(value, size, "a response")
                       for (mid, value), size in zip(draft.responses.items(), sizes.responses, strict=True)},
            events=[(name, estimated(payload, size, "an event payload"))
                    for (name, payload), size in zip(draft.events, sizes.events, strict=True)])

    @staticmethod
    def _entry(entry: dict[str, Any], keep: Any) -> dict[str, Any]:
        """A history entry with its value fields (output, messages, loop state, branches, errors) in stored form;
        the fields the store reads (location, kind...) stay as they are."""
        return {field: value if field in _HEADER_FIELDS else keep(value, f"history entry {entry['location']!r}")
                for field, value in entry.items()}

    def _offloader(self, ref: ActorRef, origin: str, kind: str, known: dict[str, str],
                   known_parts: dict[str, str] | None = None) -> Offloader:
        prefix = self.prefix(ref, kind)
        return Offloader(self.threshold, lambda sha: f"{prefix}{sha}-{origin}", known,
                         part_key_for=lambda sha: f"{prefix}{_PARTS}{sha}-{origin}", known_parts=known_parts or {})

    def _learn(self, containers: Iterable[tuple[str, tuple[str, ...]]]) -> None:
        for key, parts in containers:
            self._parts[key] = parts
            self._parts.move_to_end(key)
        while len(self._parts) > _PARTS_KEPT:
            self._parts.popitem(last=False)

    def parts_of(self, keys: Iterable[str]) -> set[str]:
        """Every part the objects `keys` name, transitively, as far as this process knows them."""
        found: set[str] = set()
        wanted = [key for key in keys if key in self._parts]
        while wanted:
            for part in self._parts[wanted.pop()]:
                if part not in found:
                    found.add(part)
                    if part in self._parts:
                        wanted.append(part)
        return found

    @staticmethod
    def _store(ref: ActorRef, offloader: Offloader, value: Any, what: str) -> Offloaded:
        stored = offloader.store(value)
        if stored.largest > VALUE.maximum:
            raise value_too_large(ref.name, what, stored.largest)
        return stored

    async def _put(self, *results: Offloaded) -> None:
        objects = {key: data for result in results for key, data in result.objects.items()}
        if objects and self.blobs is not None:
            await self.blobs.put_many(objects)

    # -- back ----------------------------------------------------------------------------------------------
    async def fetch(self, keys: Iterable[str]) -> dict[str, Any]:
        """key -> parsed value of each object (and of the objects those refer to). BlobMissing if one is gone."""
        fetched: dict[str, Any] = {}
        wanted = list(dict.fromkeys(keys))
        while wanted:
            if self.blobs is None:
                raise BlobMissing("a stored value refers to S3, but this store has no bucket (DORMANT_BUCKET)")
            data = await self.blobs.get_many(wanted)
            parsed = {key: json.loads(raw) for key, raw in data.items()}
            fetched.update(parsed)
            containers = [(key, tuple(refs_in(value))) for key, value in parsed.items()]
            self._learn((key, parts) for key, parts in containers if parts)
            wanted = [key for key in nested_refs(parsed.values()) if key not in fetched]
        return fetched

    async def resolve(self, value: Any) -> Any:
        keys = refs_in(value)
        return resolve(value, await self.fetch(keys)) if keys else value

    async def resolve_events(self, records: list[EventRecord]) -> list[EventRecord]:
        if not self.enabled:
            return records
        return [record.model_copy(update={"payload": await self.resolve(record.payload)}) for record in records]

    async def resolve_inbox(self, ref: ActorRef, inbox: list[InboxMessage], *, whole: bool = True
                            ) -> list[InboxMessage]:
        """The inbox messages with their bodies and arguments read back; remembers each message's objects (the
        commit that consumes it refers to them instead of storing the content again). `whole`: `inbox` is the
        whole live inbox (a load), so what is remembered of messages not in it is forgotten; else (a running
        wake-up's look for new messages) it is added to."""
        known: dict[str, dict[str, str]] = {} if whole else dict(self._inbox_known.get(ref.id, {}))
        resolved: list[InboxMessage] = []
        for message in inbox:
            keys = refs_in([message.body, message.args])
            if not keys:
                resolved.append(message)
                continue
            fetched = await self.fetch(keys)
            known[message.id] = {sha_of(key): key for key in keys}  # (its parts: through self._parts)
            resolved.append(message.model_copy(update={"body": resolve(message.body, fetched),
                                                       "args": resolve(message.args, fetched)}))
        if known:
            self._inbox_known[ref.id] = known
        else:
            self._inbox_known.pop(ref.id, None)
        return resolved

    async def nested_keys(self, keys: Iterable[str]) -> set[str]:
        """The keys of the parts that the objects `keys` (and their parts) name, read through the cache; an object
        that is gone names nothing (a version a lap behind may have lost one: it is not loadable any more)."""
        assert self.blobs is not None
        seen: set[str] = set()
        wanted = list(dict.fromkeys(keys))
        found: set[str] = set()
        while wanted:
            seen.update(wanted)
            got = await asyncio.gather(*(self.blobs.get_many([key]) for key in wanted), return_exceptions=True)
            data = [raw for result in got if isinstance(result, dict) for raw in result.values()]
            failed = [result for result in got if isinstance(result, BaseException) and not isinstance(
                result, BlobMissing)]
            if failed:
                raise failed[0]
            parts = {part for raw in data for part in refs_in_text(raw.decode())}
            found |= parts
            wanted = [part for part in parts if part not in seen]
        return found

    async def fetch_all(self, keys: Collection[str]) -> dict[str, Any]:
        """Every object a version refers to (`keys`), fetched (concurrently); nothing to do for none."""
        return await self.fetch(keys) if keys else {}

    # -- deleted -------------------------------------------------------------------------------------------
    @staticmethod
    def released(before: Collection[str], after: Collection[str]) -> tuple[str, ...]:
        """Objects a base version refers to (`before`) and the version a commit makes on it (`after`) no longer
        does."""
        if not before:
            return ()
        return tuple(sorted(key for key in before if key not in after))

    async def after_commit(self, ref: ActorRef, version: int, refs: set[str], ring_released: set[str],
                           lapped: tuple[str, ...], pending_texts: PendingTexts | None = None) -> None:
        """After the commit of `version`, which refers to `refs` (and whose ring's older versions may still refer to
        `ring_released`): delete the objects released a lap ago (`lapped`); every `sweep_every` versions, sweep the
        actor's prefixes. Failures are logged, never raised: the commit is durable, and the next sweep retries."""
        if self.blobs is None:
            return
        if lapped:  # (a second guard: by the ownership rule, nothing can refer to them again)
            referred = set(refs)
            referred.update(key for keys in self._inbox_known.get(ref.id, {}).values() for key in keys.values())
            referred |= self.parts_of(referred)
            kept = [key for key in lapped if key in referred]
            if kept:
                log.error("not deleting %d released S3 object(s) of %s that version %d or its inbox still refers "
                          "to: %s (please report this)", len(kept), ref, version, ", ".join(kept))
                lapped = tuple(key for key in lapped if key not in referred)
        try:
            if lapped:
                await self.blobs.delete_many(lapped)
            if version % self.sweep_every == 0:  # (orphans may outlive the last reference: sweep regardless)
                await self.sweep(ref, refs, ring_released, pending_texts)
        except Exception as error:
            log.warning("cleaning up S3 objects of %s after version %d failed (the next sweep retries): %s", ref,
                        version, error)

    async def sweep(self, ref: ActorRef, refs: set[str], ring_released: set[str],
                    pending_texts: PendingTexts | None = None) -> int:
        """Delete the actor's objects that nothing refers to (not the newest version: `refs`, nor older versions in
        the ring: `ring_released`) and that are older than the grace period, and its ephemeral objects past their
        items' time to live. Returns how many were deleted."""
        assert self.blobs is not None
        now = self._now()
        reachable = refs | ring_released
        texts = await pending_texts() if pending_texts is not None else []
        for text in texts:
            reachable.update(refs_in_text(text))
        durable = [o.key for o in await self.blobs.list(self.prefix(ref)) if o.key not in reachable
                   and now - o.modified >= self.grace]
        if durable:  # an object made of parts names them only in its own content: read the reachable ones
            reachable |= await self.nested_keys(reachable)
            durable = [key for key in durable if key not in reachable]
        ephemeral = [o.key for o in await self.blobs.list(self.prefix(ref, EPHEMERAL))
                     if now - o.modified >= self.ephemeral_age]
        if durable or ephemeral:
            await self.blobs.delete_many([*durable, *ephemeral])
            log.info("swept %d unreferenced and %d expired S3 object(s) of %s", len(durable), len(ephemeral), ref)
        return len(durable) + len(ephemeral)

    async def delete_actor(self, ref: ActorRef) -> None:
        """Every object of the actor (its items are gone or going: nothing can refer to them)."""
        if self.blobs is None:
            return
        for kind in (DURABLE, EPHEMERAL):
            listed = await self.blobs.list(self.prefix(ref, kind))
            await self.blobs.delete_many(o.key for o in listed)
        self._inbox_known.pop(ref.id, None)

