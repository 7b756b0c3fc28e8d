"""What a stored value may be: JSON that round-trips through the store's JSON form.

Every value Dormant records or stores (message bodies, action arguments, actor inputs, step results,
loop state, events, responses, state) passes `check_json` on its way in (through `to_json`), so nothing
is written that a later load could not read back. Refused, with the path of the offending part and the
rule it breaks (never the value itself):

- strings with lone surrogates (U+D800-U+DFFF, e.g. a JSON `"\\ud800"`): not encodable as UTF-8;
- integers of more than `MAX_INT_DIGITS` digits (Python cannot turn integers of over 4300 digits into JSON
  text; the lower limit keeps sums of stored integers printable);
- NaN and +-Infinity: not JSON;
- nesting deeper than `MAX_DEPTH` arrays/objects;
- anything that is not null, a bool, a number, a string, a list or a string-keyed object;
- the object key `RESERVED_KEY`: the DynamoDB store's references to values it keeps in S3 use it
  (dormant.s3.offload), so no stored value may forge one.

No I/O here (the engine's package).
"""

from __future__ import annotations

import json
import math
import sys
import threading
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import to_json

from dormant.workflow.errors import InvalidJsonError

_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)  # one encoder: json.dumps makes one per call
_FAST_SCAN_BYTES = 65536


def json_size(value: Any) -> int:
    """UTF-8 bytes of `value`'s compact JSON, as the stores write it (Python's json; a lone surrogate raises
    UnicodeEncodeError). `value` is JSON already (check_json).

    Measured with pydantic-core's encoder, several times faster than Python's, where both write the same text: the
    same escapes, raw UTF-8, the same shortest digits of a float. They differ only in how some floats are written
    (pydantic-core writes 1e-5 <= |x| < 1e-4 as 0.0000..., Python with an exponent; exponents as 1e+16 or 1e-6, signed
    always), so text holding "0.0000" anywhere (a string's too), or a number with an exponent (a string's "6e-4" mostly
    not: see `same_as_python`), is measured with Python's encoder (tests/unit/test_limits.py compares the two on every
    kind of value)."""
    if value is None:
        return 4
    if FAST_PATH:
        try:
            fast = to_json(value)
        except Exception:  # (what pydantic-core refuses: Python's own encoder decides, as before)
            fast = None
        if fast is not None and same_as_python(fast):
            return len(fast)
    return python_json_size(value)


def python_json_size(value: Any) -> int:
    """json_size measured with Python's own encoder (where pydantic-core's text may differ)."""
    text = _COMPACT.encode(value)
    return len(text) if text.isascii() else len(text.encode())  # (isascii is a flag: no copy of ASCII text)


def json_sizes(values: list[Any]) -> list[int]:
    """json_size of each of `values` (a commit's history entries): pydantic-core's texts searched for a float's marks
    as one text, the JSON array of them (the per-call costs of the search once, not once per value); a value is
    measured alone only when the array's text holds a mark."""
    if not FAST_PATH or len(values) < 2:
        return [json_size(value) for value in values]
    try:
        texts = [to_json(value) for value in values]
    except Exception:  # (what pydantic-core refuses: measured one by one, as json_size does)
        return [json_size(value) for value in values]
    if same_as_python(b"[" + b",".join(texts) + b"]"):
        return [len(text) for text in texts]
    return [len(text) if same_as_python(text) else python_json_size(value)
            for text, value in zip(texts, values, strict=True)]


def same_as_python(fast: bytes) -> bool:
    """Whether pydantic-core's text `fast` is certainly Python's: it holds none of the marks of a float the two
    write differently."""
    if len(fast) > _FAST_SCAN_BYTES:
        # (a one-byte search is a memchr; a two-byte one scans several times slower: on big text, any "e" at all)
        return fast.find(b"0.0000") < 0 and fast.find(b"e") < 0
    # (a mark's absence, the common case, found here: the walk over its hits is a call; `find`, cheaper than `in`)
    return (fast.find(b"0.0000") < 0 and (fast.find(b"e-") < 0 or _no_exponent(fast, b"e-"))
            and (fast.find(b"e+") < 0 or _no_exponent(fast, b"e+")))


_DIGITS = frozenset(b"0123456789")
_BEFORE_NUMBER = frozenset(b":,[")  # (compact JSON: no spaces)


def _no_exponent(text: bytes, mark: bytes) -> bool:
    """Whether no number in `text` has an exponent written with `mark` ("e-" or "e+"): the mark between digits, and
    those digits a number's (the text's start, or ":", "," or "[" before them and their sign), not a string's (a
    UUID's "...6e-4..." is common)."""
    at = text.find(mark)
    while at >= 0:
        if at > 0 and text[at - 1] in _DIGITS and at + 2 < len(text) and text[at + 2] in _DIGITS:
            start = at - 1
            while start > 0 and (text[start - 1] in _DIGITS or text[start - 1] == 46):  # (digits and ".")
                start -= 1
            if start > 0 and text[start - 1] == 45:  # (its sign)
                start -= 1
            if start == 0 or text[start - 1] in _BEFORE_NUMBER:
                return False
        at = text.find(mark, at + 2)
    return True


def _marks_catch_every_difference() -> bool:
    """Whether the installed pydantic-core marks every float it writes unlike Python's json (checked once, at import):
    the versions json_size was measured with sign their exponents (1e+16), older ones the library allows do not
    (1e16), and there only Python's encoder measures."""
    samples = (1e16, -1e16, 1e22, 1.5e300, 1.7976931348623157e308, 1e-5, 1.5e-5, 1e-7, 5e-324, 1e15, 0.0001, 0.1,
               123456789.0, 1.0, -0.0, 2.5e-10)
    for sample in (*samples, *({"k": [0, sample]} for sample in samples)):  # (a number alone and inside)
        fast = to_json(sample)
        if fast != _COMPACT.encode(sample).encode() and same_as_python(fast):
            return False
    return True


FAST_PATH = _marks_catch_every_difference()
"""Whether json_size measures with pydantic-core's encoder (the installed version marks every float it writes unlike
Python's json)."""


MAX_DEPTH = 64
"""Deepest nesting of arrays and objects in one stored value."""
MAX_INT_DIGITS = 1000
"""Longest integer (in decimal digits) a stored value may hold: well under the 4300 digits Python can turn
into text, so that sums of stored integers stay serializable."""
RESERVED_KEY = "__dormant_blob__"
"""The one object key no stored value may have (the store's references to values it keeps in S3)."""
_INT_BOUND = 10 ** MAX_INT_DIGITS


def content_identity(value: Any) -> Any:
    """`value` with each stored reference (`{RESERVED_KEY: "<...>/<sha256>-<origin>", "n": bytes}`) replaced by the
    content hash its key names: two stored forms of the same content compare equal whichever objects they name
    (a message's objects are its own: dormant.s3.large_values)."""
    if isinstance(value, dict):
        if RESERVED_KEY in value:
            return {RESERVED_KEY: str(value[RESERVED_KEY]).rsplit("/", 1)[-1].rsplit("-", 1)[0]}
        return {key: content_identity(item) for key, item in value.items()}
    if isinstance(value, list):
        return [content_identity(item) for item in value]
    return value
_MAX_KEY_SHOWN = 40


def _key_text(key: str, index: int) -> str:
    """A key for a path: short printable keys as they are, others by position (never echo odd input)."""
    if len(key) <= _MAX_KEY_SHOWN and key.isprintable() and _encodable(key) and key.isascii():
        return f".{key}" if key.isidentifier() else f"[{key!r}]"
    return f"[<key #{index + 1}>]"


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


Route = tuple[Any, ...] | None
"""Where a part of a value is: None for the value itself, else (the parent's route, list index) or (the parent's
route, object key, the key's position): made per part as one tuple; a path's text is made only for a problem."""


@dataclass(slots=True)
class JsonShape:
    """What checking a value learned beside its validity: whether it holds a float (if not, pydantic-core writes
    Python's text: json_size need not search it) and its strings of at least BIG_STRING characters, with where."""

    floats: bool
    big: list[tuple[Route, str]]


BIG_STRING = 8192
"""Characters from which a checked state's string is measured on its own, its size kept by identity (`shaped_size`)."""
SWEEP_PER_WAKE = 8
"""Entries of `STRING_SIZES` each new state cell (each wake-up, each action) looks at: the strings of a big state that
is gone (a wake-up's, loaded from DynamoDB) are let go within a few wake-ups of any actor."""


def json_problem(value: Any) -> tuple[str, str] | None:
    """(path, rule) of the first part of `value` that cannot be stored as JSON, or None if all can.

    Iterative (no recursion limit to hit on hostile nesting)."""
    return _walk(value, None)


def _walk(value: Any, shape: JsonShape | None) -> tuple[str, str] | None:
    """json_problem; with `shape`, also records in it whether a float occurs and where the big strings are."""
    stack: list[tuple[Any, Route, int]] = [(value, None, 0)]
    pop, push = stack.pop, stack.append
    big = shape.big if shape is not None else None
    # A container's children that are plainly valid (None, a bool, a bounded int, a finite float, an ASCII string: a
    # big one recorded) are taken where they are, not pushed and popped: only a child that can be a problem (or a
    # container) goes on the stack, so the problems are found in the order they always were (the big strings' order
    # differs: measuring them does not depend on it).
    isfinite = math.isfinite
    while stack:
        item, route, depth = pop()
        kind = type(item)
        if kind is dict:
            if depth >= MAX_DEPTH:
                return _path(route), f"arrays and objects nest deeper than {MAX_DEPTH} levels"
            depth += 1
            for index, (key, child) in enumerate(item.items()):
                if type(key) is not str or not key.isascii() or key == RESERVED_KEY:
                    problem = _key_problem(key, index, route)
                    if problem is not None:
                        return problem
                plain = type(child)
                if child is None or plain is bool or (plain is int and -_INT_BOUND < child < _INT_BOUND):
                    continue
                if plain is str and child.isascii():
                    if big is not None and len(child) >= BIG_STRING:
                        big.append(((route, key, index), child))
                    continue
                if plain is float and isfinite(child):
                    if shape is not None:
                        shape.floats = True
                    continue
                push((child, (route, key, index), depth))
            continue
        if kind is list:
            if depth >= MAX_DEPTH:
                return _path(route), f"arrays and objects nest deeper than {MAX_DEPTH} levels"
            depth += 1
            for index, child in enumerate(item):
                plain = type(child)
                if child is None or plain is bool or (plain is int and -_INT_BOUND < child < _INT_BOUND):
                    continue
                if plain is str and child.isascii():
                    if big is not None and len(child) >= BIG_STRING:
                        big.append(((route, index), child))
                    continue
                if plain is float and isfinite(child):
                    if shape is not None:
                        shape.floats = True
                    continue
                push((child, (route, index), depth))
            continue
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, str):
            if not _encodable(item):
                return _path(route), "a string contains a lone surrogate (U+D800-U+DFFF), which is not valid UTF-8"
            if big is not None and len(item) >= BIG_STRING:
                big.append((route, item))
            continue
        if isinstance(item, int):
            if not -_INT_BOUND < item < _INT_BOUND:
                return _path(route), f"an integer has more than {MAX_INT_DIGITS} digits"
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return _path(route), "NaN and Infinity are not JSON numbers"
            if shape is not None:
                shape.floats = True
            continue
        if isinstance(item, (list, tuple)):
            if depth >= MAX_DEPTH:
                return _path(route), f"arrays and objects nest deeper than {MAX_DEPTH} levels"
            depth += 1
            stack.extend((child, (route, index), depth) for index, child in enumerate(item))
            continue
        if isinstance(item, dict):
            if depth >= MAX_DEPTH:
                return _path(route), f"arrays and objects nest deeper than {MAX_DEPTH} levels"
            depth += 1
            for index, (key, child) in enumerate(item.items()):
                problem = _key_problem(key, index, route)
                if problem is not None:
                    return problem
                push((child, (route, key, index), depth))
            continue
        return _path(route), f"a {type(item).__name__} is not a JSON value"
    return None


def _key_problem(key: Any, index: int, route: Route) -> tuple[str, str] | None:
    """(path, rule) if an object's key at `index` (of the object at `route`) cannot be stored."""
    if not isinstance(key, str):
        return f"{_path(route)}[<key #{index + 1}>]", "object keys must be strings"
    if not _encodable(key):
        return (f"{_path(route)}[<key #{index + 1}>]",
                "an object key contains a lone surrogate (U+D800-U+DFFF), which is not valid UTF-8")
    if key == RESERVED_KEY:
        return (f"{_path(route)}[<key #{index + 1}>]",
                f"the object key {RESERVED_KEY!r} is reserved (Dormant's references to values kept in S3)")
    return None


def _path(route: Route) -> str:
    """A route as the path an error names: `$.items[3]`."""
    parts = []
    while route is not None:
        parts.append(f"[{route[1]}]" if len(route) == 2 else _key_text(route[1], route[2]))
        route = route[0]
    return "$" + "".join(reversed(parts))


def check_json(value: Any, what: str = "the value") -> Any:
    """`value` itself if it can be stored as JSON; otherwise InvalidJsonError naming `what`, path and rule."""
    kind = type(value)
    if value is None or kind is bool or (kind is int and -_INT_BOUND < value < _INT_BOUND):
        return value  # (most steps' result: nothing to walk)
    problem = _walk(value, None)
    if problem is not None:
        path, rule = problem
        raise InvalidJsonError(f"{what} cannot be stored: {rule} (at {path})", path=path, rule=rule)
    return value


def check_json_shape(value: Any, what: str = "the value") -> JsonShape:
    """check_json, returning what the walk learned for measuring `value` (`shaped_size`)."""
    shape = JsonShape(False, [])
    problem = _walk(value, shape)
    if problem is not None:
        path, rule = problem
        raise InvalidJsonError(f"{what} cannot be stored: {rule} (at {path})", path=path, rule=rule)
    return shape


def shaped_size(value: Any, shape: JsonShape) -> int:
    """json_size of `value`, which check_json_shape checked (`shape`) and nothing changed since: its big strings are
    measured on their own, each once while it lives (`StringSizes`), the rest as one text without them (no search
    for a float's marks when there is no float)."""
    if not shape.big:
        return json_size(value) if shape.floats else _plain_size(value)
    holder = [value]  # (the value's place: its copy goes there)
    copies: dict[int, Any] = {}  # id(a route) -> the copy of the container there
    copied: set[int] = set()  # (ids of the copies: the value itself is never changed)

    def container(route: Route) -> Any:
        """The copy of the container at `route` (made, with those above it, on the first ask)."""
        known = copies.get(id(route))
        if known is None:
            parent, key = (holder, 0) if route is None else (container(route[0]), route[1])
            known = parent[key]
            if id(known) not in copied:
                known = parent[key] = _copy(known)
                copied.add(id(known))
            copies[id(route)] = known
        return known

    size = STRING_SIZES.size
    sizes = 0
    for route, text in shape.big:
        sizes += size(text)
        if route is None:
            return sizes  # (the value is one big string)
        container(route[0])[route[1]] = ""  # (written `""`: two bytes in place of the string's)
    STRING_SIZES.sweep()
    rest = json_size(holder[0]) if shape.floats else _plain_size(holder[0])
    return rest - 2 * len(shape.big) + sizes


def _copy(container: Any) -> Any:
    return dict(container) if isinstance(container, dict) else list(container)


def _plain_size(value: Any) -> int:
    """json_size of a checked value without floats: pydantic-core's text is Python's."""
    if FAST_PATH:
        try:
            return len(to_json(value))
        except Exception:  # (what pydantic-core refuses: Python's own encoder decides, as json_size does)
            pass
    return json_size(value)


class StringSizes:
    """The JSON sizes of big strings, by identity: a state's big strings live across its commits and wake-ups (the
    in-memory store keeps the very objects, and pydantic's validation and dump keep them), so each is measured once.
    Exact: an entry holds its string, so no other object can take its id while it is kept. Bounded: the strings held
    take at most `budget` bytes of memory, the oldest go first when full; `sweep` drops those nothing else holds any
    more (after a wake-up of a big state loaded from DynamoDB, its strings: each wake-up sweeps a few)."""

    def __init__(self, budget: int = 32 * 1024 * 1024) -> None:
        self.budget = budget
        self.kept = 0  # bytes of memory of the strings held (sys.getsizeof)
        self._sizes: dict[int, tuple[str, int]] = {}
        self._owed = 0  # entries `sweep` looks at next: two per string measured since the last sweep
        self._lock = threading.Lock()  # (Lambda's threads mode runs wake-ups in threads)

    def __len__(self) -> int:
        return len(self._sizes)

    def size(self, text: str) -> int:
        known = self._sizes.get(id(text))
        if known is not None and known[0] is text:
            return known[1]
        size = _plain_size(text)
        with self._lock:
            if id(text) not in self._sizes:
                self._sizes[id(text)] = (text, size)
                self.kept += sys.getsizeof(text)
                self._owed += 2
            while self.kept > self.budget:
                self._drop(next(iter(self._sizes)))
        return size

    def sweep(self, at_least: int = 0) -> None:
        """Look at the oldest entries, two per string measured since the last sweep (so the sweeping keeps pace with
        what comes in) and at least `at_least`: drop those whose string only this holds, move the others to the
        back."""
        if not self._sizes:
            return
        with self._lock:
            for _ in range(min(max(self._owed, at_least), len(self._sizes))):
                key = next(iter(self._sizes))
                entry = self._sizes.pop(key)
                if sys.getrefcount(entry[0]) > _HELD_HERE:
                    self._sizes[key] = entry
                else:
                    self.kept -= sys.getsizeof(entry[0])
            self._owed = 0

    def _drop(self, key: int) -> None:
        self.kept -= sys.getsizeof(self._sizes.pop(key)[0])


# getrefcount's count of a string only an entry holds, as `sweep` asks it: the entry's tuple, the local `entry`, the
# call's argument (measured at import: interpreters differ; an error only keeps a dead string a while, never a size)
def _held_here() -> int:
    entry = ("".join(("x", str(id(object())))), 0)
    return sys.getrefcount(entry[0])


_HELD_HERE = _held_here()
STRING_SIZES = StringSizes()
"""The process's sizes of big strings (`shaped_size`)."""


def describe_errors(error: ValidationError, *, limit: int = 5, prefix: tuple[str | int, ...] = ()) -> str:
    """pydantic's errors as "field: rule" (`items.3.name: Input should be a valid string`), without the
    input values pydantic would otherwise print."""
    parts = []
    for item in error.errors(include_url=False, include_input=False, include_context=False)[:limit]:
        location = ".".join(str(part) for part in (*prefix, *item["loc"]))
        parts.append(f"{location}: {item['msg']}" if location else str(item["msg"]))
    more = error.error_count() - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
