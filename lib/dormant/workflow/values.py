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

import math
from collections.abc import Sequence
from itertools import compress, count
from operator import is_not
from typing import Any

from pydantic import ValidationError

from dormant.workflow import sizing
from dormant.workflow.errors import InvalidJsonError
from dormant.workflow.sizing import JsonShape, Route, TextList

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


def json_problem(value: Any) -> tuple[str, str] | None:
    """(path, rule) of the first part of `value` that cannot be stored as JSON, or None if all can.

    Iterative (no recursion limit to hit on hostile nesting)."""
    return _walk(value, None)


def _walk(value: Any, shape: JsonShape | None, baseline: Any = None) -> tuple[str, str] | None:
    """json_problem; with `shape`, also records in it whether a float occurs and where the big strings are (a list of
    ASCII strings holding one as a `TextList`: compared with the list at its place in `baseline`, when that one was
    sized before, by identity, so that only the strings changed since are checked)."""
    stack: list[tuple[Any, Route, int]] = [(value, None, 0)]
    pop, push = stack.pop, stack.append
    big = shape.big if shape is not None else None
    # A container's children that are plainly valid (None, a bool, a bounded int, a finite float, an ASCII string: a
    # big one recorded) are taken where they are, not pushed and popped: only a child that can be a problem (or a
    # container) goes on the stack, so the problems are found in the order they always were (the big strings' order
    # differs: measuring them does not depend on it).
    isfinite = math.isfinite
    big_string = sizing.BIG_STRING  # (read here, not imported: a test may lower it)
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
                    if big is not None and len(child) >= big_string:
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
            if item and type(item[0]) is str:  # (a list of ASCII strings: checked in C, no Python step per string)
                if shape is None:
                    if ascii_strings(item):
                        continue
                else:
                    valid, texts = _text_list(item, route, baseline)
                    if valid:
                        if texts is not None:
                            shape.texts.append(texts)
                        continue
            for index, child in enumerate(item):
                plain = type(child)
                if child is None or plain is bool or (plain is int and -_INT_BOUND < child < _INT_BOUND):
                    continue
                if plain is str and child.isascii():
                    if big is not None and len(child) >= big_string:
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
            if big is not None and len(item) >= big_string:
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


_STR_ONLY = {str}


def _text_list(item: list[Any], route: Route, baseline: Any) -> tuple[bool, TextList | None]:
    """Whether the list `item` (at `route`) is all ASCII strings, and if one of them is big, its `TextList`: against
    the list at `route` in `baseline` if that one was sized before (the strings there at the same positions are the
    very objects checked then: only the others are checked), else checked whole."""
    strings = tuple(item)  # (what is checked and measured: a change to the list after its check cannot slip in)
    if baseline is not None:
        known = sizing.STRING_SIZES.listed(_at(baseline, route))
        if known is not None and len(known[0]) == len(strings):
            changed = list(compress(count(), map(is_not, strings, known[0])))
            if not changed or ascii_strings([strings[index] for index in changed]):
                return True, TextList(route, item, strings, known, changed)
    if not ascii_strings(strings):
        return False, None
    return True, (TextList(route, item, strings) if max(map(len, strings)) >= sizing.BIG_STRING else None)


def _at(value: Any, route: Route) -> Any:
    """The part of `value` at `route`, or None where `value` has none there."""
    keys = []
    while route is not None:
        keys.append(route[1])
        route = route[0]
    for key in reversed(keys):
        kind = type(value)
        if kind is dict:
            value = value.get(key)
        elif kind is list and type(key) is int and key < len(value):
            value = value[key]
        else:
            return None
    return value


def ascii_strings(items: Sequence[Any]) -> bool:
    """Whether `items` are all ASCII `str`s (plainly valid: nothing in them to walk), tested without a Python step per
    item."""
    return {*map(type, items)} == _STR_ONLY and all(map(str.isascii, items))


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


def check_json_shape(value: Any, what: str = "the value", baseline: Any = None) -> JsonShape:
    """check_json, returning what the walk learned for measuring `value` (`sizing.shaped_size`). `baseline`: a value
    checked and measured before (a state's last commit), whose lists of strings this one's are compared with."""
    if type(value) is dict:  # (a state of plain fields, the most common: no walk, no stack)
        floats = _flat_floats(value)
        if floats is not None:
            return JsonShape(floats, [], [])
    shape = JsonShape(False, [], [])
    problem = _walk(value, shape, baseline)
    if problem is not None:
        path, rule = problem
        raise InvalidJsonError(f"{what} cannot be stored: {rule} (at {path})", path=path, rule=rule)
    return shape


def _flat_floats(value: dict[Any, Any]) -> bool | None:
    """Whether the object `value` holds a float, if all it holds is plainly valid and small (ASCII keys but the
    reserved one; None, bools, bounded ints, finite floats, ASCII strings under BIG_STRING): what `_walk` would find,
    no problem and no big string; else None (the walk decides)."""
    floats = False
    isfinite = math.isfinite
    for key, child in value.items():
        if type(key) is not str or not key.isascii() or key == RESERVED_KEY:
            return None
        plain = type(child)
        if child is None or plain is bool or (plain is int and -_INT_BOUND < child < _INT_BOUND):
            continue
        if plain is str and child.isascii() and len(child) < sizing.BIG_STRING:
            continue
        if plain is float and isfinite(child):
            floats = True
            continue
        return None
    return floats


def describe_errors(error: ValidationError, *, limit: int = 5, prefix: tuple[str | int, ...] = ()) -> str:
    """pydantic's errors as "field: rule" (`items.3.name: Input should be a valid string`), without the
    input values pydantic would otherwise print."""
    parts = []
    for item in error.errors(include_url=False, include_input=False, include_context=False)[:limit]:
        location = ".".join(str(part) for part in (*prefix, *item["loc"]))
        parts.append(f"{location}: {item['msg']}" if location else str(item["msg"]))
    more = error.error_count() - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
