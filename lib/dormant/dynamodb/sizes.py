"""The DynamoDB store's size checks (dormant.core.limits): every item is sized before it is sent, the way DynamoDB
counts it, so what the server would refuse is refused here first, naming the limit and the biggest part, with
nothing written. No I/O."""

from __future__ import annotations

from typing import Any

from dormant.core.limits import INDEXED_ITEM, ITEM, MESSAGE_ID, RECORD_ROOM, SORT_KEY, ServiceLimit
from dormant.core.records import ActorRef
from dormant.dynamodb.items import ITEM_LIMIT, Head, Parts, Side, item_size, json_size, too_large
from dormant.errors import InvalidMessageIdError

SNAPSHOT_OVERHEAD = 256  # a snapshot item's keys, attributes and JSON framing around its parts


class SizeChecks:
    """The checks, at `item_limit` bytes per item (tests raise it to reach a server's own check)."""

    def __init__(self, item_limit: int = ITEM_LIMIT) -> None:
        self.item_limit = item_limit

    def item(self, ref: ActorRef, what: str, item: dict[str, dict[str, Any]], parts: Parts,
             *, limit: ServiceLimit = ITEM) -> None:
        """`item` as a whole within `limit` (scaled when `item_limit` was raised); `parts` named only if it is not."""
        size = item_size(item)
        if size > limit.maximum * self.item_limit // ITEM_LIMIT:
            raise too_large(ref, what, size, parts, limit)

    def message_item(self, ref: ActorRef, item: dict[str, dict[str, Any]], parts: Parts) -> None:
        """An inbox item: its keys within the sort key limit; the item within INDEXED_ITEM, since it carries the
        `pending` index's key and DynamoDB stores and counts it twice."""
        for key in ("sk", "pq"):  # the service checks caller-given ids first; this guards every other id
            if len(item[key]["S"].encode()) > SORT_KEY.maximum:
                raise InvalidMessageIdError(f"the message id makes the inbox item's {key} longer than a "
                                            f"{SORT_KEY.name} may be ({MESSAGE_ID.name}: {MESSAGE_ID.describe()})")
        self.item(ref, "the message", item, parts, limit=INDEXED_ITEM)

    def live(self, ref: ActorRef, head: Head, side: Side, base: Head | None,
             side_parts: list[tuple[str, int]] | None = None) -> None:
        """Every version must be able to become a snapshot, so the commit that makes the live history too big is
        the one refused (not some later, unrelated one). Counted uncompressed: a snapshot always fits.

        `head` is the version a commit on `base` makes (None: the first). The room kept for a failure (RECORD_ROOM)
        is left free unless the commit `adds_only_a_record`: so everything but the workflow record always fits
        within `item_limit` - RECORD_ROOM (a commit that adds nothing else cannot grow it), and a record of at most
        RECORD_ROOM always fits beside it (dormant.runtime.wake.failure_mark builds one)."""
        side_parts = side_parts_of(side) if side_parts is None else side_parts  # (the commit's, made already)
        full_size = head.full_bytes() + sum(size for _, size in side_parts) + SNAPSHOT_OVERHEAD
        if adds_only_a_record(base, head, side):
            if full_size > self.item_limit:  # only a history stored before the room was kept can get here
                raise too_large(ref, f"the live history and state of version {head.version}", full_size,
                                head.full_parts() + side_parts)
        elif full_size + RECORD_ROOM.maximum > self.item_limit:
            raise too_large(ref, f"the live history and state of version {head.version} (with the "
                                 f"{RECORD_ROOM.maximum:,} bytes kept free to record a failure)",
                            full_size + RECORD_ROOM.maximum, head.full_parts() + side_parts)


def adds_only_a_record(base: Head | None, head: Head, side: Side) -> bool:
    """Whether the commit that makes `head` from `base` may use the room kept for a failure (dormant.core.limits,
    RECORD_ROOM): it adds no response or event, everything of its live history but the workflow record takes no
    more bytes than in `base` (entries changed in place may shrink, none may grow), and its record is at most
    RECORD_ROOM bytes."""
    return (base is not None and not side.responses and not side.events
            and head.workflow_bytes <= RECORD_ROOM.maximum
            and head.full_bytes() - head.workflow_bytes <= base.full_bytes() - base.workflow_bytes)


def side_parts_of(side: Side) -> list[tuple[str, int]]:
    """(what, bytes) of a commit's responses and events, for size errors."""
    parts = [(f"the response to message {mid!r}", json_size(r)) for mid, r in side.responses.items()]
    if side.events:
        parts.append(("the events of this commit", json_size(side.events)))
    return parts
