"""Large values out of the log (the "claim check" pattern): the JSON transform, without I/O.

A stored value whose JSON is over a threshold is written to S3 and replaced, in the items, by a reference:
`{"__dormant_blob__": "<object key>", "n": <bytes>}`. The transform works bottom-up, so a big value made of big
parts keeps one object per part: a state holding 30 chunks of 100 KB is 30 objects and a small list of references,
and a step that appends a chunk writes one object, not the whole state again. A node that is still over the
threshold once its parts are references becomes an object of its own.

Objects are content-addressed: the key names the SHA-256 of the bytes. The key (`key_for`) also names its owner, the
version that first stored the content or the message that carried it, so an object released by one version is never
the object a later version refers to: deleting it can never break a reference made since (dormant.s3.large_values).
Objects only other objects name (parts) have keys of their own (`part_key_for`), never shared with objects items
name: see `Offloader`.

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

from dormant.workflow.sizing import json_size
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


def total_bytes(value: Any) -> int:
    """`json_bytes` of a whole value, measured by the engine's encoder (pydantic-core, C) rather than walked: what
    decides whether anything of it goes out. Most values are within the threshold, and the walk, which calls the JSON
    encoder once per scalar, cost a queue loop's commit 0.16 ms twice over (docs/performance.md, "Large values")."""
    try:
        return json_size(value)
    except ValueError:  # (a lone surrogate: the walk measures it, or names the problem, as before)
        return json_bytes(value)


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
    refs: list[str] = field(default_factory=list)  # every key it names, its objects' parts included
    size: int = 0  # JSON bytes of the stored form
    largest: int = 0  # JSON bytes of the largest value it stored (for the per-value ceiling)
    # objects made of parts (new or known) -> the keys of their parts, as they name them
    containers: dict[str, tuple[str, ...]] = field(default_factory=dict)


class Offloader:
    """Turns values into their stored form.

    Keys live in two disjoint namespaces. A *top* object is one an item refers to: `key_for(sha)` names a new one,
    and `known` (content hash -> key) lists those that exist already (the actor's current references), referred to
    again instead of written again. A *part* is an object only other objects name (a big value made of big parts):
    `part_key_for(sha)` names a new one, `known_parts` lists existing ones. A top object is deleted once no version
    refers to it (a ring lap after it was released), a part only once no object that names it is left (a sweep):
    so a part must never be a top object's key, nor the other way round (a release of the top object would delete
    the part from under the objects that name it). Without `part_key_for` (tests) parts share `key_for`."""

    def __init__(self, threshold: int, key_for: Callable[[str], str], known: dict[str, str] | None = None, *,
                 part_key_for: Callable[[str], str] | None = None,
                 known_parts: dict[str, str] | None = None) -> None:
        self.threshold = threshold
        self.key_for = key_for
        self.part_key_for = part_key_for or key_for
        self.known = known if known is not None else {}
        self.known_parts = known_parts if known_parts is not None else ({} if part_key_for else self.known)
        # A reference's JSON is `{"__dormant_blob__":"<key>","n":<bytes>}`: keys of one offloader have one length
        zero = "0" * 64
        self._ref_frame = len(dumps(ref_to("", 0)).encode()) - 1 + max(
            len(self.key_for(zero).encode()), len(self.part_key_for(zero).encode()))

    def store(self, value: Any) -> Offloaded:
        """`value` in stored form. One within the threshold is stored as it is: nothing written, not walked, and its
        `refs` not collected (references it holds, a carried message's, stay; a commit finds them in its text)."""
        result = Offloaded(value)
        result.size = result.largest = total_bytes(value)
        if result.size <= self.threshold:
            return result
        # Which nodes become objects depends only on sizes (bottom-up, nothing hashed); whether an object is a part
        # depends on its place (top-down): two passes.
        plan: dict[int, tuple[int, bool]] = {}
        self._plan(value, plan)
        result.value = self._emit(value, plan, result, inside=False)
        result.size = len(dumps(result.value).encode())
        return result

    def _plan(self, value: Any, plan: dict[int, tuple[int, bool]]) -> int:
        """The JSON bytes of `value` once its big parts are references; notes (size, becomes an object) per node.
        Returns what the node takes in its parent (a reference's bytes: at most, whichever kind of key it gets)."""
        if is_ref(value):
            return len(dumps(value).encode())
        known = plan.get(id(value))
        if known is not None:
            return self._ref_frame + len(str(known[0])) if known[1] else known[0]
        if isinstance(value, dict):
            size = 2 + sum(json_bytes(k) + 1 + self._plan(v, plan) for k, v in value.items()) + max(0, len(value) - 1)
        elif isinstance(value, list):
            size = 2 + sum(self._plan(v, plan) for v in value) + max(0, len(value) - 1)
        else:
            size = json_bytes(value)
        plan[id(value)] = (size, size > self.threshold)
        return self._ref_frame + len(str(size)) if size > self.threshold else size

    def _emit(self, value: Any, plan: dict[int, tuple[int, bool]], result: Offloaded, *, inside: bool) -> Any:
        """The stored form of `value`; `inside`: it is within an object (its objects are parts)."""
        if is_ref(value):
            result.refs.append(str(value[MARKER]))
            return value
        becomes_object = plan[id(value)][1] if id(value) in plan else False
        within = inside or becomes_object
        if isinstance(value, dict):
            node: Any = {k: self._emit(v, plan, result, inside=within) for k, v in value.items()}
        elif isinstance(value, list):
            node = [self._emit(v, plan, result, inside=within) for v in value]
        else:
            node = value
        if not becomes_object:
            return node
        data = dumps(node).encode()
        sha = hashlib.sha256(data).hexdigest()
        known, key_for = (self.known_parts, self.part_key_for) if inside else (self.known, self.key_for)
        key = known.get(sha)
        if key is None:
            key = key_for(sha)
            known[sha] = key
            result.objects[key] = data
        parts = refs_in(node)
        if parts:
            result.containers[key] = tuple(parts)
        result.refs.append(key)
        return ref_to(key, len(data))


def stored_size(value: Any, threshold: int) -> tuple[int, int]:
    """(JSON bytes of `value`'s stored form, JSON bytes of `value`), without hashing or writing anything: what a
    check before the first write needs."""
    total = total_bytes(value)
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
