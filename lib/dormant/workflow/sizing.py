"""How many bytes a stored value's JSON is: measured once, reused.

The stores, the limits and the kept-versions ring decide by a value's UTF-8 bytes as compact JSON, the way the stores
write it (`json_size`). Measuring is serializing, so what is measured is measured once:

- `json_size`, `json_sizes`: pydantic-core's encoder where its text is certainly Python's json's (`same_as_python`);
- `shaped_size(s)`: a value the JSON check walked (`dormant.workflow.values.check_json_shape`, which returns the
  `JsonShape` defined here), its big strings measured on their own, each once while it lives (`StringSizes`,
  `STRING_SIZES`), a list of ASCII strings from the size of its last commit's where it changed (`TextList`), and the
  strings new there left within bounds until a decision needs their exact size (`Unmeasured`).

No I/O here (the engine's package). What a stored value may be is dormant.workflow.values.
"""

from __future__ import annotations

import json
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from itertools import repeat
from operator import is_, itemgetter
from typing import Any

from pydantic_core import to_json

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


def json_total(values: list[Any]) -> int:
    """sum(json_sizes(values)), from one pydantic-core text of the JSON array of them (its brackets and commas taken
    off): the per-call cost of the encoder once, not once per value. Where the array's text holds a float's mark,
    json_sizes decides."""
    if FAST_PATH and values:
        try:
            fast = to_json(values)
        except Exception:  # (what pydantic-core refuses: json_sizes measures it as json_size does)
            fast = None
        if fast is not None and same_as_python(fast):
            return len(fast) - len(values) - 1  # ("[" and "]", a comma between two values)
    return sum(json_sizes(values))


def same_as_python(fast: bytes) -> bool:
    """Whether pydantic-core's text `fast` is certainly Python's: it holds none of the marks of a float the two
    write differently."""
    if len(fast) > _FAST_SCAN_BYTES:
        # (a one-byte search is a memchr; a two-byte one scans several times slower: on big text, any "e" at all)
        return fast.find(b"0.0000") < 0 and fast.find(b"e") < 0
    # (a mark's absence, the common case, found here: the walk over its hits is a call; `find`, cheaper than `in`; a
    # "+" is rare in JSON, and a one-byte search is a memchr: a third of the two-byte search's cost on a commit's text)
    return (fast.find(b"0.0000") < 0 and (fast.find(b"e-") < 0 or _no_exponent(fast, b"e-"))
            and (fast.find(b"+") < 0 or fast.find(b"e+") < 0 or _no_exponent(fast, b"e+")))


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


Route = tuple[Any, ...] | None
"""Where a part of a value is: None for the value itself, else (the parent's route, list index) or (the parent's
route, object key, the key's position): made per part as one tuple; a path's text is made only for a problem."""


@dataclass(slots=True)
class JsonShape:
    """What checking a value learned beside its validity: whether it holds a float (if not, pydantic-core writes
    Python's text: json_size need not search it), its strings of at least BIG_STRING characters, with where, and its
    lists of ASCII strings holding one (`texts`: such a list is checked and sized as one, not string by string)."""

    floats: bool
    big: list[tuple[Route, str]]
    texts: list[TextList]


@dataclass(slots=True)
class TextList:
    """A list of ASCII strings holding a big one, as the walk found it (`items`, and `strings`: its items then): sized
    as one by `shaped_size`. `base`: the strings and size of a list sized before (`StringSizes.listed`) that this one
    differs from only at the positions `changed`, if the walk found one; only those strings were checked then."""

    route: Route
    items: list[str]
    strings: tuple[str, ...]
    base: tuple[tuple[str, ...], int, Unmeasured | None] | None = None
    changed: list[int] | None = None


@dataclass(slots=True)
class Unmeasured:
    """Big strings of a value whose JSON sizes are not measured yet (strings new in a list compared with its last
    commit's: a size within bounds decides what the stores decide, mostly), by identity, each with how often it
    occurs there. A string's JSON is its quotes and one to six bytes a character (`\\u001f`): `bounds`; `size`
    measures them, once."""

    strings: dict[int, tuple[str, int]]  # id -> (the string, how often it occurs)
    chars: int  # their characters, each string counted as often as it occurs
    count: int  # how many occurrences
    measured: int | None = None

    def bounds(self) -> tuple[int, int]:
        """The least and the most bytes their JSON can be."""
        return self.chars + 2 * self.count, 6 * self.chars + 2 * self.count

    def size(self) -> int:
        """Their JSON's bytes (measured on the first call: each string through `STRING_SIZES`, kept there)."""
        if self.measured is None:
            size = STRING_SIZES.size
            self.measured = sum(size(text) * times for text, times in self.strings.values())
        return self.measured


MAX_LISTS = 256
"""Lists of strings whose sizes `StringSizes` keeps at most (each holds its list and a tuple of its strings)."""
BIG_STRING = 8192
"""Characters from which a checked state's string is measured on its own, its size kept by identity (`shaped_size`)."""
SWEEP_PER_WAKE = 8
"""Entries of `STRING_SIZES` each new state cell (each wake-up, each action) looks at: the strings of a big state that
is gone (a wake-up's, loaded from DynamoDB) are let go within a few wake-ups of any actor."""


def shaped_size(value: Any, shape: JsonShape) -> int:
    """json_size of `value`, which check_json_shape checked (`shape`) and nothing changed since: its big strings are
    measured on their own, each once while it lives (`StringSizes`), a list of ASCII strings holding one as the sum of
    its strings' sizes, the rest as one text without them (no search for a float's marks when there is no float)."""
    size, unmeasured = shaped_sizes(value, shape)
    return size + sum(part.size() for part in unmeasured)


def shaped_sizes(value: Any, shape: JsonShape) -> tuple[int, tuple[Unmeasured, ...]]:
    """shaped_size, but the strings new in a list of strings that was compared with its last commit's not measured:
    the size of the rest, and those strings (`Unmeasured`: their size is within bounds, and measured on demand)."""
    if not shape.big and not shape.texts:
        return (json_size(value) if shape.floats else _plain_size(value)), ()
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
            return sizes, ()  # (the value is one big string)
        container(route[0])[route[1]] = ""  # (written `""`: two bytes in place of the string's)
    unmeasured: list[Unmeasured] = []
    for texts in shape.texts:
        listed, new = _listed_size(texts)
        if new is not None:
            unmeasured.append(new)
        if texts.route is None:
            return listed, tuple(unmeasured)  # (the value is the list)
        container(texts.route[0])[texts.route[1]] = []  # (written `[]`: two bytes in place of the list's)
        sizes += listed - 2
    STRING_SIZES.sweep()
    rest = json_size(holder[0]) if shape.floats else _plain_size(holder[0])
    return rest - 2 * len(shape.big) + sizes, tuple(unmeasured)


_ESCAPED = ("\n", '"', "\\", "\t", "\r", *(chr(code) for code in range(32) if chr(code) not in "\n\t\r"))
"""The characters JSON escapes in an ASCII string (the common ones first)."""


def string_size(text: str) -> int:
    """json_size of the string `text`: an ASCII string holding none of the characters JSON escapes is its length and
    its quotes, found with a `memchr` per character (about a fifth of the time serializing it takes), else measured
    by serializing it."""
    if text.isascii():
        for mark in _ESCAPED:
            if mark in text:
                break
        else:
            return len(text) + 2
    return _plain_size(text)


def _listed_size(texts: TextList) -> tuple[int, Unmeasured | None]:
    """json_size of the list of strings `texts` found (kept for the next change: `StringSizes.keep_list`): from the
    size of the list it was found to differ from, where it changed, else from each string's. A big string new there
    and not measured before is left unmeasured (the second value); the first is the size of the rest."""
    strings, sizes = texts.strings, STRING_SIZES
    if texts.base is None or texts.changed is None:
        size = sizes.total(strings) + len(strings) + 1  # (its strings, the commas between them, the brackets)
        sizes.keep_list(texts.items, strings, size)
        return size, None
    before, size, earlier = texts.base
    if earlier is not None and earlier.measured is not None:  # (measured since: part of the size now)
        size, earlier = size + earlier.measured, None
    pending = dict(earlier.strings) if earlier is not None else {}
    chars, count = (earlier.chars, earlier.count) if earlier is not None else (0, 0)
    for index in texts.changed:
        old, new = before[index], strings[index]
        held = pending.get(id(old))
        if held is not None:  # (an occurrence of a string not measured: one fewer; the others alike)
            pending[id(old)] = (old, held[1] - 1)
            if held[1] == 1:
                del pending[id(old)]
            chars, count = chars - len(old), count - 1
        else:
            size -= sizes.one(old)
        if len(new) >= BIG_STRING and not sizes.knows(new):
            held = pending.get(id(new))
            pending[id(new)] = (new, 1 if held is None else held[1] + 1)
            chars, count = chars + len(new), count + 1
        else:
            size += sizes.one(new)
    unmeasured = Unmeasured(pending, chars, count) if pending else None
    sizes.keep_list(texts.items, strings, size, unmeasured)
    return size, unmeasured


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
        # (ordered: `sweep` moves a live entry to the back in O(1), where a dict's popped front slots slow `iter`)
        self._sizes: OrderedDict[int, tuple[str, int]] = OrderedDict()
        self._owed = 0  # entries `sweep` looks at next: two per string measured since the last sweep
        # Lists of strings sized (`keep_list`), by identity: the list, its strings then, its size
        # (its size leaves out `unmeasured`'s strings, when some were not measured)
        self._lists: OrderedDict[int, tuple[list[str], tuple[str, ...], int, Unmeasured | None]] = OrderedDict()
        self._owed_lists = 0
        self._lock = threading.Lock()  # (Lambda's threads mode runs wake-ups in threads)

    def __len__(self) -> int:
        return len(self._sizes)

    @property
    def kept_lists(self) -> int:
        """How many lists' sizes are kept (`keep_list`)."""
        return len(self._lists)

    def size(self, text: str) -> int:
        known = self._sizes.get(id(text))
        if known is not None and known[0] is text:
            return known[1]
        size = string_size(text)
        with self._lock:
            if id(text) not in self._sizes:
                self._sizes[id(text)] = (text, size)
                self.kept += sys.getsizeof(text)
                self._owed += 2
            while self.kept > self.budget:
                self.kept -= sys.getsizeof(self._sizes.popitem(last=False)[1][0])
        return size

    def one(self, text: str) -> int:
        """json_size of the string `text`: a big one kept (`size`), a small one measured."""
        return self.size(text) if len(text) >= BIG_STRING else string_size(text)

    def listed(self, items: Any) -> tuple[tuple[str, ...], int, Unmeasured | None] | None:
        """The strings and size `keep_list` kept for the very list `items`, if any (the strings as they were then:
        what the list holds now is not looked at)."""
        known = self._lists.get(id(items))
        return (known[1], known[2], known[3]) if known is not None and known[0] is items else None

    def knows(self, text: str) -> bool:
        """Whether the size of the very string `text` is kept."""
        known = self._sizes.get(id(text))
        return known is not None and known[0] is text

    def keep_list(self, items: list[str], strings: tuple[str, ...], size: int,
                  unmeasured: Unmeasured | None = None) -> None:
        """Keep the JSON size of the list `items` holding `strings`, for a later list compared with it
        (`check_json_shape`'s `baseline`): at most MAX_LISTS, the oldest go first; `sweep` drops those only this
        holds."""
        with self._lock:
            self._lists[id(items)] = (items, strings, size, unmeasured)
            self._lists.move_to_end(id(items))
            self._owed_lists += 2
            while len(self._lists) > MAX_LISTS:
                self._lists.popitem(last=False)

    def total(self, texts: tuple[str, ...]) -> int:
        """The sum of the sizes of `texts` (ASCII strings, a list `check_json_shape` found): the kept ones looked up
        without a Python step per string, the others measured (a big one kept, the small ones as one text)."""
        entries = list(map(self._sizes.get, map(id, texts), repeat(_NOT_KEPT)))
        total: int = sum(map(itemgetter(1), entries))
        if all(map(is_, map(itemgetter(0), entries), texts)):
            return total
        small = []
        for text, entry in zip(texts, entries, strict=True):
            if entry[0] is not text:  # (not kept)
                total -= entry[1]
                if len(text) >= BIG_STRING:
                    total += self.size(text)
                else:
                    small.append(text)
        if small:  # (their JSON array: their sizes, the commas between them and the brackets)
            total += _plain_size(small) - len(small) - 1
        return total

    def sweep(self, at_least: int = 0) -> None:
        """Look at the oldest entries, two per string measured since the last sweep (so the sweeping keeps pace with
        what comes in) and at least `at_least`: drop those whose string only this holds, move the others to the
        back."""
        sizes, lists = self._sizes, self._lists
        if not sizes and not lists:
            return
        refcount, held = sys.getrefcount, _HELD_HERE
        with self._lock:
            take = sizes.popitem
            for _ in range(min(max(self._owed, at_least), len(sizes))):
                key, entry = take(False)
                if refcount(entry[0]) > held:
                    sizes[key] = entry
                else:
                    self.kept -= sys.getsizeof(entry[0])
            self._owed = 0
            take_list = lists.popitem
            # (a state's lists are few beside its big strings: a new state cell looks at a quarter as many)
            for _ in range(min(max(self._owed_lists, at_least // 4), len(lists))):
                key, listed = take_list(False)
                if refcount(listed[0]) > held:
                    lists[key] = listed
            self._owed_lists = 0


_NOT_KEPT: tuple[None, int] = (None, 0)


# getrefcount's count of a string only an entry holds, as `sweep` asks it: the entry's tuple, the local `entry`, the
# call's argument (measured at import: interpreters differ; an error only keeps a dead string a while, never a size)
def _held_here() -> int:
    entry = ("".join(("x", str(id(object())))), 0)
    return sys.getrefcount(entry[0])


_HELD_HERE = _held_here()
STRING_SIZES = StringSizes()
"""The process's sizes of big strings (`shaped_size`)."""
