"""How long a message id stays a duplicate: the rule every store follows (docs/semantics.md, "Queues").

An id is a duplicate while its message is pending, and for `Settings.dedupe_ttl_seconds` (the window) after the commit
that consumed it, once the actor has committed a snapshot since (dormant.runtime.versions.snapshot_due: the DynamoDB
store writes the tombstones that carry the window with its snapshot commits, and the memory store starts the window at
the same commit); from then on the same id is a new message. Its fingerprint (InboxMessage.fingerprint, what a reused
idempotency key is compared with) is known exactly as long. Times are on the store's clock: the runtime's for
MemoryEventStore (TestEnv's virtual clock), the DynamoDB store's own for its items (a tombstone's `expires_at` is
`dedupe_until` of its consumption, and DynamoDB's TTL deletes it some time after).
"""

from __future__ import annotations

import math

DEDUPE_WINDOW = 7 * 24 * 3600
"""Seconds an id stays a duplicate after its consumption, by default (`Settings.dedupe_ttl_seconds`,
DORMANT_DEDUPE_TTL_SECONDS)."""


def dedupe_until(consumed_at: float, window: float) -> float:
    """When the id of a message consumed at `consumed_at` stops being a duplicate."""
    return consumed_at + window


def dedupe_expiry(consumed_at: float, window: float) -> int:
    """`dedupe_until` as whole epoch seconds (a TTL attribute), never before it."""
    return math.ceil(dedupe_until(consumed_at, window))


def is_duplicate(until: float | None, now: float) -> bool:
    """Whether a stored id is a duplicate at `now`: `until` None while its message is pending, else its
    `dedupe_until` (or `dedupe_expiry`)."""
    return until is None or now < until
