"""The key segment encoding: round trips for awkward keys, immunity to repeated percent-decoding, errors."""

from __future__ import annotations

from urllib.parse import quote, unquote

import pytest

from dormant.errors import InvalidKeyError
from dormant.http.keys import decode_key, encode_key

AWKWARD = [
    ["main"],
    ["tenant", "42"],
    ["a/b", "c,d", "e~f"],
    ["..", ".", "..."],
    ["100%", "%2F", "%252F"],
    ["José", "日本語", "emoji 🎉"],
    ["space and +plus", "tab\tnewline\n", "nul\x00"],
    ["dots.in.the.middle", "-_-"],
]


@pytest.mark.parametrize("key", AWKWARD, ids=[",".join(map(repr, k)) for k in AWKWARD])
def test_keys_round_trip_and_survive_any_number_of_decodings(key: list[str]) -> None:
    segment = encode_key(key)
    assert "%" not in segment and "/" not in segment and segment not in (".", "..")
    assert decode_key(segment) == tuple(key)
    assert decode_key(unquote(unquote(segment))) == tuple(key)  # API Gateway, then Mangum, then Starlette
    assert decode_key(unquote(quote(segment, safe=""))) == tuple(key)  # a client that percent-encodes it


def test_simple_keys_read_as_typed() -> None:
    assert encode_key("main") == "main"
    assert encode_key(["tenant", "42"]) == "tenant,42"
    assert encode_key(["a b"]) == "a~20b"
    assert decode_key("José,x") == ("José", "x")  # plain characters are accepted as they arrive


@pytest.mark.parametrize("segment", ["", "a,", ",a", "a,,b", "~", "~4", "~zz", "a~FFb", ".", "..", "a\x00b",
                                     "a\x7fb"])
def test_malformed_segments_are_invalid_keys(segment: str) -> None:
    with pytest.raises(InvalidKeyError):
        decode_key(segment)


def test_empty_keys_cannot_be_encoded() -> None:
    for key in ([], [""], ["a", ""]):
        with pytest.raises(InvalidKeyError):
            encode_key(key)
