"""The dedupe rule (dormant.core.dedupe) under TestEnv's virtual clock: a consumed message's id (an idempotency key) is
a duplicate, compared with the first request, for `dedupe_ttl_seconds` after the commit that consumed it, and a new
message after that; the memory store follows the runtime's clock (the times its writes carry)."""

from __future__ import annotations

import pytest

from dormant.core.dedupe import DEDUPE_WINDOW, dedupe_until, is_duplicate
from dormant.errors import IdempotencyConflictError
from dormant.memory.store import MemoryEventStore
from dormant.ports import ActorMeta, ActorRef, InboxMessage
from dormant.settings import Settings
from dormant.testing import TestEnv
from dormant.workflow.execution import CommitDraft
from dormant.workflow.history import WorkflowRecord
from examples.counter import registry


def test_the_rule() -> None:
    assert is_duplicate(None, 1e12)  # pending: always
    until = dedupe_until(1000.0, 60)
    assert until == 1060.0
    assert is_duplicate(until, 1059.999) and not is_duplicate(until, 1060.0)
    assert Settings().dedupe_ttl_seconds == DEDUPE_WINDOW  # one default for every store


async def test_an_idempotency_key_is_a_duplicate_for_the_window_then_a_new_message() -> None:
    """In TestEnv as deployed: the window counts from the consuming commit once the actor has committed a snapshot
    since (a ring of 2 here: its next commit), and an actor idle since holds the key until it does."""
    async with TestEnv(registry, store=MemoryEventStore(snapshot_every=2)) as env:
        handle = env.client.get_or_create("workflow-counter", ["k"])
        await handle.send("counter", {"delta": 1}, message_id="key-1")
        await env.run_until_idle()
        assert (await handle.state()).value == 1
        await env.advance(DEDUPE_WINDOW - 60)  # inside the window after its consumption
        await handle.send("counter", {"delta": 1}, message_id="key-1")  # the same request: ignored
        with pytest.raises(IdempotencyConflictError):
            await handle.send("counter", {"delta": 5}, message_id="key-1")  # another request with the key
        await env.run_until_idle()
        assert (await handle.state()).value == 1
        await env.advance(120)  # the window has ended, but the actor committed nothing since: still held
        with pytest.raises(IdempotencyConflictError):
            await handle.send("counter", {"delta": 5}, message_id="key-1")
        await handle.send("counter", {"delta": 10}, message_id="key-2")  # its commit is a snapshot
        await env.run_until_idle()
        assert (await handle.state()).value == 11
        await handle.send("counter", {"delta": 5}, message_id="key-1")  # a new message, whatever its body
        await env.run_until_idle()
        assert (await handle.state()).value == 16


async def test_the_memory_store_keeps_time_by_the_runtimes_writes() -> None:
    store = MemoryEventStore(dedupe_ttl_seconds=100, snapshot_every=2)
    ref = ActorRef(name="n", key=("a",))
    assert await store.create(ref, ActorMeta(name="n", key=("a",), created_at=1000.0), {}, WorkflowRecord(), [])
    first = InboxMessage(id="m", queue="q", body=1, created_at=1000.0)
    assert await store.enqueue(ref, first)
    for version, consumed, at in [(1, ["m"], 1010.0), (2, [], 1011.0)]:  # (the second, a snapshot, starts its window)
        await store.commit(ref, version, CommitDraft(upserts=[], deleted_prefixes=[], state=None,
                                                     consumed_ids=consumed, responses={}, events=[], workflow=None,
                                                     committed_at=at))
    assert not await store.enqueue(ref, InboxMessage(id="m", queue="q", body=2, created_at=1109.0))
    assert await store.message_fingerprint(ref, "m") == first.fingerprint()
    later = InboxMessage(id="m", queue="q", body=3, created_at=1110.0)  # sent when the window has ended
    assert await store.enqueue(ref, later)
    assert await store.message_fingerprint(ref, "m") == later.fingerprint()
    assert store.latest_time() == 1000.0 and store.ref_of(ref.id) == ref


def test_a_fingerprint_hashes_the_canonical_json_it_always_hashed() -> None:
    """Fingerprints are stored (the DynamoDB store's inbox items) and compared with those of later sends: the text
    hashed stays json.dumps' with sorted keys, compact, unescaped (one encoder made once, not one per call)."""
    import hashlib
    import json

    body = {"z": [1, 2.5, None], "a": {"é": "ü", "b": True}}
    message = InboxMessage(id="m", queue="q", body=body, args=["x", {"k": 1}], created_at=0.0)
    canonical = json.dumps(["queue", "q", body, ["x", {"k": 1}]], sort_keys=True, separators=(",", ":"),
                           ensure_ascii=False)
    assert message.fingerprint() == hashlib.sha256(canonical.encode()).hexdigest()[:32]
