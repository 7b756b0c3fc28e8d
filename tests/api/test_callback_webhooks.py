"""Callbacks for outside systems over HTTP: a provider's own JSON on `POST /callbacks/{token}/webhook` (the whole
body is the result, validated by the declared model: the workflow gets the model, on replay too), a signature
check (`verify=HmacSignature(...)`: a bad or missing signature is 401 on both POST routes and changes nothing), and
an approval link (`GET .../approve` shows a page and never completes; its form's POST does). Hostile requests get
the right status, never echo what was sent, and change nothing stored."""

from __future__ import annotations

import copy
import json
import os
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from dormant import (
    Approval,
    CallbackError,
    HmacSignature,
    StepContext,
    WorkflowContext,
    actor,
    callback,
    queue,
    setup,
)
from dormant.http.app import create_app
from dormant.settings import Settings
from dormant.testing import TestEnv
from tests.api.support import TOKEN, dump_store, http_api_v2_event, lambda_body, mangum_harness, raw_request, serve

LIMIT = 8192
SECRET_ENV = "DORMANT_TEST_WEBHOOK_SECRET"
SIGNED = HmacSignature(secret_env=SECRET_ENV)
CARD = "4111 1111 1111 1111"
DESCRIPTION = 'Refund <b>42 €</b> to "order-7"? <script>alert(1)</script>'


class Charge(BaseModel):
    """A provider's event: more fields than the workflow needs (extras are ignored)."""

    id: str = Field(min_length=1, max_length=64)
    amount: int = Field(ge=0)


class Seen(BaseModel):
    token: str = ""
    outcome: str = ""
    kinds: list[str] = Field(default_factory=list)


def _flow(name: str, spec: Any) -> Any:
    definition = actor(name, state=Seen, queues={"poke": queue(dict)}, callbacks={"cb": spec})

    @definition.workflow
    async def run(ctx: WorkflowContext) -> None:
        cb = await ctx.callback("cb", timeout=(ctx.input or {}).get("timeout"))

        def hand_out(s: StepContext) -> None:
            s.state.token = cb.token

        await ctx.step("hand-out", hand_out)
        try:
            value = await cb.result()
            outcome = repr(value)
        except CallbackError as error:
            value, outcome = None, type(error).__name__

        def record(s: StepContext) -> None:
            s.state.outcome = outcome
            s.state.kinds.append(type(value).__name__)

        await ctx.step("record", record)
        await ctx.queue.next("poke")  # a second wake-up replays the callback: the model again

        def again(s: StepContext) -> None:
            s.state.kinds.append(type(value).__name__)

        await ctx.step("again", again)

    return definition


typed = _flow("wh-typed", callback(Charge))
raw = _flow("wh-raw", callback())
signed = _flow("wh-signed", callback(Charge, verify=SIGNED))
approval = _flow("wh-approval", callback(Approval, description=DESCRIPTION))
registry = setup(typed, raw, signed, approval)


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(SECRET_ENV, "It's a Secret to Everybody")
    return "It's a Secret to Everybody"


def _app(env: TestEnv) -> Any:
    # iam mode, no identity on any request: the callback routes must not need one
    settings = Settings(auth_mode="iam", inspector_token=TOKEN, max_body_bytes=LIMIT)  # type: ignore[arg-type]
    return create_app(registry, settings, service=env.service)


def _client(env: TestEnv) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=_app(env)), base_url="http://api")


async def _token(env: TestEnv, name: str, key: str, actor_input: Any = None) -> str:
    handle = env.client.get_or_create(name, [key], input=actor_input)
    await handle.status()
    await env.run_until_idle()
    token = (await handle.state()).token
    assert token.startswith("dcb_")
    return str(token)


async def _state(env: TestEnv, name: str, key: str) -> Seen:
    await env.run_until_idle()
    state = await env.client.get_or_create(name, [key]).state()
    assert isinstance(state, Seen)
    return state


def _dump(env: TestEnv) -> dict[str, Any]:
    return {**dump_store(env.store), "callbacks": copy.deepcopy(env.store.callbacks)}


def _no_echo(text: str, *sent: str) -> None:
    for value in sent:
        assert value not in text, f"the answer repeats what was sent: {value[:12]}..."


# -- any JSON body ------------------------------------------------------------------------------------------------

async def test_a_webhook_body_is_the_result_whole_and_the_workflow_gets_the_model_on_replay_too() -> None:
    async with TestEnv(registry) as env, _client(env) as outside:
        token = await _token(env, "wh-typed", "a")
        event = {"id": "ch_1", "amount": 4200, "object": "charge", "livemode": False, "metadata": {"x": [1, 2]}}
        answer = await outside.post(f"/callbacks/{token}/webhook", json=event)
        assert (answer.status_code, answer.json()["status"]) == (202, "accepted")
        state = await _state(env, "wh-typed", "a")
        assert (state.outcome, state.kinds) == ("Charge(id='ch_1', amount=4200)", ["Charge"])
        await env.client.get_or_create("wh-typed", ["a"]).send("poke", {})
        assert (await _state(env, "wh-typed", "a")).kinds == ["Charge", "Charge"]  # replayed: the model again
        retried = await outside.post(f"/callbacks/{token}/webhook", json=event)  # a provider's retry
        assert (retried.status_code, retried.json()["status"]) == (200, "completed")
        other = await outside.post(f"/callbacks/{token}/webhook", json={**event, "amount": 1})
        assert (other.status_code, other.json()["error"]["code"]) == (409, "callback_completed")


async def test_a_body_shaped_like_the_json_api_is_taken_whole_on_the_webhook_route() -> None:
    """The route, not the body, says which form it is: a provider's `{"result": ...}` is its own data."""
    async with TestEnv(registry) as env, _client(env) as outside:
        webhook, api = await _token(env, "wh-raw", "webhook"), await _token(env, "wh-raw", "api")
        body = {"result": "ok", "error": None}
        assert (await outside.post(f"/callbacks/{webhook}/webhook", json=body)).status_code == 202
        assert (await outside.post(f"/callbacks/{api}", json={"result": body})).status_code == 202
        assert (await _state(env, "wh-raw", "webhook")).outcome == (await _state(env, "wh-raw", "api")).outcome \
            == repr(body)


async def test_an_invalid_webhook_body_is_422_naming_the_field_and_changes_nothing() -> None:
    async with TestEnv(registry) as env, _client(env) as outside:
        token = await _token(env, "wh-typed", "a")
        before = _dump(env)
        answer = await outside.post(f"/callbacks/{token}/webhook", json={"id": "ch_1", "amount": CARD})
        assert (answer.status_code, answer.json()["error"]["code"]) == (422, "invalid_body")
        assert "amount" in answer.json()["error"]["message"]
        _no_echo(answer.text, CARD, token)
        missing = await outside.post(f"/callbacks/{token}/webhook", json={"amount": 1})
        assert (missing.status_code, missing.json()["error"]["code"]) == (422, "invalid_body")
        assert "id" in json.dumps(missing.json()["error"]["detail"])
        await env.run_until_idle()
        assert _dump(env) == before


async def test_hostile_webhook_requests_through_uvicorn_change_nothing() -> None:
    async with TestEnv(registry) as env:
        tokens = {"open": await _token(env, "wh-typed", "open"),
                  "done": await _token(env, "wh-typed", "done"),
                  "late": await _token(env, "wh-typed", "late", {"timeout": 10})}
        await env.client.complete_callback(tokens["done"], {"id": "c", "amount": 1})
        await env.advance(10)
        before = _dump(env)
        json_type = {"Content-Type": "application/json"}
        good = b'{"id": "c", "amount": 2}'
        cases = [  # (token, body, headers, status, code)
            ("not-a-token", good, json_type, 400, "invalid_callback_token"),
            ("dcb_" + "Q" * 43, good, json_type, 404, "callback_not_found"),
            ("open", b'{"id": "c", "amount": ', json_type, 400, "invalid_json"),
            ("open", b"", json_type, 400, "invalid_json"),
            ("open", b'{"id": "\\ud800", "amount": 1}', json_type, 400, "invalid_json"),
            ("open", b'{"id": "c", "amount": NaN}', json_type, 400, "invalid_json"),
            ("open", b'{"id": "c", "pad": "' + b"x" * LIMIT + b'"}', json_type, 413, "payload_too_large"),
            ("open", b"id=c&amount=2", {"Content-Type": "application/x-www-form-urlencoded"}, 415,
             "unsupported_media_type"),
            ("open", b"[1, 2]", json_type, 422, "invalid_body"),
            ("done", b'{"id": "other", "amount": 2}', json_type, 409, "callback_completed"),
            ("late", good, json_type, 410, "callback_expired"),
        ]
        problems = []
        async with serve(_app(env)) as url:
            for token, body, headers, status, code in cases:
                response = await raw_request(url, "POST", f"/callbacks/{tokens.get(token, token)}/webhook",
                                             body=body, headers=headers)
                got = response.json()
                if (response.status, got["error"]["code"]) != (status, code):
                    problems.append(f"{token} {body[:30]!r}: {response.status} {got}")
                _no_echo(json.dumps(got), *tokens.values(), "x" * 40)
        await env.run_until_idle()
        assert problems == []
        assert _dump(env) == before


EXAMPLES = int(os.environ.get("DORMANT_PROPERTY_EXAMPLES", "120")) // 4  # `make fuzz` runs more
texts = st.text(st.characters() | st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, categories=["Cs"]),
                max_size=10) | st.sampled_from(["", "ch_1", CARD, "id", "amount"])
leaves = st.none() | st.booleans() | st.integers(min_value=-(10 ** 30), max_value=10 ** 30) | st.floats() | texts
bodies = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
                      max_leaves=12) | st.fixed_dictionaries({"id": texts, "amount": leaves}, optional={"x": leaves})


def test_any_webhook_body_is_either_the_typed_result_or_a_4xx_that_changes_nothing() -> None:
    """Through Mangum (API Gateway v2 events), one TestEnv for all examples."""
    keys = iter(range(10 ** 6))
    with mangum_harness(registry, Settings(max_body_bytes=LIMIT)) as harness:
        env = harness.env

        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(body=bodies)
        def check(body: Any) -> None:
            key = str(next(keys))
            token = harness.run(_token(env, "wh-typed", key))
            before = _dump(env)
            sent = json.dumps(body, ensure_ascii=True, allow_nan=True).encode()
            response = harness.handler(http_api_v2_event("POST", f"/callbacks/{token}/webhook", body=sent,
                                                         headers={"content-type": "application/json"}), None)
            status, answer = response["statusCode"], lambda_body(response)
            try:
                Charge.model_validate(json.loads(sent, parse_constant=lambda _: 1 / 0), strict=False)
                json.dumps(body, allow_nan=False).encode("utf-8")  # NaN, lone surrogates: not storable
                valid = True
            except (ValueError, ZeroDivisionError, UnicodeEncodeError):
                valid = False
            if valid:
                assert status == 202, answer
                assert harness.run(_state(env, "wh-typed", key)).kinds == ["Charge"]
            else:
                assert status in (400, 422) and answer["error"]["code"] in ("invalid_json", "invalid_body"), answer
                _no_echo(json.dumps(answer), token, CARD)
                harness.run(env.run_until_idle())
                assert _dump(env) == before

        check()


# -- signatures ---------------------------------------------------------------------------------------------------

async def test_a_signed_callback_takes_only_requests_whose_signature_fits_the_exact_body() -> None:
    async with TestEnv(registry) as env, _client(env) as outside:
        token = await _token(env, "wh-signed", "a")
        body = b'{"id": "ch_9", "amount": 7}'
        good = SIGNED.sign(body)
        before = _dump(env)
        refused = [
            ({}, body),  # no signature
            ({"X-Hub-Signature-256": "sha256=" + "0" * 64}, body),  # a wrong one
            ({"X-Hub-Signature-256": good.removeprefix("sha256=")}, body),  # the digest without its prefix
            ({"X-Hub-Signature-256": "sha256=zz"}, body),  # not hex
            ({"X-Hub-Signature-256": good}, body + b" "),  # another body (one byte more)
            ({"X-Other-Signature": good}, body),  # another header
        ]
        for headers, sent in refused:
            answer = await outside.post(f"/callbacks/{token}/webhook", content=sent,
                                        headers={"Content-Type": "application/json", **headers})
            assert (answer.status_code, answer.json()["error"]["code"]) == (401, "invalid_signature"), headers
            _no_echo(answer.text, token, good[10:])
        # the JSON API's route checks it too: the token alone does not complete a signed callback
        envelope = json.dumps({"result": {"id": "ch_9", "amount": 7}}).encode()
        unsigned = await outside.post(f"/callbacks/{token}", content=envelope,
                                      headers={"Content-Type": "application/json"})
        assert unsigned.status_code == 401
        beat = await outside.post(f"/callbacks/{token}", json={"heartbeat": True})
        assert beat.status_code == 401
        await env.run_until_idle()
        assert _dump(env) == before
        answer = await outside.post(f"/callbacks/{token}/webhook", content=body,
                                    headers={"Content-Type": "application/json", "x-hub-signature-256": good})
        assert answer.status_code == 202, answer.text
        assert (await _state(env, "wh-signed", "a")).outcome == "Charge(id='ch_9', amount=7)"


async def test_a_signed_callback_through_the_json_route_with_a_signature_and_in_process_without() -> None:
    async with TestEnv(registry) as env, _client(env) as outside:
        token = await _token(env, "wh-signed", "a")
        envelope = json.dumps({"result": {"id": "c", "amount": 1}}).encode()
        answer = await outside.post(f"/callbacks/{token}", content=envelope, headers={
            "Content-Type": "application/json", "X-Hub-Signature-256": SIGNED.sign(envelope)})
        assert answer.status_code == 202, answer.text
        other = await _token(env, "wh-signed", "b")
        assert (await env.client.complete_callback(other, {"id": "c", "amount": 2})).status == "accepted"


async def test_a_missing_secret_is_the_deployment_s_fault_a_500_that_changes_nothing_and_logs_no_token(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    async with TestEnv(registry) as env:
        token = await _token(env, "wh-signed", "a")
        body = b'{"id": "c", "amount": 1}'
        signature = SIGNED.sign(body)
        monkeypatch.delenv(SECRET_ENV)
        before = _dump(env)
        transport = httpx.ASGITransport(app=_app(env), raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as outside:
            answer = await outside.post(f"/callbacks/{token}/webhook", content=body, headers={
                "Content-Type": "application/json", "X-Hub-Signature-256": signature})
        assert (answer.status_code, answer.json()["error"]["code"]) == (500, "internal")
        logged = "\n".join(record.getMessage() for record in caplog.records)
        assert SECRET_ENV in caplog.text and "/callbacks/<token>/webhook" in logged  # what to set, and where
        assert token not in caplog.text
        await env.run_until_idle()
        assert _dump(env) == before


# -- approval links -----------------------------------------------------------------------------------------------

async def test_an_approval_link_s_get_shows_the_page_and_completes_nothing_its_post_does() -> None:
    async with TestEnv(registry) as env, _client(env) as outside:
        token = await _token(env, "wh-approval", "a")
        before = _dump(env)
        for _ in range(3):  # a mail scanner, a link preview, the person
            page = await outside.get(f"/callbacks/{token}/approve")
            assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        await env.run_until_idle()
        assert _dump(env) == before
        html = page.text
        assert "Refund &lt;b&gt;42 €&lt;/b&gt; to &quot;order-7&quot;? &lt;script&gt;" in html
        assert "<script>" not in html and "<b>" not in html
        assert 'name="decision" value="approve"' in html and 'name="decision" value="reject"' in html
        assert token not in html  # the form posts to the page's own URL: the token is not repeated
        assert page.headers["referrer-policy"] == "no-referrer" and page.headers["cache-control"] == "no-store"
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        decided = await outside.post(f"/callbacks/{token}/approve", content=b"decision=approve",
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert decided.status_code == 200 and "Approved" in decided.text
        state = await _state(env, "wh-approval", "a")
        assert (state.outcome, state.kinds) == ("Approval(approved=True)", ["Approval"])
        again = await outside.post(f"/callbacks/{token}/approve", data={"decision": "approve"})  # a double click
        assert again.status_code == 200 and "answered already" in again.text
        changed = await outside.post(f"/callbacks/{token}/approve", data={"decision": "reject"})
        assert changed.status_code == 409 and changed.headers["content-type"].startswith("text/html")
        after = await outside.get(f"/callbacks/{token}/approve")
        assert "answered already" in after.text and "<form" not in after.text


async def test_a_rejection_is_a_value_and_bad_forms_are_refused_as_pages_that_change_nothing() -> None:
    async with TestEnv(registry) as env, _client(env) as outside:
        token = await _token(env, "wh-approval", "a")
        typed_token = await _token(env, "wh-typed", "a")
        before = _dump(env)
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        refused = [
            (token, b"decision=maybe", form, 422),
            (token, b"", form, 422),
            (token, b"decision=approve&decision=reject", form, 422),
            (token, b'{"decision": "approve"}', {"Content-Type": "application/json"}, 415),
            (token, b"decision=approve&pad=" + b"x" * LIMIT, form, 413),
            ("dcb_" + "Q" * 43, b"decision=approve", form, 404),
            ("not-a-token", b"decision=approve", form, 400),
            (typed_token, b"decision=approve", form, 404),  # a callback that is no approval
        ]
        for target, body, headers, status in refused:
            answer = await outside.post(f"/callbacks/{target}/approve", content=body, headers=headers)
            assert answer.status_code == status, (body[:40], answer.text)
            assert answer.headers["content-type"].startswith("text/html")
            _no_echo(answer.text, token, typed_token, "maybe", "x" * 40)
        assert (await outside.get(f"/callbacks/{typed_token}/approve")).status_code == 404
        await env.run_until_idle()
        assert _dump(env) == before
        decided = await outside.post(f"/callbacks/{token}/approve", data={"decision": "reject"})
        assert decided.status_code == 200 and "Rejected" in decided.text
        assert (await _state(env, "wh-approval", "a")).outcome == "Approval(approved=False)"


async def test_an_expired_approval_page_offers_no_buttons_and_its_post_is_410() -> None:
    async with TestEnv(registry) as env, _client(env) as outside:
        token = await _token(env, "wh-approval", "a", {"timeout": 60})
        await env.advance(60)
        page = await outside.get(f"/callbacks/{token}/approve")
        assert page.status_code == 200 and "no longer open" in page.text and "<form" not in page.text
        answer = await outside.post(f"/callbacks/{token}/approve", data={"decision": "approve"})
        assert answer.status_code == 410
        assert (await _state(env, "wh-approval", "a")).outcome == "CallbackTimeoutError"


def test_through_mangum_a_signed_webhook_and_an_approval_form_sent_base64_encoded(secret: str) -> None:
    """As API Gateway (HTTP API, payload v2) hands them to the Lambda: headers lowercased, a form body base64."""
    with mangum_harness(registry, Settings(max_body_bytes=LIMIT)) as harness:
        env = harness.env
        signed_token = harness.run(_token(env, "wh-signed", "m"))
        approval_token = harness.run(_token(env, "wh-approval", "m"))
        body = b'{"id": "ch_m", "amount": 3}'
        webhook = harness.handler(http_api_v2_event("POST", f"/callbacks/{signed_token}/webhook", body=body, headers={
            "content-type": "application/json", "x-hub-signature-256": SIGNED.sign(body)}), None)
        assert webhook["statusCode"] == 202, webhook
        page = harness.handler(http_api_v2_event("GET", f"/callbacks/{approval_token}/approve"), None)
        assert page["statusCode"] == 200 and "Approve" in page["body"]
        form = harness.handler(http_api_v2_event(
            "POST", f"/callbacks/{approval_token}/approve", body=b"decision=approve", base64_body=True,
            headers={"content-type": "application/x-www-form-urlencoded"}), None)
        assert form["statusCode"] == 200 and "Approved" in form["body"]
        assert harness.run(_state(env, "wh-signed", "m")).outcome == "Charge(id='ch_m', amount=3)"
        assert harness.run(_state(env, "wh-approval", "m")).outcome == "Approval(approved=True)"


async def test_the_urls_a_workflow_hands_out() -> None:
    seen: dict[str, str] = {}
    urls = actor("wh-urls", callbacks={"ok": callback(Approval)})

    @urls.workflow
    async def run(ctx: WorkflowContext) -> None:
        cb = await ctx.callback("ok")
        seen.update(url=cb.url, webhook=cb.webhook_url, approval=cb.approval_url, token=cb.token)

    async with TestEnv(setup(urls), public_url="https://api.example.com/") as env:
        await env.client.get_or_create("wh-urls", ["a"]).status()
        await env.run_until_idle()
    base = "https://api.example.com/callbacks/" + seen["token"]
    assert seen == {"url": base, "webhook": base + "/webhook", "approval": base + "/approve",
                    "token": seen["token"]}
