"""Large values out of the log (the "claim check" pattern): the JSON transform, without I/O.

A stored value whose JSON is over a threshold is written to S3 and replaced, in the items, by a reference:
`{"__dormant_blob__": "<object key>", "n": <bytes>}`. The transform works bottom-up, so a big value made of big
parts keeps one object per part: a state holding 30 chunks of 100 KB is 30 objects and a small list of references,
and a step that appends a chunk writes one object, not the whole state again. A node that is still over the
threshold once its parts are references becomes an object of its own.

Objects are content-addressed: the key names the SHA-256 of the bytes. The key (`key_for`) also names the version
that first stored the content (or the message that carried it), so an object released by one version is never the
object a later version refers to: deleting it can never break a reference made since (dormant.aws.large_values).

`__dormant_blob__` is reserved: a user value with that key is refused before anything is stored
(dormant.workflow.values), so a reference can never be forged.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from dormant.workflow.values import RESERVED_KEY

MARKER = RESERVED_KEY
_REF_PATTERN = re.compile(r'"' + re.escape(MARKER) + r'":"([^"]+)"')
REF_BYTES = 200  # at most, a reference's JSON: {"__dormant_blob__":"actors/<32>/<64>-<origin>","n":<bytes>}


_LONG = 256  # strings at least this long: proved plain by C scans instead of the JSON encoder's


_ESCAPED = bytes(range(0x20)) + b'"\\'  # what json.dumps(ensure_ascii=False) escapes in a string


def _plain(text: str) -> int | None:
    """The UTF-8 length of `text` if it holds nothing json.dumps(ensure_ascii=False) escapes (`"`, `\\`, C0
    controls: all single bytes, never part of a multi-byte character), else None. One bytes.translate, ~1 GB/s,
    where the encoder's own escaping scan runs at ~125 MB/s."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return len(data) if len(data.translate(None, _ESCAPED)) == len(data) else None


def dumps(value: Any) -> str:
    """Compact JSON as the store writes it. A long plain string (most big values are) is quoted directly."""
    if isinstance(value, str) and len(value) >= _LONG and _plain(value) is not None:
        return '"' + value + '"'
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def json_bytes(value: Any) -> int:
    """Bytes of `value`'s compact JSON, without building it for long strings (a walk of the containers)."""
    if isinstance(value, str):
        plain = _plain(value) if len(value) >= _LONG else None
        return plain + 2 if plain is not None else len(dumps(value).encode())
    if isinstance(value, dict):
        return 2 + sum(json_bytes(k) + 1 + json_bytes(v) for k, v in value.items()) + max(0, len(value) - 1)
    if isinstance(value, list):
        return 2 + sum(json_bytes(v) for v in value) + max(0, len(value) - 1)
    return len(dumps(value).encode())


def is_ref(value: Any) -> bool:
    return isinstance(value, dict) and MARKER in value and len(value) == 2 and "n" in value


def ref_to(key: str, size: int) -> dict[str, Any]:
    return {MARKER: key, "n": size}


def sha_of(key: str) -> str:
    """The content hash a key names: `.../<sha>-<origin>`."""
    return key.rsplit("/", 1)[-1].rsplit("-", 1)[0]


def refs_in_text(text: str) -> list[str]:
    """Object keys referenced in a stored value's JSON text (a quick scan: no parse)."""
    return _REF_PATTERN.findall(text) if MARKER in text else []


def refs_in(value: Any) -> list[str]:
    """Object keys `value` refers to (a walk: nothing serialized)."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if is_ref(item):
                found.append(str(item[MARKER]))
            else:
                stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    found.reverse()
    return found


@dataclass
class Offloaded:
    """The result of one transform: the stored form, the objects to write first, the keys it refers to."""

    value: Any
    objects: dict[str, bytes] = field(default_factory=dict)
    refs: list[str] = field(default_factory=list)
    size: int = 0  # JSON bytes of the stored form
    largest: int = 0  # JSON bytes of the largest value it stored (for the per-value ceiling)


class Offloader:
    """Turns values into their stored form. `key_for(sha)` names a new object; `known` maps content hashes to keys
    of objects that exist already (the actor's current references): those are referred to again, not rewritten."""

    def __init__(self, threshold: int, key_for: Callable[[str], str], known: dict[str, str] | None = None) -> None:
        self.threshold = threshold
        self.key_for = key_for
        self.known = known if known is not None else {}

    def store(self, value: Any) -> Offloaded:
        result = Offloaded(value)
        result.size = result.largest = json_bytes(value)
        if result.size <= self.threshold:
            result.refs = refs_in(value)  # already stored values (a carried message) keep their references
            return result
        result.value, result.size = self._node(value, result)
        return result

    def _node(self, value: Any, result: Offloaded) -> tuple[Any, int]:
        if is_ref(value):
            result.refs.append(str(value[MARKER]))
            return value, len(dumps(value).encode())
        if isinstance(value, dict):
            parts = {k: self._node(v, result) for k, v in value.items()}
            node: Any = {k: stored for k, (stored, _) in parts.items()}
            size = 2 + sum(len(dumps(k).encode()) + 1 + n for k, (_, n) in parts.items()) + max(0, len(parts) - 1)
        elif isinstance(value, list):
            items = [self._node(v, result) for v in value]
            node = [stored for stored, _ in items]
            size = 2 + sum(n for _, n in items) + max(0, len(items) - 1)
        else:
            node, size = value, json_bytes(value)
        if size <= self.threshold:
            return node, size
        data = dumps(node).encode()
        sha = hashlib.sha256(data).hexdigest()
        key = self.known.get(sha)
        if key is None:
            key = self.key_for(sha)
            self.known[sha] = key
            result.objects[key] = data
        result.refs.append(key)
        reference = ref_to(key, len(data))
        return reference, len(dumps(reference).encode())


def stored_size(value: Any, threshold: int) -> tuple[int, int]:
    """(JSON bytes of `value`'s stored form, JSON bytes of `value`), without hashing or writing anything: what a
    check before the first write needs."""
    total = json_bytes(value)
    if total <= threshold:
        return total, total

    def node(item: Any) -> int:
        if is_ref(item):
            return len(dumps(item).encode())
        if isinstance(item, dict):
            size = 2 + sum(json_bytes(k) + 1 + node(v) for k, v in item.items()) + max(0, len(item) - 1)
        elif isinstance(item, list):
            size = 2 + sum(node(v) for v in item) + max(0, len(item) - 1)
        else:
            size = json_bytes(item)
        # Over the threshold, the node is either kept with its parts as references (then at most the threshold:
        # references are never longer than REF_BYTES) or stored itself (a reference): so at most this.
        return size if size <= threshold else max(threshold, REF_BYTES)

    return node(value), total


def resolve(value: Any, fetched: dict[str, Any]) -> Any:
    """`value` with every reference replaced by the value it names (`fetched`: key -> parsed JSON, which may hold
    references of its own, resolved too)."""
    if is_ref(value):
        return resolve(fetched[str(value[MARKER])], fetched)
    if isinstance(value, dict):
        return {k: resolve(v, fetched) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, fetched) for v in value]
    return value


def nested_refs(values: Iterable[Any]) -> list[str]:
    """References held inside fetched objects (a node whose parts were stored on their own)."""
    found: list[str] = []
    for value in values:
        found += refs_in(value)
    return found
