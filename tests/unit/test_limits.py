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
    with pytest.raises(InvalidMessageIdError) as reserved:
        check_message_id("dormant:another")
    try:
        check_message_id(text)
    except InvalidMessageIdError as error:
        # (the reserved-id rule names its prefix, the same text for every such id: "dormant:" itself is no echo)
        assert text not in str(error) or len(text) < 3 or str(error) == str(reserved.value)


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


async def test_a_commit_reuses_the_sizes_its_step_check_measured_and_they_are_exact() -> None:
    """Serialize once (issue 28): a step's commit takes the sizes measured when its result was checked
    (dormant.workflow.checked), state included, and each is what measuring the committed value gives."""
    from dataclasses import replace

    from pydantic import BaseModel

    from dormant import StepContext, WorkflowContext, actor, queue, setup
    from dormant.core.limits import draft_sizes, json_size
    from dormant.testing import TestEnv

    class Tally(BaseModel):
        seen: list[str] = []

    counter = actor("sized", state=Tally, queues={"add": queue(dict)})
    measured: list[object] = []

    @counter.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def iteration(loop: WorkflowContext) -> None:
            message = await loop.queue.next("next")

            def add(s: StepContext) -> dict[str, object]:
                s.state.seen.append("é" * message.body["n"])  # (non-ASCII: UTF-8 bytes, not characters)
                return {"n": message.body["n"], "at": 1.5e-7}
            await loop.step("add", add)
        await ctx.loop("loop", iteration)

    import json

    import dormant.workflow.sizing as sizing
    encoders = (sizing.to_json, sizing.python_json_size)
    python_measured: list[object] = []

    def fast(value: object) -> bytes:
        measured.append(json.dumps(value, sort_keys=True))
        return encoders[0](value)

    def python(value: object) -> int:
        python_measured.append(json.dumps(value, sort_keys=True))
        return encoders[1](value)

    async with TestEnv(setup(counter)) as env:
        handle = await env.client.create("sized", ["k"])
        await env.run_until_idle()
        for n in (3, 70):
            await handle.send("add", {"n": n})
        # (the encoders every measuring uses: the check's, the commit's and the store's)
        sizing.to_json, sizing.python_json_size = fast, python  # type: ignore[assignment]
        try:
            await env.run_until_idle()
        finally:
            sizing.to_json, sizing.python_json_size = encoders  # type: ignore[assignment]
        drafts = [logged.draft for logged in env.store.commit_log]
    assert len([draft for draft in drafts if draft.state is not None]) == 2  # a step's result each
    if sizing.FAST_PATH:
        assert measured and len(measured) == len(set(measured))  # each value serialized once: entries, state
        # (a text with a float's marks measured again by Python's encoder, once: the step's entries, with 1.5e-7)
        assert len(python_measured) == len(set(python_measured)) == 2
        assert all("1.5e-07" in v for v in python_measured)
    else:  # a pydantic-core too old to mark its floats (the lowest allowed): Python's encoder measures all, once each
        assert not measured and python_measured and len(python_measured) == len(set(python_measured))
    for draft in drafts:
        assert draft.sizes is not None
        fresh = draft_sizes(replace(draft, sizes=None))
        assert draft.sizes == fresh
        assert fresh.state == json_size(draft.state) and fresh.upserts == [json_size(u) for u in draft.upserts]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(st.characters(exclude_categories=("Cs",))),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=20)


def _python_size(value: object) -> int:
    import json
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


@given(_JSON)
def test_json_size_is_the_size_of_pythons_json_text(value: object) -> None:
    """json_size measures with pydantic-core's encoder where it writes Python's text, else with Python's: always the
    size the stores write (the kept-versions ring chooses its snapshots by it, as the DynamoDB store does)."""
    from dormant.workflow.sizing import json_size
    assert json_size(value) == _python_size(value)


@given(st.lists(_JSON, max_size=4))
def test_sizes_measured_together_are_each_the_size_of_pythons_json_text(values: list[object]) -> None:
    """json_sizes (a commit's entries: one search of their texts for a float's marks) gives each value's own size."""
    from dormant.workflow.sizing import json_sizes
    assert json_sizes(values) == [_python_size(value) for value in values]


@given(st.lists(_JSON, max_size=4))
def test_the_total_of_values_measured_as_one_text_is_the_sum_of_their_sizes(values: list[object]) -> None:
    """json_total (a commit's entries for the memory store, which decides by their sum): one text of them all, its
    brackets and commas taken off, is the sum of each value's size as Python's json writes it."""
    from dormant.workflow.sizing import json_total
    assert json_total(values) == sum(_python_size(value) for value in values)


def test_entries_measured_together_are_refused_over_the_ceiling_each_as_before(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Sizes of entries measured together (DraftSizes.of_entries) give each entry's size when it is read, and the
    store's check refuses an entry over the per-value ceiling by its own size, naming it, as with sizes measured
    apart; within it, nothing is measured entry by entry (the ceiling lowered here)."""
    from dataclasses import replace

    from dormant.core import limits
    from dormant.errors import ItemTooLargeError
    from dormant.workflow import host
    from dormant.workflow.checked import measured
    from dormant.workflow.host import CommitDraft
    apart: list[int] = []  # entries measured one by one (DraftSizes.upserts read)

    def json_sizes(values: list[object]) -> list[int]:
        apart.append(len(values))
        return [_python_size(value) for value in values]
    monkeypatch.setattr(host, "json_sizes", json_sizes)
    entries = [{"location": "a", "kind": "step", "name": "a", "seq": 1, "output": "x" * 40},
               {"location": "b", "kind": "step", "name": "b", "seq": 2, "output": [1.5e-7, "\u0001"]},
               {"location": "c", "kind": "loop", "name": "c", "seq": 3, "iteration": 2}]
    sizes = [_python_size(entry) for entry in entries]
    draft = CommitDraft(upserts=entries, deleted_prefixes=[], state={"n": 1}, consumed_ids=[], responses={},
                        events=[], workflow=None)
    together = measured(draft, 7, together=True)
    assert together.upserts_total == sum(sizes) and not apart
    assert together.upserts == sizes and together == measured(draft, 7) and apart == [3]
    biggest = entries[sizes.index(max(sizes))]["location"]
    for ceiling, refused in ((max(sizes) - 1, biggest), (max(sizes), None), (sum(sizes) + 7, None)):
        monkeypatch.setattr(limits, "VALUE", replace(limits.VALUE, maximum=ceiling))
        made = replace(draft, sizes=measured(draft, 7, together=True))
        apart.clear()
        if refused is None:
            limits.check_draft("t", made)
            assert apart == ([] if ceiling >= sum(sizes) + 7 else [3])  # (within it by the sum: decided by it)
        else:
            with pytest.raises(ItemTooLargeError, match=f"history entry '{refused}'"):
                limits.check_draft("t", made)


def test_sizes_measured_together_where_one_value_has_a_float_written_differently() -> None:
    from dormant.workflow.sizing import json_sizes
    for values in ([{"a": 1}, 1e16, "x"], [1e-5, {"id": "14e799b8-176e-49af"}], [{"t": [1, -5e-5]}, 2.5], [1, 1e-7]):
        assert json_sizes(values) == [_python_size(value) for value in values]


def test_json_size_of_floats_written_differently_by_the_two_encoders() -> None:
    from dormant.workflow.sizing import json_size
    for x in (1e-5, 5e-5, 9.99e-5, 1e-4, 1e-6, 1.5e-300, 5e-324, 1e15, 9.999999999999998e15, 1e16, 1e21, 1.7e308, 0.0,
              -0.0, 123456789.125, 1764962000.123, 2.0**53):
        for value in (x, -x, [x, "a"], {"t": x, "e-": "e+"}, ["a,1", -x], {"id": "14e799b8-176e-49af", "t": [1, x]}):
            assert json_size(value) == _python_size(value), value
    big = "x" * 70_000  # (past the text searched for two-byte marks: any "e" sends it to Python's encoder)
    for value in ({"p": [big]}, {"p": [big], "f": 5e-5}, {"p": [big], "f": 1e16}, {"p": [big, "é"], "n": 2.5}):
        assert json_size(value) == _python_size(value)
    with pytest.raises(UnicodeEncodeError):
        json_size({"lone": "\ud800"})  # as before: the stores cannot write it


def test_a_strings_exponent_like_text_is_measured_by_the_fast_encoder() -> None:
    """Only a number's exponent is a mark of a float written differently: a UUID's "...6e-4..." (a message id, in
    most message entries) is not, so its entry is measured by pydantic-core, not by Python's encoder (4x slower)."""
    import dormant.workflow.sizing as sizing
    if not sizing.FAST_PATH:  # (an older pydantic-core: Python's encoder measures everything)
        pytest.skip("this pydantic-core's floats are measured by Python's encoder")
    for text in ("14e799b8-176e-49af-bdb8-0a89d9f35b12", "1e+5 is a string", "x,1.5e-7", "0.00001"):
        value = {"messages": [{"id": text, "at": 1767225600.0}]}
        fast = sizing.to_json(value)
        assert sizing.same_as_python(fast) is (text[0] != "x" and "0.0000" not in text), text
        assert sizing.json_size(value) == _python_size(value)
    for value in (1e-7, [1, -1e-7], {"a": 1.5e300}, {"a": ["s", 5e-5]}, -1e16):
        assert not sizing.same_as_python(sizing.to_json(value)), value


@given(_JSON, st.integers(min_value=0, max_value=3))
def test_a_checked_values_size_with_its_big_strings_measured_apart_is_pythons(value: object, threshold: int) -> None:
    """shaped_size (a state's size: its big strings measured on their own, kept by identity, the rest as one text
    without them) is exactly what Python's json writes, for every kind of value; `threshold` makes strings "big" from
    a few characters, so the generated values have them at every depth, in lists and objects, the value itself one."""
    import dormant.workflow.sizing as sizing
    import dormant.workflow.values as values
    original = sizing.BIG_STRING
    sizing.BIG_STRING = threshold
    try:
        for _ in range(2):  # (the second time, the big strings' sizes are the kept ones)
            shape = values.check_json_shape(value)
            assert sizing.shaped_size(value, shape) == _python_size(value)
    finally:
        sizing.BIG_STRING = original


def test_a_checked_values_shape_names_its_big_strings_and_floats_and_measuring_changes_nothing() -> None:
    from copy import deepcopy

    from dormant.workflow.sizing import BIG_STRING, shaped_size
    from dormant.workflow.values import check_json_shape
    big, other = "b" * BIG_STRING, "é" * (BIG_STRING + 1)
    shared = [big, 1]
    value = {"a": [big, "small", {"k": other}], "t": (big,), "s": shared, "again": shared, "f": 2.5}
    before = deepcopy(value)
    shape = check_json_shape(value)
    assert shape.floats and sorted(len(text) for _, text in shape.big) == [BIG_STRING] * 4 + [BIG_STRING + 1]
    assert shaped_size(value, shape) == _python_size(value)
    assert value == before and value["a"][0] is big and value["s"] is value["again"] is shared
    assert not check_json_shape({"n": 1, "s": "x" * (BIG_STRING - 1)}).floats
    assert check_json_shape("x" * BIG_STRING).big == [(None, "x" * BIG_STRING)]


_ODD = st.sampled_from([float("nan"), float("inf"), "\ud800", 10 ** 1001, object(), (1, "t"), True, 2.5, "x" * 3])
_ANY = st.recursive(
    _ODD | st.none() | st.integers(min_value=-(10**40), max_value=10**40) | st.text(max_size=4),
    lambda inner: (st.lists(inner, max_size=4)
                   | st.dictionaries(st.sampled_from(["a", "é", "\ud800", "__dormant_blob__", 5]), inner, max_size=3)),
    max_leaves=12)


def _reference_walk(value: object, big_from: int) -> tuple[str | None, bool, list[object]]:
    """The walk as it was before valid scalars were taken in place: a stack of every part, the last child first.
    (the path of the first problem found, whether a float occurs, the big strings in the order found)"""
    import math

    from dormant.workflow.values import MAX_DEPTH, RESERVED_KEY

    def _path(route: object) -> str:  # (the keys generated: "a", or by position)
        parts = []
        while isinstance(route, tuple):
            key = ".a" if route[1] == "a" else f"[<key #{route[-1] + 1}>]"
            parts.append(f"[{route[1]}]" if len(route) == 2 else key)
            route = route[0]
        return "$" + "".join(reversed(parts))
    stack: list[tuple[object, object, int]] = [(value, None, 0)]
    floats, big = False, []
    while stack:
        item, route, depth = stack.pop()
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, str):
            try:
                item.encode()
            except UnicodeEncodeError:
                return _path(route), floats, big
            if len(item) >= big_from:
                big.append(item)
        elif isinstance(item, int):
            if abs(item) >= 10 ** 1000:
                return _path(route), floats, big
        elif isinstance(item, float):
            if not math.isfinite(item):
                return _path(route), floats, big
            floats = True
        elif isinstance(item, (list, tuple)):
            if depth >= MAX_DEPTH:
                return _path(route), floats, big
            stack.extend((child, (route, index), depth + 1) for index, child in enumerate(item))
        elif isinstance(item, dict):
            if depth >= MAX_DEPTH:
                return _path(route), floats, big
            for index, (key, child) in enumerate(item.items()):
                if not isinstance(key, str) or key == RESERVED_KEY or "\ud800" in key:
                    return f"{_path(route)}[<key #{index + 1}>]", floats, big
                stack.append((child, (route, key, index), depth + 1))
        else:
            return _path(route), floats, big
    return None, floats, big


@given(_ANY, st.integers(min_value=0, max_value=3))
def test_the_walk_finds_the_problem_the_plain_walk_found(value: object, threshold: int) -> None:
    """Valid scalars are taken in place, not pushed: the same first problem is named (when there are several), the same
    floats and big strings are found (the big strings in another order: their sizes do not depend on it)."""
    import dormant.workflow.sizing as sizing
    import dormant.workflow.values as values
    original = sizing.BIG_STRING
    sizing.BIG_STRING = threshold
    try:
        path, floats, big = _reference_walk(value, threshold)
        problem = values.json_problem(value)
        assert (problem[0] if problem else None) == path
        if path is None:
            shape = values.check_json_shape(value)
            listed = [text for texts in shape.texts for text in texts.strings if len(text) >= threshold]
            assert all(any(len(text) >= threshold for text in texts.strings) for texts in shape.texts)
            found = sorted([*(text for _, text in shape.big), *listed])
            assert shape.floats == floats and found == sorted(map(str, big))
    finally:
        sizing.BIG_STRING = original


def test_a_flat_objects_shape_is_the_walks_at_every_edge_of_its_shortcut() -> None:
    """check_json_shape takes an object of plain fields without the walk: the same floats and big strings (a string of
    BIG_STRING characters is big, one fewer is not), and any other object, a problem in it included, goes to the walk
    (the same error and path)."""
    from dormant.workflow.errors import InvalidJsonError
    from dormant.workflow.sizing import BIG_STRING
    from dormant.workflow.values import check_json_shape, json_problem
    below, big = "x" * (BIG_STRING - 1), "y" * BIG_STRING
    plain = [{}, {"n": 1, "s": below, "b": True, "z": None}, {"f": 0.5, "n": -(10 ** 999)}, {"s": big, "n": 2},
             {"a": 1, "s": "é", "t": big}, {"n": 1, "l": [1.5]}, {"é": 1}]
    for value in plain:
        path, floats, found = _reference_walk(value, BIG_STRING)
        assert path is None
        shape = check_json_shape(value)
        assert (shape.floats, [text for _, text in shape.big], shape.texts) == (floats, found, [])
    for value in [{"a": float("nan")}, {"a": 10 ** 1000}, {"__dormant_blob__": 1}, {5: 1}, {"a": "\ud800"},
                  {"a": object()}, {"b": 1, "a": float("inf")}]:  # (the reference names the key "a" alone)
        problem = json_problem(value)
        assert problem is not None
        with pytest.raises(InvalidJsonError) as raised:
            check_json_shape(value, "it")
        assert raised.value.path == problem[0] == _reference_walk(value, BIG_STRING)[0]


def test_an_error_names_the_same_path_as_before() -> None:
    """check_json's routes are made per part and turned into a path only for the problem found."""
    from dormant.workflow.errors import InvalidJsonError
    from dormant.workflow.values import check_json, check_json_shape, json_problem
    cases = {"$.a[1].b": {"a": [1, {"b": float("nan")}]}, "$['two words'][0]": {"two words": ["\ud800"]},
             "$[2][<key #2>]": [0, 1, {"x": 1, 5: 2}], "$": 10 ** 1001, "$.a[<key #1>]": {"a": {"__dormant_blob__": 1}},
             "$[<key #1>][0]": {"\x00": [object()]}}
    for path, value in cases.items():
        problem = json_problem(value)
        assert problem is not None and problem[0] == path, (path, problem)
        for check in (check_json, check_json_shape):
            with pytest.raises(InvalidJsonError) as raised:
                check(value, "it")
            assert raised.value.path == path


def test_big_string_sizes_are_kept_by_identity_within_a_budget_and_dropped_when_nothing_else_holds_them() -> None:
    from sys import getsizeof

    from dormant.workflow.sizing import StringSizes
    texts = ["".join(("a", str(n), "\n" * 30)) for n in range(3)]  # (escapes: a size is not a length)
    sizes = StringSizes(budget=3 * getsizeof(texts[0]))
    for text in texts:
        assert sizes.size(text) == _python_size(text)
    assert len(sizes) == 3 and sizes.kept == sum(getsizeof(text) for text in texts)
    fourth = "".join(("b", "c" * 40))
    assert sizes.size(fourth) == 43 and sizes.kept <= sizes.budget and len(sizes) == 2  # the oldest went: over budget
    sizes.size(texts[2])  # (kept: no new entry)
    assert len(sizes) == 2
    del texts[2], text  # (the loop variable held it too)
    sizes.sweep()  # texts[2] is only held here now; the fourth string is still ours
    assert len(sizes) == 1 and sizes.kept == getsizeof(fourth)
    fifth = "".join(("d", "e" * 20))
    sizes.size(fifth)
    sizes.sweep()
    assert len(sizes) == 2  # (a live string stays, however often it is swept)
    del fifth
    sizes.sweep()
    assert len(sizes) == 2  # (nothing measured since the last sweep: nothing looked at)
    for _ in range(2):
        sizes.size("".join(("f", "g" * 20)))  # (a temporary: dead as soon as measured)
        sizes.sweep()  # the two oldest looked at: the fifth (dead: gone), then the first temporary
        assert len(sizes) == 2 and sizes.kept == getsizeof(fourth) + getsizeof("f" * 21)  # it and the last temporary
    sizes.sweep(at_least=2)  # (a new state cell's sweep: nothing measured since, two looked at)
    assert len(sizes) == 1 and sizes.kept == getsizeof(fourth)


async def test_a_state_of_big_strings_is_sized_by_the_engine_exactly_and_refused_over_the_ceiling(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A step changing one big string of a big state: the commit's sizes come from the state's check (each big string
    measured once while it lives) and equal Python's json; over the per-value ceiling the step's attempt fails, on the
    same ItemTooLargeError as before (the ceiling lowered here, so that the test stays small)."""
    from dataclasses import replace

    from pydantic import BaseModel

    import dormant.core.limits as limits
    from dormant import StepContext, StepExhaustedError, WorkflowContext, actor, queue, setup
    from dormant.core.limits import draft_sizes
    from dormant.testing import TestEnv
    from dormant.workflow.sizing import BIG_STRING

    class Big(BaseModel):
        parts: list[str] = []
        note: str = ""

    import dormant.workflow.sizing as sizing
    monkeypatch.setattr(sizing, "STRING_SIZES", sizing.StringSizes())
    part = BIG_STRING + 10
    big = actor("bigs", state=Big, queues={"change": queue(dict)})

    @big.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def iteration(loop: WorkflowContext) -> None:
            message = await loop.queue.next("next")

            def apply(s: StepContext) -> None:
                s.state.parts = s.state.parts or ["x" * part] * 4
                s.state.parts[message.body["i"] % 4] = message.body["c"] * message.body["n"]
                s.state.note = "\n\"é"
            try:
                await loop.step("apply", apply, max_retries=0)
            except StepExhaustedError as error:
                s = str(error.__cause__)
                await loop.step("refused", lambda _: s)
        await ctx.loop("loop", iteration)

    async with TestEnv(setup(big)) as env:
        handle = await env.client.create("bigs", ["k"])
        for i, c in enumerate("yz\"é"):
            await handle.send("change", {"i": i, "c": c, "n": part})
        await env.run_until_idle()
        monkeypatch.setattr(limits, "VALUE", replace(limits.VALUE, maximum=5 * part))
        await handle.send("change", {"i": 0, "c": "w", "n": 2 * part})  # 5 parts' worth: over 5 * part as JSON
        await env.run_until_idle()
        drafts = [logged.draft for logged in env.store.commit_log if logged.draft.state is not None]
        state = await handle.state()
    assert len(drafts) == 4 and [p[0] for p in state.parts] == ["y", "z", '"', "é"]
    assert len(sizing.STRING_SIZES) >= 4  # (the engine measured them: the state's check knew its big strings)
    for draft in drafts:
        assert draft.sizes is not None and draft.sizes.state == _python_size(draft.state)
        assert draft.sizes == draft_sizes(replace(draft, sizes=None))
    refusals = [entry for entry in await handle.history() if entry.location.endswith("refused")]
    assert len(refusals) == 1 and "over the limit (stored value)" in str(refusals[0].output)


@given(st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
       | st.text(st.characters(max_codepoint=127), max_size=40))
def test_a_strings_size_without_serializing_it_is_pythons(text: str) -> None:
    """string_size (a new big string of a state): an ASCII string without a character JSON escapes is its length and
    its quotes, found without serializing it; any other is serialized."""
    from dormant.workflow.sizing import string_size
    assert string_size(text) == _python_size(text)
    for code in (*range(32), ord('"'), ord("\\"), 127):
        assert string_size("a" * 9000 + chr(code)) == _python_size("a" * 9000 + chr(code)), code


_CHANGE = st.one_of(st.text(max_size=6), st.text(st.characters(max_codepoint=127), max_size=6),
                    st.sampled_from(["\ud800", "x" * 3, 5, None, 2.5, ["a"]]))


@given(st.lists(st.text(st.characters(max_codepoint=127), max_size=6), min_size=1, max_size=6),
       st.lists(st.tuples(st.integers(min_value=0, max_value=5), _CHANGE), max_size=3),
       st.integers(min_value=0, max_value=3), st.booleans())
def test_a_list_of_strings_compared_with_the_last_commits_is_checked_and_sized_as_a_whole_one(
        first: list[str], changes: list[tuple[int, object]], threshold: int, extend: bool) -> None:
    """A state's list of ASCII strings is compared with the same list of its last commit (the baseline) by identity:
    only the strings changed since are checked and measured. The problem found, and the size, are those of the
    state checked and measured whole (Python's json); a list whose length changed is checked whole."""
    import dormant.workflow.sizing as sizing
    import dormant.workflow.values as values
    original = sizing.BIG_STRING
    sizing.BIG_STRING = threshold
    try:
        committed = {"parts": first, "n": 1}
        shape = values.check_json_shape(committed)
        assert sizing.shaped_size(committed, shape) == _python_size(committed)
        parts: list[object] = list(first)  # (the same string objects: a dump of the state keeps them)
        for index, change in changes:
            parts[index % len(parts)] = change
        if extend:
            parts.append("x")
        state = {"parts": parts, "n": 1}
        problem = values.json_problem(state)
        try:
            shape = values.check_json_shape(state, "it", committed)
        except values.InvalidJsonError as error:
            assert problem is not None and error.path == problem[0]
            return
        assert problem is None
        assert sizing.shaped_size(state, shape) == _python_size(state)
        assert sizing.shaped_size(state, values.check_json_shape(state)) == _python_size(state)
    finally:
        sizing.BIG_STRING = original


def test_a_changed_list_of_strings_checks_and_measures_only_its_changed_strings(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The list of the last commit, measured then, is the baseline: of a 100-string list with one string changed,
    one string is checked (`ascii_strings` of one item) and one measured (`string_size`), none serialized; a list
    not measured before is checked and measured whole."""
    import dormant.workflow.sizing as sizing
    import dormant.workflow.values as values
    monkeypatch.setattr(sizing, "STRING_SIZES", sizing.StringSizes())
    checked: list[int] = []
    measured: list[int] = []
    serialized: list[object] = []
    ascii_strings, string_size, to_json = values.ascii_strings, sizing.string_size, sizing.to_json
    monkeypatch.setattr(values, "ascii_strings", lambda items: checked.append(len(items)) or ascii_strings(items))
    monkeypatch.setattr(sizing, "string_size", lambda text: measured.append(len(text)) or string_size(text))
    monkeypatch.setattr(sizing, "to_json", lambda value: serialized.append(value) or to_json(value))
    big = sizing.BIG_STRING
    committed = {"parts": ["x" * big] * 50 + [f"{n}" * big for n in range(10)] * 5}
    shape = values.check_json_shape(committed)
    assert sizing.shaped_size(committed, shape) == _python_size(committed)
    assert checked == [100] and len(measured) == 11  # (the 11 different strings, each once)
    checked.clear(), measured.clear(), serialized.clear()
    state = {"parts": list(committed["parts"])}
    state["parts"][7] = "y" * big
    shape = values.check_json_shape(state, "the state", committed)
    assert sizing.shaped_size(state, shape) == _python_size(state)
    assert checked == [1] and measured == [big]
    assert all(not isinstance(value, str) for value in serialized)  # (only the rest: `{"parts":[]}`)
    checked.clear(), measured.clear()
    again = {"parts": list(state["parts"])}
    again["parts"][7] = "z" * big
    shape = values.check_json_shape(again, "the state", state)  # (the last one's list: measured, so a baseline)
    assert sizing.shaped_size(again, shape) == _python_size(again) and checked == [1] and measured == [big]


def test_kept_lists_are_dropped_when_nothing_else_holds_them_and_at_most_max_lists_are_kept() -> None:
    import gc

    from dormant.workflow.sizing import MAX_LISTS, StringSizes
    sizes = StringSizes()
    held = [["a"], ["b"]]
    for items in held:
        sizes.keep_list(items, tuple(items), 5)
    temporary = ["c"]
    sizes.keep_list(temporary, ("c",), 5)
    assert sizes.listed(held[0]) == (("a",), 5, None) and sizes.listed(["a"]) is None
    del temporary
    gc.collect()
    sizes.sweep(at_least=3)
    assert sizes.listed(held[0]) == (("a",), 5, None) and sizes.listed(held[1]) == (("b",), 5, None)
    assert sizes.kept_lists == 2
    many = [[str(n)] for n in range(MAX_LISTS + 5)]
    for items in many:
        sizes.keep_list(items, tuple(items), 3)
    assert sizes.kept_lists == MAX_LISTS and sizes.listed(many[-1]) == ((str(MAX_LISTS + 4),), 3, None)
    assert sizes.listed(held[0]) is None  # (the oldest went first)


@given(st.lists(st.tuples(st.integers(min_value=0, max_value=4), st.integers(min_value=0, max_value=5),
                          st.booleans()), min_size=1, max_size=8),
       st.integers(min_value=1, max_value=3))
def test_strings_new_in_a_list_are_left_unmeasured_within_bounds_and_measured_exactly_on_demand(
        changes: list[tuple[int, int, bool]], threshold: int) -> None:
    """Commit after commit, each changing strings of a list of strings (a string put at two places, strings with
    escapes, one measured between commits or not): the size left out of the unmeasured strings plus their bounds
    holds Python's size, and measuring them gives it exactly (`shaped_size`, and a draft's `state`)."""
    import dormant.workflow.sizing as sizing
    import dormant.workflow.values as values
    from dormant.workflow.host import DraftSizes
    original = sizing.BIG_STRING
    sizing.BIG_STRING = threshold
    try:
        pool = ["".join(("a" * n, "\n" * (n % 2), '"' * (n % 3 == 0))) for n in range(1, 6)]  # (fresh objects)
        committed = {"parts": [pool[0], pool[1], pool[1], "s"], "n": 1}
        sizing.shaped_size(committed, values.check_json_shape(committed))
        for index, pick, measure in changes:
            parts = list(committed["parts"])
            parts[index % len(parts)] = "".join(pool[pick % len(pool)])  # (a new object: never measured)
            if index % 3 == 0:
                parts[(index + 1) % len(parts)] = parts[index % len(parts)]  # (the same new string twice)
            state = {"parts": parts, "n": 1}
            known, unmeasured = sizing.shaped_sizes(state, values.check_json_shape(state, "it", committed))
            sizes = DraftSizes([], known, [], [], unmeasured)
            assert sizes.state_least <= _python_size(state) <= sizes.state_most
            if measure:
                assert sizes.state == _python_size(state) == sizes.state_least == sizes.state_most
            committed = state
        assert sizing.shaped_size(committed, values.check_json_shape(committed)) == _python_size(committed)
    finally:
        sizing.BIG_STRING = original


async def test_a_changed_big_states_new_string_is_not_measured_where_its_bounds_decide_and_versions_are_the_same(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A state over the ring's snapshot weight (every commit a snapshot, decided by the least it can weigh) and within
    the per-value ceiling (by the most it can weigh): a step changing one of its big strings measures no string; the
    commits' state sizes are Python's when read; the versions kept are those kept when every string is measured."""
    from pydantic import BaseModel

    import dormant.workflow.sizing as sizing
    from dormant import StepContext, WorkflowContext, actor, queue, setup
    from dormant.testing import TestEnv

    class Parts(BaseModel):
        parts: list[str] = []

    part = sizing.BIG_STRING + 10
    parts = actor("parts", state=Parts, queues={"change": queue(dict)})

    @parts.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def iteration(loop: WorkflowContext) -> None:
            message = await loop.queue.next("next")

            def apply(s: StepContext) -> None:
                s.state.parts = s.state.parts or ["x" * part] * 12  # (about 98 KB: over the ring's 96 KiB)
                s.state.parts[message.body["i"] % 12] = message.body["c"] * part
            await loop.step("apply", apply)
        await ctx.loop("loop", iteration)

    async def versions(measure_all: bool) -> tuple[list[object], list[int]]:
        monkeypatch.setattr(sizing, "STRING_SIZES", sizing.StringSizes())
        if measure_all:  # (as before: each new string measured when its list is)
            monkeypatch.setattr(sizing.StringSizes, "knows", lambda self, text: True)
        measured: list[int] = []
        string_size = sizing.string_size
        monkeypatch.setattr(sizing, "string_size", lambda text: measured.append(len(text)) or string_size(text))
        async with TestEnv(setup(parts)) as env:
            handle = await env.client.create("parts", ["k"])
            await handle.send("change", {"i": 0, "c": "y"})
            await env.run_until_idle()
            measured.clear()
            for i, c in enumerate("zw\nqabcdefghijk\""):  # (each a change: a character not there before)
                await handle.send("change", {"i": i + 1, "c": c})
                await env.run_until_idle()
            counted = list(measured)
            drafts = [logged.draft for logged in env.store.commit_log if logged.draft.state is not None]
            kept = [(v.version, v.changed) for v in await handle.versions()]
        for draft in drafts:
            assert draft.sizes is not None and draft.sizes.state == _python_size(draft.state)
        return kept, counted

    deferred, counted = await versions(False)
    assert counted == []  # (no string measured: the bounds decided)
    every, counted_before = await versions(True)
    assert deferred == every and len(counted_before) == 16


def test_the_ring_takes_the_snapshots_exact_sizes_take_when_a_states_strings_are_not_measured() -> None:
    """The kept-versions ring decides on the least a state can weigh when that makes a snapshot due, else on its exact
    size (its strings measured then): the same snapshots as with every size measured."""
    from dormant.runtime.versions import VersionRing
    from dormant.workflow.execution import CommitDraft
    from dormant.workflow.host import DraftSizes
    from dormant.workflow.sizing import Unmeasured

    def draft(text: str, deferred: bool) -> CommitDraft:
        state = {"t": text}
        made = CommitDraft(upserts=[], deleted_prefixes=[], state=state, consumed_ids=[], responses={}, events=[],
                           workflow=None)
        known = _python_size(state) - _python_size(text)
        made.sizes = (DraftSizes([], known, [], [], (Unmeasured({id(text): (text, 1)}, len(text), 1),)) if deferred
                      else DraftSizes([], known + _python_size(text), [], []))
        return made

    # 40,000 newlines: at least 40,002 bytes, 80,002 exactly ("a"s: exactly their least). The sixth is due for its
    # exact size only (20,010 since the last snapshot, then at least 40,010, exactly 80,010: over 96 KiB)
    texts = ["\n" * 40_000, "a" * 30_000, "\n" * 20_000, "a" * 70_000, "\n" * 10_000, "\n" * 40_000, "a" * 5]
    kept = []
    for deferred in (False, True):
        ring = VersionRing(16, {"meta": {}, "state": {}, "workflow": {}, "history": []}, 0.0)
        kept.append([ring.add(version, draft("".join(text), deferred), None, dict)
                     for version, text in enumerate(texts, start=2)])
    assert kept[0] == kept[1] and kept[0] == [False, True, False, True, False, True, False]


def test_check_values_does_not_measure_an_empty_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """A send checks its body and its `args` (an empty list but for scheduled actions): an empty string, list or
    object is a few bytes, within any ceiling, and is not serialized to be measured."""
    import dormant.core.limits as limits

    measured: list[object] = []

    def counted(value: object) -> int:
        measured.append(value)
        return 10

    monkeypatch.setattr(limits, "json_size", counted)
    limits.check_values("a", [("the body", {"d": 1}), ("args", []), ("empty", {}), ("text", ""), ("n", 0)])
    assert measured == [{"d": 1}]


def test_a_text_without_a_floats_marks_is_taken_without_a_walk_over_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """same_as_python looks for each mark itself; only a text holding "e-" or "e+" has its hits looked at one by one
    (a UUID's "...6e-4..." is one, not a number's exponent)."""
    import dormant.workflow.sizing as sizing

    walked: list[bytes] = []
    real = sizing._no_exponent

    def counted(text: bytes, mark: bytes) -> bool:
        walked.append(mark)
        return real(text, mark)

    monkeypatch.setattr(sizing, "_no_exponent", counted)
    assert sizing.same_as_python(b'{"id":"4436e0bc","n":[1,2.5]}') and walked == []
    assert sizing.same_as_python(b'{"id":"1124bd5e-d33e-4531"}') and walked == [b"e-"]
    assert not sizing.same_as_python(b'{"n":1e-07}') and walked == [b"e-", b"e-"]
    assert not sizing.same_as_python(b'[1e+16]') and walked == [b"e-", b"e-", b"e+"]


_TIME = st.floats(allow_nan=False, allow_infinity=False)
_OUTPUT = (st.none() | st.booleans() | st.integers(min_value=-(2 ** 63), max_value=2 ** 63)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(st.characters(exclude_categories=("Cs",))))


@given(st.text(st.characters(exclude_categories=("Cs",))), st.text(st.characters(exclude_categories=("Cs",))),
       st.integers(min_value=0, max_value=2 ** 63), st.integers(min_value=1, max_value=2 ** 63), _OUTPUT, _TIME,
       _TIME, st.none() | _TIME)
def test_a_completed_steps_bound_is_never_under_its_entrys_json(location: str, name: str, seq: int, attempt: int,
                                                                output: object, created: float, at: float,
                                                                started: float | None) -> None:
    """Execution.check_storable skips the check a value within the ceiling would pass by `completed_entry_bound`: it
    is at least the size of the JSON the step's entry is stored as (or None: measured), whatever its strings hold
    (escapes, non-ASCII), its numbers' digits and its floats' exponents."""
    from dormant.workflow.checked import completed_entry_bound
    from dormant.workflow.entries import Entry
    from dormant.workflow.history import EntryKind, EntryStatus

    entry = Entry(location, EntryKind.STEP, name, seq, created_at=created, updated_at=created, started_at=started)
    bound = completed_entry_bound(entry, output, attempt, at)
    entry.status, entry.output, entry.attempts, entry.ended_at, entry.updated_at = (
        EntryStatus.COMPLETED, output, attempt, at, at)  # (as the step's success records it)
    if seq.bit_length() > 63 or attempt.bit_length() > 63 or (type(output) is int and output.bit_length() > 63):
        assert bound is None
    else:
        assert bound is not None and bound >= _python_size(entry.to_json())


def test_a_completed_steps_bound_is_unknown_where_its_entry_holds_more() -> None:
    """A list or object output, or a field of some kinds set (a loop's state, a queue wait's messages...), is not
    bounded at once: the check measures it."""
    from dormant.workflow.checked import completed_entry_bound
    from dormant.workflow.entries import Entry
    from dormant.workflow.history import EntryKind

    def entry() -> Entry:
        return Entry("s", EntryKind.STEP, "s", 1, created_at=1.0, updated_at=1.0, started_at=1.0)

    assert completed_entry_bound(entry(), 1, 1, 2.0) is not None
    assert completed_entry_bound(entry(), [1], 1, 2.0) is None and completed_entry_bound(entry(), {}, 1, 2.0) is None
    for field, value in (("loop_state", "x" * 100), ("rollback_done", True), ("deadline", 3.0), ("iteration", 2),
                         ("winner", "b"), ("items", [1]), ("removed_kind", "step"), ("throttled_since", 1.0)):
        held = entry()
        held.put(field, value)
        assert completed_entry_bound(held, 1, 1, 2.0) is None, field
    assert completed_entry_bound(Entry("s", EntryKind.STEP, "s", 1, created_at=1), 1, 1, 2.0) is None  # (an int time)


def test_every_field_of_some_kinds_makes_a_completed_steps_bound_unknown() -> None:
    """Each field only some kinds use (Entry's RARE_FIELDS, a new one included the day it is added: a test in
    tests/unit/test_entries.py keeps it the class's) makes the bound unknown when it is set, so the bound never leaves
    out a field the entry's JSON holds; those a step's completion clears (its error, failure kind and retry time) are
    the exception. An entry that had one put back to its default is bounded again."""
    from dormant.workflow.checked import completed_entry_bound
    from dormant.workflow.entries import RARE_FIELDS, Entry
    from dormant.workflow.history import EntryKind

    cleared = {"failure_kind", "retry_at"}  # (and `error`, a slot: the completion sets it to None)
    fields = sorted(set(RARE_FIELDS) - cleared)
    assert len(fields) >= 13  # (the fields of some kinds as they stand)
    for name in fields:
        entry = Entry("s", EntryKind.STEP, "s", 1, created_at=1.0, updated_at=1.0, started_at=1.0)
        entry.put(name, object())  # (differs from any default)
        assert completed_entry_bound(entry, 1, 1, 2.0) is None, name
        entry.put(name, getattr(Entry, name))
        assert entry.extra is not None and completed_entry_bound(entry, 1, 1, 2.0) is not None, name


async def test_a_step_within_the_ceiling_by_its_bound_is_not_previewed_and_one_over_it_is_refused_as_before(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the in-memory store, whose check looks at each value's size only, a step whose entry and state are within
    the per-value ceiling by their bound is not checked before its result is accepted (nothing could refuse it); one
    whose bound is over is checked as always: a result over the ceiling (escaped characters: six bytes each) fails the
    step's attempt with ItemTooLargeError, one just under it is accepted, and a state over it is refused likewise (the
    ceiling lowered here, so that the test stays small)."""
    from dataclasses import replace

    from pydantic import BaseModel

    import dormant.core.limits as limits
    from dormant import StepContext, StepExhaustedError, WorkflowContext, actor, queue, setup
    from dormant.client import ActorHandle
    from dormant.runtime.wake import ActorHost
    from dormant.testing import TestEnv
    from dormant.workflow.execution import CommitDraft
    from dormant.workflow.history import HistoryEntry

    class Note(BaseModel):
        text: str = ""

    noted = actor("noted", state=Note, queues={"go": queue(dict)})

    @noted.workflow
    async def run(ctx: WorkflowContext) -> None:
        async def iteration(loop: WorkflowContext) -> None:
            message = await loop.queue.next("next")

            def apply(s: StepContext) -> str:
                s.state.text = "s" * message.body["state"]
                return "\x01" * message.body["out"]  # (`\u0001` in JSON: six bytes a character)
            try:
                await loop.step("apply", apply, max_retries=0)
            except StepExhaustedError as error:
                text = f"{type(error.__cause__).__name__}: {error.__cause__}"
                await loop.step("refused", lambda _: text)
        await ctx.loop("loop", iteration)

    previewed: list[str] = []  # the location of each step entry checked before its result was accepted
    check_commit = ActorHost.check_commit

    def counted(self: ActorHost, draft: CommitDraft) -> None:
        previewed.append(draft.upserts[-1]["location"])
        check_commit(self, draft)
    monkeypatch.setattr(ActorHost, "check_commit", counted)
    ceiling = 2_000

    async def step(handle: ActorHandle, out: int, state: int) -> tuple[bool, bool, HistoryEntry]:
        """(whether it was checked, whether it was refused, its entry): a message's step after another's in the same
        wake-up (the first one's check is the one the entries it received take)."""
        await handle.send("go", {"state": 10, "out": 10})
        await handle.send("go", {"state": state, "out": out})
        await env.run_until_idle()
        entries = sorted(await handle.history(), key=lambda e: e.seq)
        last = [e for e in entries if e.location.rsplit("/", 1)[-1] in ("apply", "refused")][-1]
        apply = [e for e in entries if e.location.endswith("/apply")][-1]
        return apply.location in previewed, last.location.endswith("refused"), last

    async with TestEnv(setup(noted)) as env:
        handle = await env.client.create("noted", ["k"])
        await env.run_until_idle()
        monkeypatch.setattr(limits, "VALUE", replace(limits.VALUE, maximum=ceiling))
        checked, refused, entry = await step(handle, 10, 10)
        assert not checked and not refused  # (within the ceiling by its bound: not previewed)
        size = _python_size(entry.model_dump(mode="json", exclude_defaults=True))
        # (an output of n escaped characters adds 6n bytes to the entry's 10: over the ceiling, and just under it)
        over, under = (ceiling - size) // 6 + 12, (ceiling - size) // 6 + 8
        for out, state, refusal in ((over, 10, True), (under, 10, False), (10, ceiling, True),
                                    (10, ceiling - 20, False)):
            checked, refused, entry = await step(handle, out, state)
            assert checked, (out, state)  # (its bound is over the ceiling: checked)
            assert refused is refusal, (out, state, entry)
            if refused:
                assert entry.output.startswith("ItemTooLargeError"), entry.output
