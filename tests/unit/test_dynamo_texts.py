"""The DynamoDB store's commit serializes each new value once (dormant.dynamodb.log): the texts it splices into a
payload give the payload's own JSON, and the engine's sizes it reuses in the check are the store's."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dormant.dynamodb.items import compress, dumps, json_size, object_text, sized, sized_text
from dormant.s3.offload import MARKER
from dormant.workflow import sizing

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(st.characters(exclude_categories=("Cs",))),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=20)
_KEYS = st.sampled_from(["u", "x", "s", "w", "c", "r", "e", "é", "a\"b"])


@given(_JSON)
def test_the_engines_json_size_is_the_dynamodb_stores(value: Any) -> None:
    """check_commit takes a value's size from the engine's draft (draft_sizes): the size the store writes."""
    assert sizing.json_size(value) == json_size(value) == sized(value)[0]


@given(st.dictionaries(_KEYS, _JSON, max_size=6), st.data())
def test_a_payload_with_members_serialized_already_is_the_payloads_json(payload: dict[str, Any],
                                                                         data: st.DataObject) -> None:
    chosen = data.draw(st.sets(st.sampled_from(sorted(payload)))) if payload else set()
    texts = {key: dumps(payload[key]) for key in chosen}
    assert object_text(payload, texts) == dumps(payload)
    assert compress(payload, texts) == compress(payload)


def test_sized_text_counts_bytes_and_finds_references() -> None:
    for value in ({"a": "ascii"}, {"é": "ü" * 3, "n": [1.5, None]}, {MARKER: "dormant/k/sha-v1", "n": 9}):
        assert sized_text(dumps(value)) == (len(dumps(value).encode()), sized(value)[1])
    assert sized({"x": {MARKER: "dormant/k/abc-v1", "n": 9}})[1] == ("dormant/k/abc-v1",)
