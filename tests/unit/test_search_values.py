"""Search attributes without a store: declarations, values, the `where` syntax (hostile text refused by position,
never echoed), the plan, and the index encoding, whose order is the values' for any ints, floats, strings and
datetimes, so that every condition is exactly one key range."""

from __future__ import annotations

import os
import struct
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dormant import actor
from dormant.core.search import Condition, SearchAttributes, parse_conditions, stale, stored_value, visible
from dormant.core.searchplan import encode, index_key, plan_search
from dormant.errors import InvalidSearchAttributeError, InvalidSearchConditionError
from dormant.workflow.errors import WorkflowDefinitionError

EXAMPLES = int(os.environ.get("DORMANT_PROPERTY_EXAMPLES", "150"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))
DECLARED = {"customer": "s", "amount": "i", "score": "f", "vip": "b", "due": "t"}

int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
floats = st.floats(allow_nan=False, allow_infinity=False)
texts = st.text(st.characters(exclude_categories=["Cs", "Cc"]), max_size=20).filter(
    lambda t: len(t.encode()) <= 256)
moments = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                       timezones=st.sampled_from([UTC, timezone(timedelta(hours=-11)), timezone(timedelta(hours=13))]))


# -- the encoding: order and equality are the values' ---------------------------------------------------------------
@SETTINGS
@given(int64, int64)
def test_integers_sort_as_numbers(a: int, b: int) -> None:
    assert (encode("i", a) < encode("i", b)) == (a < b) and (encode("i", a) == encode("i", b)) == (a == b)
    assert len(encode("i", a)) == 16


@SETTINGS
@given(floats, floats)
def test_floats_sort_as_numbers_negative_zero_and_subnormals_too(a: float, b: float) -> None:
    x, y = stored_value("f", a), stored_value("f", b)
    assert (encode("f", x) < encode("f", y)) == (x < y)
    assert (encode("f", x) == encode("f", y)) == (x == y)  # -0.0 == 0.0: one key


def test_the_float_edges() -> None:
    edges = [-1.7976931348623157e308, -1.0, -5e-324, -0.0, 0.0, 5e-324, 1.0, 1.7976931348623157e308]
    encoded = [encode("f", stored_value("f", value)) for value in edges]
    assert encoded == sorted(encoded) and encoded[3] == encoded[4]
    assert struct.pack(">d", stored_value("f", -0.0)) == struct.pack(">d", 0.0)


@SETTINGS
@given(texts, texts)
def test_strings_sort_as_python_compares_them(a: str, b: str) -> None:
    assert (encode("s", a) < encode("s", b)) == (a < b)


@SETTINGS
@given(moments, moments)
def test_datetimes_sort_as_instants_whatever_their_offset(a: datetime, b: datetime) -> None:
    x, y = stored_value("t", a), stored_value("t", b)
    assert (encode("t", x) < encode("t", y)) == (a < b) and (encode("t", x) == encode("t", y)) == (a == b)


ops = st.sampled_from(["=", "<", "<=", ">", ">="])


@SETTINGS
@given(st.lists(int64, min_size=1, max_size=20), int64, ops, st.booleans())
def test_a_condition_on_the_indexed_attribute_is_exactly_its_key_range(values: list[int], pivot: int, op: str,
                                                                        near: bool) -> None:
    if near:  # probe the values themselves and their neighbours, where an off-by-one would show
        pivot = values[0] + (pivot % 3) - 1 if -(2**63) < values[0] < 2**63 - 1 else values[0]
    condition = parse_conditions("t", {"n": "i"}, [f"n{op}{pivot}"])[0]
    plan = plan_search("t", [condition])
    for index, value in enumerate(values):
        key = index_key("i", value, f"t/{index}")
        assert plan.admits(key) == condition.holds(["i", value]), (value, op, pivot)


@SETTINGS
@given(st.lists(texts, min_size=1, max_size=20), texts, st.sampled_from(["=", "<", "<=", ">", ">=", "^="]))
def test_string_conditions_and_prefixes_are_their_key_ranges(values: list[str], pivot: str, op: str) -> None:
    pivot = values[-1][:len(pivot) % 4] if op == "^=" else pivot  # prefixes that match, or not
    condition = parse_conditions("t", {"n": "s"}, [f"n{op}{pivot}"])[0]
    plan = plan_search("t", [condition])
    for index, value in enumerate(values):
        assert plan.admits(index_key("s", value, f"t/{index}")) == condition.holds(["s", value]), (value, op, pivot)


@SETTINGS
@given(st.lists(floats, min_size=1, max_size=10), floats, floats)
def test_two_sided_ranges_intersect(values: list[float], low: float, high: float) -> None:
    conditions = parse_conditions("t", {"n": "f"}, [f"n>{low!r}", f"n<={high!r}"])
    plan = plan_search("t", conditions)
    for index, value in enumerate(values):
        stored = ["f", stored_value("f", value)]
        assert plan.admits(index_key("f", stored[1], f"t/{index}")) == all(c.holds(stored) for c in conditions)


# -- declarations and values ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("search, rule", [
    ({"1st": str}, "name"), ({"": str}, "name"), ({"a-b": str}, "name"), ({"x" * 65: str}, "name"),
    ({"ok": list}, "one of str, int, float, bool, datetime"), ({"ok": "str"}, "one of"),
    ({f"a{n}": int for n in range(21)}, "at most 20"), ({"é": str}, "name")])
def test_bad_declarations_are_refused_when_the_actor_is_defined(search: dict[str, object], rule: str) -> None:
    with pytest.raises(WorkflowDefinitionError, match=rule):
        actor("shop", search=search)  # type: ignore[arg-type]


def test_declared_types_become_codes() -> None:
    assert actor("shop", search={"c": str, "n": int, "f": float, "b": bool, "t": datetime}).search == {
        "c": "s", "n": "i", "f": "f", "b": "b", "t": "t"}
    assert actor("plain").search == {}


@pytest.mark.parametrize("name, value, rule", [
    ("customer", 42, "must be a str"), ("customer", "x" * 257, "257 bytes"), ("customer", "a\x1bb", "control"),
    ("customer", "\ud800", "lone surrogate"), ("amount", True, "not a bool"), ("amount", 1.0, "must be an int"),
    ("amount", 2**63, "out of range"), ("score", float("nan"), "finite"), ("score", 10**400, "too large"),
    ("vip", 1, "must be a bool"), ("due", datetime(2026, 1, 1), "timezone-aware"), ("due", "2026-01-01", "datetime")])
def test_a_value_of_another_type_is_refused_naming_the_attribute_not_the_value(name: str, value: object,
                                                                               rule: str) -> None:
    view = SearchAttributes("shop", DECLARED, {}, changes := {})
    with pytest.raises(InvalidSearchAttributeError, match=rule) as refused:
        view[name] = value
    assert f'"{name}"' in str(refused.value) and repr(value) not in str(refused.value) and changes == {}


def test_the_view_reads_changes_then_stored_and_unsets() -> None:
    changes: dict[str, object] = {}
    view = SearchAttributes("shop", DECLARED, {"customer": ["s", "42"], "amount": ["s", "stale"]}, changes)
    assert dict(view) == {"customer": "42"}  # a stored value of another type than declared is not there
    view.set(amount=5, due=datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=2))))
    assert view["due"] == datetime(2026, 1, 1, 10, tzinfo=UTC) and view["amount"] == 5
    del view["customer"]
    view["score"] = None
    assert "customer" not in view and view.get("score") is None and len(view) == 2
    assert changes == {"amount": ["i", 5], "due": ["t", "2026-01-01T10:00:00.000000+00:00"], "customer": None,
                       "score": None}
    with pytest.raises(InvalidSearchAttributeError, match=r"declared: \['amount'"):
        view["undeclared"] = 1
    with pytest.raises(InvalidSearchAttributeError):
        view.set(amount=6, vip="yes")
    assert view["amount"] == 5  # all checked before any is set


def test_visible_and_stale_follow_the_declaration() -> None:
    stored = {"customer": ["s", "42"], "amount": ["i", 5], "gone": ["b", True]}
    declared = {"customer": "s", "amount": "f"}  # amount retyped, gone removed
    assert visible(declared, stored) == {"customer": ["s", "42"]}
    assert stale(declared, stored) == {"amount": None, "gone": None}


# -- the where syntax -----------------------------------------------------------------------------------------------
def test_conditions_are_read_by_their_declared_types() -> None:
    found = parse_conditions("shop", DECLARED, ["customer=a=b", "amount>=-12", "score<1e3", "vip=TRUE",
                                                "due<2026-01-31T12:00:00+02:00", "customer^="])
    assert found == [Condition("customer", "=", "a=b", "s"), Condition("amount", ">=", -12, "i"),
                     Condition("score", "<", 1000.0, "f"), Condition("vip", "=", True, "b"),
                     Condition("due", "<", "2026-01-31T10:00:00.000000+00:00", "t"),
                     Condition("customer", "^=", "", "s")]


SECRET = "4111-1111-1111-1111"


@pytest.mark.parametrize("texts, rule", [
    ([], "1 to 10"), ([f"amount={n}" for n in range(11)], "1 to 10"), (f"customer={SECRET}", "1 to 10"),
    ([SECRET], "condition 1 is not"), (["amount"], "condition 1 is not"), ([f"=={SECRET}"], "is not"),
    ([f"card={SECRET}"], "condition 1 names no search attribute"), ([f"amount={SECRET}"], "must be an integer"),
    (["customer=1", f"amount>{SECRET}"], "condition 2"), ([f"amount^={SECRET}"], "operators = < <= > >="),
    ([f"vip>{SECRET}"], "operators ="), ([f"vip={SECRET}"], "true or false"), ([f"score={SECRET}"], "decimal"),
    (["score=nan"], "decimal"), (["score=1e999"], "finite"), (["amount=99999999999999999999"], "out of range"),
    ([f"due={SECRET}"], "ISO 8601"), ([f"customer={SECRET}\x1b[2J"], "control"), ([f"customer={'x' * 600}"], "600"),
    ([f"customer={'é' * 200}"], "bytes"), ([12], "must be a string"), ([f"amount=\uff11{SECRET}"], "integer")])
def test_hostile_conditions_are_refused_by_position_and_never_echoed(texts: object, rule: str) -> None:
    with pytest.raises(InvalidSearchConditionError, match=rule) as refused:
        parse_conditions("shop", DECLARED, texts)  # type: ignore[arg-type]
    assert SECRET not in str(refused.value) and "card" not in str(refused.value)


@SETTINGS
@given(st.text(min_size=8, max_size=40))
def test_any_text_is_read_or_refused_cleanly(text: str) -> None:
    for prefix in ("", "customer=", "amount>", "due<=", "vip=", "score^="):
        try:
            parse_conditions("shop", DECLARED, [prefix + text])
        except InvalidSearchConditionError as error:
            assert (prefix + text) not in str(error) or len(prefix + text) < 12


def test_no_declared_attributes_says_so() -> None:
    with pytest.raises(InvalidSearchConditionError, match="declares no search attributes"):
        parse_conditions("plain", {}, ["a=1"])


# -- the plan ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("conditions, read", [
    (["amount>1", "customer=x"], "customer"), (["vip=true", "amount>1"], "vip"),
    (["vip=true", "amount>1", "amount<9"], "amount"), (["amount>1", "customer^=ab"], "customer"),
    (["customer^=", "amount<3"], "amount"), (["amount>1", "score<2"], "amount"), (["due>2026-01-01"], "due")])
def test_the_most_selective_condition_is_read_from_the_index(conditions: list[str], read: str) -> None:
    plan = plan_search("shop", parse_conditions("shop", DECLARED, conditions))
    assert plan.attribute == read and len(plan.conditions) == len(conditions)


def test_contradictions_read_nothing_and_equalities_are_one_value() -> None:
    assert plan_search("shop", parse_conditions("shop", DECLARED, ["amount>5", "amount<3"])).empty
    plan = plan_search("shop", parse_conditions("shop", DECLARED, ["amount=7"]))
    assert plan.low == encode("i", 7) + "!" and plan.high == encode("i", 7) + "!~" and not plan.empty
    assert plan.partition == "shop#amount#i"
