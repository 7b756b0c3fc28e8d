"""Every key of the DynamoDB table, in one place: partition and sort-key prefixes, key builders, index names. Nothing
else in dormant.dynamodb spells a prefix (docs/storage.md has the table of item kinds).

An actor's partition (`pk` = ActorRef.id: percent-encoded parts joined by `/`, never a `#`) holds:

| `sk` | item |
|---|---|
| `c#NNN` | a slot of the commit ring (slot 0, `c#000`, holds version 1: the actor exists while it does) |
| `i#<message id>` | an inbox message, pending (in the `pending` index) then a tombstone |
| `r#<message id>` | the response to a completable message |
| `e#<last seq, 12 digits>` | the events of one commit |
| `w#` | the last failed wake-up (in the `pending` index, first: `pq` = `!`) |
| `s#` | the status item (the `status` index) |
| `a#` | the attention mark (the `status` index, under `lt` = `/attention`) |
| `n#<connection id>` | a WebSocket subscription to the actor's events (TTL; dormant.dynamodb.connections) |
| `x#` | the deletion mark: exactly `x#`, nothing after it |
| `x#<attribute>` | a search item (the `search` index) or its tombstone: an attribute name is never empty |

The deletion mark and the search items share the prefix `x#` (both were stored so before this module): the mark is
the one key with nothing after it, and no read of the table takes the prefix alone. Search items are read through
the `search` index, or by their exact keys (`search_key`); the mark by its exact key; a deletion keeps exactly the mark
(`is_deletion_mark`). So nothing may ever Query `begins_with(sk, "x#")` or test `startswith("x#")`: use
`is_search_key`, which tells them apart.

Other partitions, never an actor's (actor ids hold a `/` and no `#`):

| `pk` | `sk` | item |
|---|---|---|
| `callback#<token hash>` | `callback` | a callback's lookup item |
| `limit#<name>` | `s#<slot>`, `t#<window>#<n>`, `w#<since>#<holder>` | a flow-control limit's slots, tickets, waiters |
| `connection#<id>` | `n#<actor id>` | a WebSocket connection's subscriptions, by actor (for its `$disconnect`) |
| `connection#<id>` | `caller` | who the connection is (written at its `$connect`) |
"""

from __future__ import annotations

import hashlib

Key = dict[str, dict[str, str]]

# -- indexes --------------------------------------------------------------------------------------------------------
PENDING_INDEX = "pending"  # local: the inbox in send order (`pq`), and the wake error
STATUS_INDEX = "status"  # global: status items by type and status (`lt`, `ls`), attention marks
SEARCH_INDEX = "search"  # global: search items by attribute and value (`xk`, `xv`)

# -- an actor's partition -------------------------------------------------------------------------------------------
RING_PREFIX = "c#"
INBOX_PREFIX = "i#"
RESPONSE_PREFIX = "r#"
EVENTS_PREFIX = "e#"
WAKE_ERROR = "w#"
WAKE_ERROR_ORDER = "!"  # its `pq`: sorts before every message in the `pending` index
STATUS_SK = "s#"
ATTENTION_SK = "a#"
ATTENTION_TYPE = "/attention"  # the marks' `lt`: never an actor type (names cannot contain "/")
DELETION_MARK = "x#"
SUBSCRIPTION_PREFIX = "n#"
SEARCH_PREFIX = "x#"  # followed by the attribute's name (see the module docstring)

# -- other partitions -----------------------------------------------------------------------------------------------
CALLBACK_PARTITION = "callback#"
CALLBACK_SK = "callback"
LIMIT_PARTITION = "limit#"
CONNECTION_PARTITION = "connection#"
CONNECTION_CALLER = "caller"
KEYED_LIMIT = "#k#"  # limit names never hold `#`: `limit#<name>` and a key's `limit#<name>#k#<hash>` never clash
SLOT_PREFIX, TICKET_PREFIX, WAITER_PREFIX = "s#", "t#", "w#"


def item_key(pk: str, sk: str) -> Key:
    """The primary key of an item."""
    return {"pk": {"S": pk}, "sk": {"S": sk}}


# -- the commit ring ------------------------------------------------------------------------------------------------
def ring_key(version: int, ring: int) -> str:
    """The slot of `version` in a ring of `ring` slots."""
    return f"{RING_PREFIX}{(version - 1) % ring:03d}"


SLOT_ZERO = ring_key(1, 1)  # version 1's slot: present while the actor exists (or a deletion's marker)


# -- the inbox, responses, events -------------------------------------------------------------------------------------
def inbox_key(message_id: str) -> str:
    return INBOX_PREFIX + message_id


def message_id_of(sort_key: str) -> str:
    """The message id of an inbox item's sort key."""
    return sort_key[len(INBOX_PREFIX):]


def inbox_order(order_ns: int, message_id: str) -> str:
    """A pending item's `pq` (the `pending` index's sort key): its send-order stamp, then its id."""
    return f"{order_ns:020d}#{message_id}"


def response_key(message_id: str) -> str:
    return RESPONSE_PREFIX + message_id


def events_key(last_seq: int) -> str:
    """The events item of a commit whose last event is `last_seq`."""
    return f"{EVENTS_PREFIX}{last_seq:012d}"


def events_after(seq: int) -> tuple[str, str]:
    """The sort-key range (BETWEEN) of the events items that may hold events after `seq`."""
    return events_key(seq + 1), f"{EVENTS_PREFIX}~"


# -- WebSocket subscriptions ----------------------------------------------------------------------------------------
def subscription_key(connection_id: str) -> str:
    """In the actor's partition: the subscription of one connection."""
    return SUBSCRIPTION_PREFIX + connection_id


def connection_partition(connection_id: str) -> str:
    """The partition listing one connection's subscriptions (sort key: `subscription_key(actor id)`)."""
    return CONNECTION_PARTITION + connection_id


# -- search items ---------------------------------------------------------------------------------------------------
def search_key(attribute: str) -> str:
    """The search item of an attribute (never the deletion mark: a name is never empty)."""
    if not attribute:
        raise ValueError("a search attribute's name is never empty (its item would be the deletion mark)")
    return SEARCH_PREFIX + attribute


def is_search_key(sort_key: str) -> bool:
    return sort_key.startswith(SEARCH_PREFIX) and sort_key != DELETION_MARK


def attribute_of(sort_key: str) -> str:
    """The attribute name of a search item's sort key."""
    return sort_key[len(SEARCH_PREFIX):]


def is_deletion_mark(sort_key: str) -> bool:
    return sort_key == DELETION_MARK


# -- callbacks and limits --------------------------------------------------------------------------------------------
def callback_key(token_hash: str) -> Key:
    """The lookup item of the callback whose token hashes to `token_hash`: the key holds the hash, never the token."""
    return item_key(CALLBACK_PARTITION + token_hash, CALLBACK_SK)


def limit_partition(limit: str, key: str | None = None) -> dict[str, str]:
    """The partition of a limit's items, or of one key's of a keyed limit: `limit#<name>#k#<hash of the key>` (the
    hash bounds it and keeps `/`, which only actor ids hold, out of it; the key itself is in the slot items)."""
    if key is None:
        return {"S": LIMIT_PARTITION + limit}
    return {"S": f"{LIMIT_PARTITION}{limit}{KEYED_LIMIT}{hashlib.sha256(key.encode()).hexdigest()[:32]}"}


def slot_key(index: int) -> str:
    return f"{SLOT_PREFIX}{index:05d}"


def slot_index(sort_key: str) -> int:
    return int(sort_key[len(SLOT_PREFIX):])


def ticket_prefix(window: int) -> str:
    """The tickets of one rate window (`ticket_key` appends each one's number)."""
    return f"{TICKET_PREFIX}{window:012d}#"


def ticket_key(prefix: str, ticket: int) -> str:
    return f"{prefix}{ticket:06d}"


def waiter_key(rank: float, holder_hash: str) -> str:
    """A waiter of a limit's line, in rank order (dormant.core.slots.line_rank: at the default priority, when it
    began waiting, as before priorities)."""
    return f"{WAITER_PREFIX}{rank:020.6f}#{holder_hash}"
