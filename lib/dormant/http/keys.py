"""How an actor key (a list of strings) travels in one URL path segment.

The parts are joined with ``,``. Inside a part, every byte of its UTF-8 form outside
``A-Z a-z 0-9 - . _`` is written ``~XX`` (uppercase hex), and a part that is ``.`` or ``..`` has
its dots escaped too. So ``["tenant 1", "a/b,c"]`` is ``tenant~201,a~2Fb~2Cc``.

Why not percent-encoding: the segment passes through several decoders (API Gateway decodes the
path, Mangum unquotes it again, uvicorn decodes once) and ``%2F`` becomes a ``/`` that splits the
route. The canonical form contains no ``%`` and no character any of them touches, so it arrives
unchanged however many times it is decoded. Decoding is lenient about plain characters (``José``
sent percent-encoded arrives as ``José`` and is accepted) but strict about ``~`` escapes, empty
parts, bare ``.``/``..`` segments (clients would have normalised them away) and raw control
characters.

This module has no web-framework imports: the HTTP client uses it too.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from urllib.parse import unquote_to_bytes

from dormant.errors import InvalidKeyError

_PLAIN = frozenset(string.ascii_letters + string.digits + "-._")
_HEX = frozenset("0123456789abcdefABCDEF")
ESCAPE = "~"
SEPARATOR = ","


def _encode_part(part: str) -> str:
    if part in (".", ".."):
        return "~2E" * len(part)
    return "".join(ch if ch in _PLAIN else "".join(f"~{b:02X}" for b in ch.encode("utf-8")) for ch in part)


def encode_key(key: str | Sequence[str]) -> str:
    """The path segment for `key` (a string is a one-part key)."""
    parts = (key,) if isinstance(key, str) else tuple(key)
    if not parts:
        raise InvalidKeyError("an actor key needs at least one part")
    for part in parts:
        if not isinstance(part, str) or not part:
            raise InvalidKeyError("actor key parts must be non-empty strings")
    return SEPARATOR.join(_encode_part(p) for p in parts)


def _decode_part(text: str) -> str:
    if not text:
        raise InvalidKeyError("actor key parts must be non-empty (two commas in a row, or a leading/trailing comma)")
    out = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == ESCAPE:
            pair = text[i + 1:i + 3]
            if len(pair) != 2 or not set(pair) <= _HEX:
                raise InvalidKeyError(f"bad escape at character {i + 1} of an actor key part: '~' must be followed "
                                      "by two hex digits")
            out.append(int(pair, 16))
            i += 3
            continue
        if ord(ch) < 0x20 or ord(ch) == 0x7F:
            raise InvalidKeyError(f"raw control character at character {i + 1} of an actor key part: escape it "
                                  "as ~XX")
        out += ch.encode("utf-8")
        i += 1
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidKeyError("an actor key part's ~XX escapes are not valid UTF-8") from None


def decode_key(segment: str) -> tuple[str, ...]:
    """The key parts of a path segment made by `encode_key` (or typed by hand)."""
    if segment in (".", ".."):
        raise InvalidKeyError("a bare '.' or '..' is not an actor key (write a literal dot key as ~2E)")
    return tuple(_decode_part(p) for p in segment.split(SEPARATOR))


def percent_decode(raw: str) -> str:
    """A path segment as sent (`%XX` escapes and all) decoded strictly: escapes that are not UTF-8 are an
    InvalidKeyError, never replaced by U+FFFD (which would make different keys name one actor)."""
    try:
        return unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidKeyError("the key's %XX escapes are not valid UTF-8") from None
