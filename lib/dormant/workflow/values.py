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
    always), so text holding an exponent or "0.0000" anywhere (a string's too: cheaper than telling them apart) is
    measured with Python's encoder (tests/unit/test_limits.py compares the two on every kind of value)."""
    if value is None:
        return 4
    if _FAST_PATH:
        try:
            fast = to_json(value)
        except Exception:  # (what pydantic-core refuses: Python's own encoder decides, as before)
            fast = b"E"
        if _same_as_python(fast):
            return len(fast)
    text = _COMPACT.encode(value)
    return len(text) if text.isascii() else len(text.encode())  # (isascii is a flag: no copy of ASCII text)


def _same_as_python(fast: bytes) -> bool:
    """Whether pydantic-core's text `fast` is certainly Python's: it holds none of the marks of a float the two
    write differently."""
    if b"E" in fast or b"0.0000" in fast:
        return False
    # (a one-byte search is a memchr; a two-byte one scans several times slower: on big text, any "e" at all)
    if len(fast) <= _FAST_SCAN_BYTES:
        return b"e+" not in fast and b"e-" not in fast
    return b"e" not in fast


def _marks_catch_every_difference() -> bool:
    """Whether the installed pydantic-core marks every float it writes unlike Python's json (checked once, at import):
    the versions json_size was measured with sign their exponents (1e+16), older ones the library allows do not
    (1e16), and there only Python's encoder measures."""
    samples = (1e16, -1e16, 1e22, 1.5e300, 1.7976931348623157e308, 1e-5, 1.5e-5, 1e-7, 5e-324, 1e15, 0.0001, 0.1,
               123456789.0, 1.0, -0.0, 2.5e-10)
    for sample in samples:
        fast = to_json(sample)
        if fast != _COMPACT.encode(sample).encode() and _same_as_python(fast):
            return False
    return True


_FAST_PATH = _marks_catch_every_difference()


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
    stack: list[tuple[Any, str, int]] = [(value, "$", 0)]
    while stack:
        item, path, depth = stack.pop()
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, str):
            if not _encodable(item):
                return path, "a string contains a lone surrogate (U+D800-U+DFFF), which is not valid UTF-8"
            continue
        if isinstance(item, int):
            if not -_INT_BOUND < item < _INT_BOUND:
                return path, f"an integer has more than {MAX_INT_DIGITS} digits"
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return path, "NaN and Infinity are not JSON numbers"
            continue
        if isinstance(item, (list, tuple)):
            if depth >= MAX_DEPTH:
                return path, f"arrays and objects nest deeper than {MAX_DEPTH} levels"
            stack.extend((child, f"{path}[{index}]", depth + 1) for index, child in enumerate(item))
            continue
        if isinstance(item, dict):
            if depth >= MAX_DEPTH:
                return path, f"arrays and objects nest deeper than {MAX_DEPTH} levels"
            for index, (key, child) in enumerate(item.items()):
                if not isinstance(key, str):
                    return f"{path}[<key #{index + 1}>]", "object keys must be strings"
                if not _encodable(key):
                    return (f"{path}[<key #{index + 1}>]",
                            "an object key contains a lone surrogate (U+D800-U+DFFF), which is not valid UTF-8")
                if key == RESERVED_KEY:
                    return (f"{path}[<key #{index + 1}>]",
                            f"the object key {RESERVED_KEY!r} is reserved (Dormant's references to values kept in S3)")
                stack.append((child, path + _key_text(key, index), depth + 1))
            continue
        return path, f"a {type(item).__name__} is not a JSON value"
    return None


def check_json(value: Any, what: str = "the value") -> Any:
    """`value` itself if it can be stored as JSON; otherwise InvalidJsonError naming `what`, path and rule."""
    problem = json_problem(value)
    if problem is not None:
        path, rule = problem
        raise InvalidJsonError(f"{what} cannot be stored: {rule} (at {path})", path=path, rule=rule)
    return value


def describe_errors(error: ValidationError, *, limit: int = 5, prefix: tuple[str | int, ...] = ()) -> str:
    """pydantic's errors as "field: rule" (`items.3.name: Input should be a valid string`), without the
    input values pydantic would otherwise print."""
    parts = []
    for item in error.errors(include_url=False, include_input=False, include_context=False)[:limit]:
        location = ".".join(str(part) for part in (*prefix, *item["loc"]))
        parts.append(f"{location}: {item['msg']}" if location else str(item["msg"]))
    more = error.error_count() - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")
