"""dormant.core.limits: the table docs/limits.md shows is the one the code checks, and the checks' edges."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dormant.core.limits import LIMITS, MESSAGE_ID, check_message_id, check_queue_name, check_table_name, markdown_table
from dormant.errors import InvalidMessageIdError, InvalidSettingError

DOC = Path(__file__).resolve().parents[2] / "docs" / "limits.md"


def test_the_documented_table_is_the_checked_one() -> None:
    text = DOC.read_text()
    generated = text.split("<!-- limits:begin (generated from dormant.core.limits.LIMITS) -->\n")[1].split(
        "\n<!-- limits:end -->")[0]
    assert generated == markdown_table(), "docs/limits.md is stale: regenerate its table from dormant.core.limits"
    assert len({limit.name for limit in LIMITS}) == len(LIMITS)


def test_message_ids_at_the_edge() -> None:
    assert check_message_id("é" * (MESSAGE_ID.maximum // 2)) == "é" * 501  # 1,002 bytes
    with pytest.raises(InvalidMessageIdError, match="1,004 bytes"):
        check_message_id("é" * 502)
    for bad in ("", "a\nb", "a\x85b", "\ud800", 5):
        with pytest.raises(InvalidMessageIdError):
            check_message_id(bad)


@given(st.text(min_size=1, max_size=40))
def test_a_refused_message_id_is_never_echoed(text: str) -> None:
    try:
        check_message_id(text)
    except InvalidMessageIdError as error:
        assert text not in str(error) or len(text) < 3


@pytest.mark.parametrize("name", ["t", "ab", "a b", "tab/le", "x" * 256, "é-table"])
def test_table_names_dynamodb_refuses_are_refused(name: str) -> None:
    with pytest.raises(InvalidSettingError, match="table"):
        check_table_name(name)


def test_table_and_queue_names_dynamodb_and_sqs_take() -> None:
    assert check_table_name("abc") == "abc" and check_table_name("a.b-c_d" + "x" * 248) == "a.b-c_d" + "x" * 248
    assert check_queue_name("w" * 75 + ".fifo", "q", fifo=True)
    with pytest.raises(InvalidSettingError, match="80"):
        check_queue_name("w" * 76 + ".fifo", "q", fifo=True)
    with pytest.raises(InvalidSettingError, match=r"\.fifo"):
        check_queue_name("timers", "q", fifo=True)
    with pytest.raises(InvalidSettingError, match="standard"):
        check_queue_name("timers.fifo", "q", fifo=False)
    with pytest.raises(InvalidSettingError):
        check_queue_name("has space", "q")


def test_the_key_of_references_to_values_in_s3_can_never_be_stored() -> None:
    """A stored value holding it could make the store fetch an object the value names: a forged reference."""
    from dormant.workflow.errors import InvalidJsonError
    from dormant.workflow.execution import to_json

    for forged in ({"__dormant_blob__": "actors/x/y", "n": 1}, [{"a": {"__dormant_blob__": "k"}}]):
        with pytest.raises(InvalidJsonError, match="reserved"):
            to_json(forged, "a step result")
    assert to_json({"dormant_blob": 1}, "fine") == {"dormant_blob": 1}
