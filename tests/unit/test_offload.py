"""dormant.s3.offload, the transform of large values (no I/O): exact JSON sizes and text, references that
resolve back to the value, parts kept as their own objects, content known once."""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dormant.s3.offload import Offloader, dumps, json_bytes, refs_in, resolve, stored_size

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
    | st.text(min_size=256, max_size=600),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6),
    max_leaves=40)


EXAMPLES = int(os.environ.get("DORMANT_PROPERTY_EXAMPLES", "400"))  # `make fuzz` runs more


def reference(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@settings(max_examples=EXAMPLES)
@given(JSON)
def test_the_fast_json_is_the_encoders_own(value: Any) -> None:
    assert dumps(value) == reference(value)
    assert json_bytes(value) == len(reference(value).encode())


@settings(max_examples=max(1, EXAMPLES // 2))
@given(JSON, st.integers(min_value=64, max_value=2048))
def test_a_stored_value_reads_back_whole_and_its_size_is_foreseen(value: Any, threshold: int) -> None:
    written: dict[str, bytes] = {}
    stored = Offloader(threshold, lambda sha: f"actors/x/{sha}-v1").store(value)
    written.update(stored.objects)
    fetched = {key: json.loads(data) for key, data in written.items()}
    assert resolve(stored.value, fetched) == json.loads(reference(value))
    assert stored.size == len(reference(stored.value).encode())  # the stored form's exact size
    assert stored_size(value, threshold)[0] >= stored.size  # the estimate never undercounts (refs at most)
    assert set(refs_in(stored.value)) <= set(written)


def test_big_parts_are_objects_of_their_own_and_known_content_is_not_written_again() -> None:
    state = {"parts": [chr(97 + i) * 2000 for i in range(10)]}
    first = Offloader(1500, lambda sha: f"k/{sha}-v1")
    stored = first.store(state)
    assert len(stored.objects) == 10 and len(dumps(stored.value)) < 1500  # a small list of references, inline
    state["parts"].append("z" * 2000)
    again = Offloader(1500, lambda sha: f"k/{sha}-v2", known=dict(first.known))
    changed = again.store(state)
    assert list(changed.objects) == [key for key in changed.objects if key.endswith("-v2")]
    assert len(changed.objects) == 1  # only the new part is written
