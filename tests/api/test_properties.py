"""Hostile inputs as properties (hypothesis): any JSON-ish value — lone surrogates, huge integers, NaN, deep
nesting, odd keys — sent as a message body, an action argument or an actor input over HTTP is either refused
with a 4xx that changes nothing stored, or accepted; and after the wake-ups ran, the actor's state still
loads and its wake-ups never failed."""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dormant.http.keys import encode_key
from dormant.settings import Settings
from tests.api.apps import registry
from tests.api.support import dump_store, mangum_harness

EXAMPLES = int(os.environ.get("DORMANT_PROPERTY_EXAMPLES", "120"))  # `make fuzz` runs more
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))

# Text with lone surrogates among ordinary characters; integers up to far beyond the stored limit.
surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, categories=["Cs"])
texts = st.text(st.characters() | surrogates, max_size=12) | st.sampled_from(
    ["\ud800", "a\udfffb", "4111 1111 1111 1111", "", "~2F", "..", "%FF"])
numbers = (st.integers(min_value=-(10 ** 1200), max_value=10 ** 1200) | st.floats(allow_nan=True, allow_infinity=True)
           | st.integers())
leaves = st.none() | st.booleans() | numbers | texts
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
                      max_leaves=30)
deep = st.integers(min_value=60, max_value=70).map(lambda depth: _nest(depth))


def _nest(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth - 1):
        value = [value]
    return value


def _encode(value: Any) -> bytes:
    """JSON text for any value, as a hostile client would write it (surrogates escaped, NaN as NaN)."""
    return json.dumps(value, ensure_ascii=True, allow_nan=True).encode()


class Api:
    """The app behind Mangum over one TestEnv, shared by all examples (state accumulates, as in life)."""

    def __init__(self) -> None:
        self._harness = mangum_harness(registry, Settings(dev=True, max_body_bytes=64 * 1024))
        self.harness = self._harness.__enter__()
        self.requests = 0

    def request(self, method: str, path: str, body: bytes | None) -> tuple[int, Any]:
        from tests.api.support import http_api_v2_event, lambda_body

        self.requests += 1
        response = self.harness.handler(http_api_v2_event(method, path, body=body,
                                                          headers={"content-type": "application/json"}), None)
        return response["statusCode"], lambda_body(response)

    def settle(self) -> None:
        self.harness.run(self.harness.env.run_until_idle())

    def close(self) -> None:
        self._harness.__exit__(None, None, None)


API: Api | None = None


def api() -> Api:
    global API
    if API is None:
        API = Api()
    return API


def _check(method: str, path: str, body: bytes | None) -> None:
    target = api()
    target.settle()
    env = target.harness.env
    before = dump_store(env.store)
    status, answer = target.request(method, path, body)
    assert status < 500, (status, answer)
    if status >= 400:
        assert set(answer) == {"error"} and answer["error"]["code"], answer
        assert dump_store(env.store) == before, f"{status} {answer} changed the store"
        return
    target.settle()
    assert env.failures == [], env.failures[-1].error


@SETTINGS
@given(values)
def test_any_message_body_is_refused_cleanly_or_stays_healthy(value: Any) -> None:
    _check("POST", "/actors/deep/d/queues/any", _encode(value))
    status, _ = api().request("GET", "/actors/deep/d/state", None)
    assert status in (200, 404)


@SETTINGS
@given(values)
def test_any_note_argument_is_refused_cleanly_or_stays_healthy(value: Any) -> None:
    _check("POST", "/actors/notes/p/actions/add_note", _encode([value]))
    status, state = api().request("GET", "/actors/notes/p/state", None)
    assert status in (200, 404) and (status == 404 or all(isinstance(n, str) for n in state["notes"]))


@SETTINGS
@given(values)
def test_any_body_for_a_typed_queue_is_refused_cleanly_or_stays_healthy(value: Any) -> None:
    _check("POST", "/actors/notes/p/queues/raw", _encode(value))  # a body the step appends to a list[str]
    status, state = api().request("GET", "/actors/notes/p/state", None)
    assert status in (200, 404) and (status == 404 or all(isinstance(n, str) for n in state["notes"]))


@SETTINGS
@given(values)
def test_any_actor_input_is_refused_cleanly_or_stays_healthy(value: Any) -> None:
    _check("PUT", "/actors/notes/input", _encode({"input": value}))


@SETTINGS
@given(deep)
def test_nesting_around_the_limit(value: Any) -> None:
    _check("POST", "/actors/deep/d/queues/any", _encode(value))


@SETTINGS
@given(st.lists(texts, min_size=1, max_size=6))
def test_any_key_is_refused_cleanly_or_names_exactly_that_actor(parts: list[str]) -> None:
    try:
        segment = encode_key(parts)
    except Exception:
        return  # not a key (empty part): the client refuses it itself
    _check("PUT", f"/actors/notes/{segment}", None)
    status, answer = api().request("PUT", f"/actors/notes/{segment}", None)
    if status < 300:
        assert answer["key"] == parts


def teardown_module() -> None:
    if API is not None:
        API.close()
        assert API.requests > 0
