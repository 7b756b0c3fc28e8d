"""How a search reads an index of search attributes: the sortable encoding of values, the plan (which condition is
read from the index, which only filter what it reads) and the cursor. Both stores use it, so both give the same
order and take the same cursors' meaning. No I/O (docs/storage.md, "Search attributes").

An actor's value of one attribute is indexed under the partition `<actor type>#<attribute>#<type code>` and the
sort key `<value, encoded>!<16 hex digits of the actor id's hash>`. The encoding sorts as the values do: a string
is its UTF-8 bytes in hex (byte order is code point order, as Python compares strings), an int is offset binary
(`value + 2**63`, 16 hex digits), a float is its IEEE-754 bits with the sign bit flipped (all bits, for a negative
one), a datetime is its microseconds since the epoch as an int, a bool is `0` or `1`. `!` sorts below every hex
digit and `~` above, so every condition is one key range: `= v` is `[v!, v!~]`, `> v` is `(v!~, ...]`, `< v` is
`[..., v!)`, `^= p` is `[p, p~]`, and several conditions on one attribute are the intersection of theirs.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import quote

from dormant.core.limits import ACTOR_ID, SORT_KEY, utf8_size
from dormant.core.search import Condition, Stored, comparable
from dormant.errors import InvalidCursorError

SEPARATOR, ABOVE = "!", "~"
HASH_DIGITS = 16
_OFFSET = 2**63
_MASK = 2**64 - 1
_KEY = re.compile(r"[0-9a-f]*![0-9a-f]{16}")
T = TypeVar("T")


def encode(code: str, value: object) -> str:
    """The value (JSON form) as text that sorts as the values do (see the module docstring)."""
    if code == "s":
        assert isinstance(value, str)
        return value.encode("utf-8").hex()
    if code == "b":
        return "1" if value else "0"
    if code == "f":
        assert isinstance(value, (int, float))
        (bits,) = struct.unpack(">Q", struct.pack(">d", float(value) + 0.0))
        return f"{(~bits & _MASK) if bits >> 63 else bits | (1 << 63):016x}"
    number = comparable(code, value)  # an int, or a datetime's microseconds
    assert isinstance(number, int)
    return f"{number + _OFFSET:016x}"


def actor_hash(actor_id: str) -> str:
    """16 hex digits of the actor id's SHA-256: keeps index keys unique and short whatever the id's length."""
    return hashlib.sha256(actor_id.encode("utf-8")).hexdigest()[:HASH_DIGITS]


def index_key(code: str, value: object, actor_id: str) -> str:
    return f"{encode(code, value)}{SEPARATOR}{actor_hash(actor_id)}"


def index_partition(actor_type: str, attribute: str, code: str) -> str:
    """One attribute of one actor type, of one type: a retyped attribute's old values live elsewhere."""
    return f"{quote(actor_type, safe='')}#{attribute}#{code}"


_RANK_EQUAL, _RANK_PREFIX, _RANK_BETWEEN, _RANK_FLAG, _RANK_ONE_SIDED, _RANK_ANY = range(6)


def _bounds(condition: Condition) -> tuple[str | None, str | None]:
    """The index key range of one condition (inclusive bounds; None: unbounded)."""
    value = encode(condition.code, condition.value)
    match condition.op:
        case "=":
            return value + SEPARATOR, value + SEPARATOR + ABOVE
        case ">=":
            return value + SEPARATOR, None
        case ">":
            return value + SEPARATOR + ABOVE, None
        case "<=":
            return None, value + SEPARATOR + ABOVE
        case "<":
            return None, value + SEPARATOR
    if not value:  # ^= "" (starts with nothing): every value; DynamoDB takes no empty key value anyway
        return None, None
    return value, value + ABOVE  # ^= (starts with)


def _rank(conditions: Sequence[Condition]) -> int:
    ops = {c.op for c in conditions}
    if "=" in ops:
        return _RANK_FLAG if conditions[0].code == "b" else _RANK_EQUAL
    if "^=" in ops:
        return _RANK_PREFIX if any(c.op == "^=" and c.value for c in conditions) else _RANK_ANY
    lower, upper = ops & {">", ">="}, ops & {"<", "<="}
    return _RANK_BETWEEN if lower and upper else _RANK_ONE_SIDED


@dataclass(frozen=True)
class SearchPlan:
    """A search of one actor type: the attribute whose index range is read (`low`..`high`, inclusive; None:
    unbounded) and every condition, checked on each actor's copy of its attributes."""

    actor_type: str
    attribute: str
    code: str
    low: str | None
    high: str | None
    conditions: tuple[Condition, ...]

    @property
    def partition(self) -> str:
        return index_partition(self.actor_type, self.attribute, self.code)

    @property
    def empty(self) -> bool:
        """The conditions on the indexed attribute contradict each other: nothing can match, nothing is read."""
        return self.low is not None and self.high is not None and self.low > self.high

    def admits(self, key: str) -> bool:
        return (self.low is None or key >= self.low) and (self.high is None or key <= self.high)

    def matches(self, attributes: Mapping[str, Stored]) -> bool:
        return all(condition.holds(attributes.get(condition.attribute)) for condition in self.conditions)

    def key_of(self, actor_id: str, attributes: Mapping[str, Stored]) -> str | None:
        """The actor's key in the index this plan reads, None when it has no value of that attribute and type."""
        found = attributes.get(self.attribute)
        if found is None or found[0] != self.code:
            return None
        return index_key(self.code, found[1], actor_id)

    def cursor(self, key: str, actor_id: str) -> str:
        """Where a page stopped: the attribute read, the last key read and its actor."""
        return json.dumps([self.attribute, key, actor_id], ensure_ascii=False, separators=(",", ":"))

    def read_cursor(self, cursor: str) -> tuple[str, str]:
        """(key, actor id) of a cursor this search handed out; InvalidCursorError for any other."""
        refused = InvalidCursorError("the cursor was not handed out by this search (pass back the `cursor` of the "
                                     "previous page unchanged, with the same actor type and conditions)")
        try:
            attribute, key, actor_id = json.loads(cursor)
        except (ValueError, TypeError, RecursionError):
            raise refused from None
        if (attribute != self.attribute or not isinstance(key, str) or not isinstance(actor_id, str)
                or utf8_size(key) > SORT_KEY.maximum or not _KEY.fullmatch(key) or not self.admits(key)):
            raise refused
        prefix = quote(self.actor_type, safe="") + "/"
        if not actor_id.startswith(prefix) or len(actor_id) == len(prefix) or utf8_size(actor_id) > ACTOR_ID.maximum:
            raise refused
        return key, actor_id


def plan_search(actor_type: str, conditions: Sequence[Condition]) -> SearchPlan:
    """Read the most selective attribute from the index (an equality, then a prefix, a two-sided range, an equality
    of a bool, a one-sided range; ties: the first given) and filter on every condition."""
    groups: dict[str, list[Condition]] = {}
    for condition in conditions:
        groups.setdefault(condition.attribute, []).append(condition)
    attribute = min(groups, key=lambda name: (_rank(groups[name]), list(groups).index(name)))
    low: str | None = None
    high: str | None = None
    for condition in groups[attribute]:
        lower, upper = _bounds(condition)
        if lower is not None and (low is None or lower > low):
            low = lower
        if upper is not None and (high is None or upper < high):
            high = upper
    return SearchPlan(actor_type=actor_type, attribute=attribute, code=groups[attribute][0].code, low=low, high=high,
                      conditions=tuple(conditions))


def select(plan: SearchPlan, rows: Iterable[tuple[str, Mapping[str, Stored], T]], limit: int,
           after: str | None) -> tuple[list[T], str | None]:
    """A page of `rows` (actor id, attributes, what to return) as the index would give it: the matching rows in key
    order after the cursor `after`, at most `limit`, and the cursor of the next page (None: the last). The in-memory
    store's search; the DynamoDB store reads the same order from its index."""
    start = plan.read_cursor(after) if after is not None else None
    keyed: list[tuple[tuple[str, str], T]] = []
    if not plan.empty:
        for actor_id, attributes, row in rows:
            key = plan.key_of(actor_id, attributes)
            if key is None or not plan.admits(key) or (start is not None and (key, actor_id) <= start):
                continue
            if plan.matches(attributes):
                keyed.append(((key, actor_id), row))
    keyed.sort(key=lambda pair: pair[0])
    page = keyed[:max(1, limit)]
    last = page[-1][0] if len(keyed) > len(page) else None
    return [row for _, row in page], plan.cursor(*last) if last is not None else None
