"""The callback routes over HTTP: `POST /callbacks/{token}` and `GET /callbacks/{token}` need no caller (the token
is the authorization) in every auth mode; hostile requests get the right status and a JSON error that never repeats
the token or the body, and change nothing stored (a full dump, callback records included); the same calls through
the in-process client and HttpClient behave alike; history shows tokens only in dev mode; the access log never
shows one. Through uvicorn with raw sockets and through Mangum with API Gateway HTTP API v2 events."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, Field

from dormant import (
    CallbackCompletedError,
    CallbackError,
    CallbackExpiredError,
    CallbackNotFoundError,
    InvalidCallbackTokenError,
    InvalidMessageError,
    StepContext,
    WorkflowContext,
    actor,
    callback,
    queue,
    setup,
)
from dormant.errors import InvalidMessageIdError
from dormant.http.access import AccessLog
from dormant.http.app import create_app
from dormant.settings import Settings
from dormant.testing import TestEnv
from dormant.workflow.errors import InvalidJsonError
from tests.api.conftest import Connect
from tests.api.support import TOKEN, dump_store, http_api_v2_event, lambda_body, mangum_harness, raw_request, serve

LIMIT = 8192
PRINCIPAL = {"iam": {"userArn": "arn:aws:iam::123456789012:user/ops"}}
JSON = {"Content-Type": "application/json"}
CARD = "4111 1111 1111 1111"


class Decision(BaseModel):
    approved: bool
    amount: int = Field(ge=0)


class Handed(BaseModel):
    token: str = ""
    outcome: str = ""


approval = actor("cb-approval", state=Handed, callbacks={"decision": callback(Decision)})


@approval.workflow
async def approval_run(ctx: WorkflowContext) -> None:
    options = ctx.input or {}
    cb = await ctx.callback("decision", timeout=options.get("timeout"), heartbeat_timeout=options.get("heartbeat"))

    def hand_out(s: StepContext) -> None:
        s.state.token = cb.token

    await ctx.step("hand-out", hand_out)
    if options.get("leave"):
        return  # ends without awaiting: the callback is cancelled
    try:
        decision = await cb.result()
        outcome = f"approved={decision.approved} amount={decision.amount}"
    except CallbackError as error:
        outcome = type(error).__name__

    def record(s: StepContext) -> None:
        s.state.outcome = outcome

    await ctx.step("record", record)


noted = actor("cb-noted", queues={"note": queue(dict)}, state=Handed, callbacks={"decision": callback(Decision)})


@noted.workflow
async def noted_run(ctx: WorkflowContext) -> None:  # its notes are never read: they only occupy message ids
    cb = await ctx.callback("decision", timeout=600)

    def hand_out(s: StepContext) -> None:
        s.state.token = cb.token

    await ctx.step("hand-out", hand_out)
    decision = await cb.result()

    def record(s: StepContext) -> None:
        s.state.outcome = f"approved={decision.approved} amount={decision.amount}"

    await ctx.step("record", record)


registry = setup(approval, noted)


async def _token(env: Any, key: str, actor_input: Any = None) -> str:
    handle = env.client.get_or_create("cb-approval", [key], input=actor_input)
    await handle.status()
    await env.run_until_idle()
    token = (await handle.state()).token
    assert token
    return str(token)


async def seed(env: Any) -> dict[str, str]:
    """Tokens in every state: open, open with heartbeats, completed, timed out, cancelled, of a deleted actor."""
    tokens = {"open": await _token(env, "open"), "beating": await _token(env, "beating", {"heartbeat": 600}),
              "completed": await _token(env, "completed"), "timed_out": await _token(env, "timed-out",
                                                                                      {"timeout": 10}),
              "cancelled": await _token(env, "cancelled", {"leave": True}), "deleted": await _token(env, "deleted")}
    await env.client.complete_callback(tokens["completed"], {"approved": True, "amount": 5})
    await env.client.get_or_create("cb-approval", ["deleted"]).delete()
    await env.advance(10)
    assert (await env.client.callback_status(tokens["timed_out"])).status == "timed_out"
    return tokens


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    token: str  # a seeded token's state, or the literal path segment
    status: int
    code: str
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=lambda: dict(JSON))
    raw_only: bool = False


def _json(value: object) -> bytes:
    return json.dumps(value).encode()


GOOD = _json({"result": {"approved": True, "amount": 1}})
UNKNOWN = "dcb_" + "Q" * 43
CASES = [
    # what is no token, or no callback's
    Case("not a token", "POST", "not-a-token", 400, "invalid_callback_token", GOOD),
    Case("a token one character short", "POST", "dcb_" + "a" * 42, 400, "invalid_callback_token", GOOD),
    Case("a token with a character outside base64url", "POST", "dcb_" + "a" * 42 + "%2B", 400,
         "invalid_callback_token", GOOD),
    Case("a token with a NUL", "POST", "dcb_" + "a" * 42 + "%00", 400, "invalid_callback_token", GOOD),
    Case("%FF in the token", "POST", "dcb_" + "a" * 42 + "%FF", 400, "invalid_callback_token", GOOD, raw_only=True),
    Case("an encoded slash in the token", "POST", "dcb_" + "a" * 21 + "%2F" + "a" * 21, 404, "not_found", GOOD),
    Case("no callback has this token", "POST", UNKNOWN, 404, "callback_not_found", GOOD),
    Case("status of a token no callback has", "GET", UNKNOWN, 404, "callback_not_found"),
    Case("status of what is no token", "GET", "x" * 300, 400, "invalid_callback_token"),
    Case("a method the route has not", "PUT", "open", 405, "method_not_allowed", GOOD),
    # malformed bodies (the token is good)
    Case("truncated JSON", "POST", "open", 400, "invalid_json", b'{"result": {"approved": tr'),
    Case("NaN is not JSON", "POST", "open", 400, "invalid_json", b'{"result": NaN}'),
    Case("empty body", "POST", "open", 400, "invalid_json", b""),
    Case("invalid UTF-8", "POST", "open", 400, "invalid_json", b'{"result": "\xff\xfe"}'),
    Case("nested 2000 deep", "POST", "open", 400, "invalid_json", b'{"result": ' + b"[" * 2000 + b"]" * 2000 + b"}"),
    Case("a lone surrogate in the result", "POST", "open", 400, "invalid_json", b'{"result": "\\ud800"}'),
    Case("a lone surrogate in an object key", "POST", "open", 400, "invalid_json", b'{"result": {"\\udc00": 1}}'),
    Case("a lone surrogate in the error message", "POST", "open", 400, "invalid_json",
         b'{"error": {"type": "Declined", "message": "\\udfff"}}'),
    Case("a 1001-digit integer", "POST", "open", 400, "invalid_json", b'{"result": ' + b"9" * 1001 + b"}"),
    Case("a body over the limit", "POST", "open", 413, "payload_too_large",
         _json({"result": {"approved": True, "amount": 1, "note": "x" * LIMIT}})),
    Case("Content-Length claims 1 GB", "POST", "open", 413, "payload_too_large", b"",
         {**JSON, "Content-Length": str(10**9)}),
    Case("a form instead of JSON", "POST", "open", 415, "unsupported_media_type", b"result=1",
         {"Content-Type": "application/x-www-form-urlencoded"}),
    Case("an array body", "POST", "open", 422, "invalid_request", b"[1, 2]"),
    Case("an empty object", "POST", "open", 422, "invalid_request", b"{}"),
    Case("an unknown field", "POST", "open", 422, "invalid_request", _json({"result": 1, "admin": True})),
    Case("result and heartbeat together", "POST", "open", 422, "invalid_request",
         _json({"result": {"approved": True, "amount": 1}, "heartbeat": True})),
    Case("heartbeat false", "POST", "open", 422, "invalid_request", _json({"heartbeat": False})),
    Case("error null", "POST", "open", 422, "invalid_request", _json({"error": None})),
    Case("an error without a type", "POST", "open", 422, "invalid_request", _json({"error": {"message": "x"}})),
    Case("an error type of 200 characters", "POST", "open", 422, "invalid_request",
         _json({"error": {"type": "T" * 200, "message": "x"}})),
    Case("an error with an unknown field", "POST", "open", 422, "invalid_request",
         _json({"error": {"type": "T", "message": "x", "stack": "..."}})),
    # results the declared model refuses (named by field, never by value)
    Case("a card number where a bool belongs", "POST", "open", 422, "invalid_body",
         _json({"result": {"approved": CARD, "amount": 1}})),
    Case("a constraint violated", "POST", "open", 422, "invalid_body",
         _json({"result": {"approved": True, "amount": -1}})),
    Case("a result missing a field", "POST", "open", 422, "invalid_body", _json({"result": {"approved": True}})),
    Case("a null result for a model", "POST", "open", 422, "invalid_body", _json({"result": None})),
    # used, expired, cancelled, gone
    Case("a second completion with another result", "POST", "completed", 409, "callback_completed",
         _json({"result": {"approved": False, "amount": 9}})),
    Case("a failure after the completion", "POST", "completed", 409, "callback_completed",
         _json({"error": {"type": "Changed", "message": "my mind"}})),
    Case("a heartbeat after the completion", "POST", "completed", 409, "callback_completed",
         _json({"heartbeat": True})),
    Case("a completion after the timeout", "POST", "timed_out", 410, "callback_expired", GOOD),
    Case("a heartbeat after the timeout", "POST", "timed_out", 410, "callback_expired", _json({"heartbeat": True})),
    Case("a completion of a cancelled callback", "POST", "cancelled", 410, "callback_expired", GOOD),
    Case("a completion for a deleted actor", "POST", "deleted", 410, "callback_expired", GOOD),
]


def _target(case: Case, tokens: dict[str, str]) -> str:
    return f"/callbacks/{tokens.get(case.token, case.token)}"


def _settings(**overrides: Any) -> Settings:
    # iam mode with no identity on any request: the callback routes must not need one
    return Settings(auth_mode="iam", inspector_token=TOKEN, max_body_bytes=LIMIT, **overrides)  # type: ignore[arg-type]


def _dump(env: TestEnv) -> dict[str, Any]:
    return {**dump_store(env.store), "callbacks": copy.deepcopy(env.store.callbacks)}


def _check(case: Case, status: int, body: Any, tokens: dict[str, str], problems: list[str]) -> None:
    if status != case.status:
        problems.append(f"{case.name}: status {status}, expected {case.status}: {body}")
        return
    if not (isinstance(body, dict) and set(body) == {"error"} and body["error"].get("code") == case.code
            and isinstance(body["error"].get("message"), str) and body["error"]["message"]):
        problems.append(f"{case.name}: body {body!r}, expected error code {case.code}")
        return
    text = json.dumps(body, ensure_ascii=False)
    echoed = [value for value in (*tokens.values(), UNKNOWN, CARD, "x" * 40, "my mind", "T" * 50)
              if value in text or value[4:] in text]
    if echoed:
        problems.append(f"{case.name}: the error repeats what was sent ({echoed[0][:12]}...): {body}")


def test_the_table_has_at_least_thirty_cases() -> None:
    assert len(CASES) >= 30 and len({c.name for c in CASES}) == len(CASES)


async def test_hostile_callback_requests_through_uvicorn_change_nothing() -> None:
    async with TestEnv(registry) as env:
        tokens = await seed(env)
        before = _dump(env)
        problems: list[str] = []
        async with serve(create_app(registry, _settings(), service=env.service)) as url:
            for case in CASES:
                response = await raw_request(url, case.method, _target(case, tokens), body=case.body,
                                             headers=case.headers)
                try:
                    body = response.json()
                except ValueError:
                    body = response.body
                _check(case, response.status, body, tokens, problems)
            await env.run_until_idle()
        assert problems == []
        assert _dump(env) == before


def test_hostile_callback_requests_through_mangum_change_nothing() -> None:
    with mangum_harness(registry, _settings()) as harness:
        env = harness.env
        tokens = harness.run(seed(env))
        before = _dump(env)
        problems: list[str] = []
        for case in CASES:
            if case.raw_only:
                continue
            event = http_api_v2_event(case.method, _target(case, tokens), body=case.body or None,
                                      headers=case.headers)
            event["routeKey"] = event["requestContext"]["routeKey"] = f"{case.method} /callbacks/{{token}}"
            response = harness.handler(event, None)
            _check(case, response["statusCode"], lambda_body(response), tokens, problems)
        harness.run(env.run_until_idle())
        assert problems == []
        assert _dump(env) == before


async def test_a_completion_through_the_route_resumes_the_workflow_in_every_auth_mode() -> None:
    for mode in ("iam", "jwt", "none"):
        async with TestEnv(registry) as env:
            token = await _token(env, "k")
            app = create_app(registry, Settings(auth_mode=mode), service=env.service)
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as outside:
                assert (await outside.get(f"/callbacks/{token}")).json()["status"] == "open"
                answer = await outside.post(f"/callbacks/{token}", json={"result": {"approved": True, "amount": 3}})
                assert (answer.status_code, answer.json()) == (202, {"status": "accepted", "callback": "decision",
                                                                     "deadline": None, "heartbeat_deadline": None})
                await env.run_until_idle()
                retried = await outside.post(f"/callbacks/{token}", json={"result": {"approved": True, "amount": 3}})
                assert (retried.status_code, retried.json()["status"]) == (200, "completed")
                assert (await outside.get("/actors/cb-approval/k/state")).status_code == (200 if mode == "none"
                                                                                          else 401)
            assert (await env.client.get_or_create("cb-approval", ["k"]).state()).outcome == \
                "approved=True amount=3"


async def test_a_heartbeat_through_the_route_moves_the_deadline_and_answers_it() -> None:
    async with TestEnv(registry) as env:
        token = await _token(env, "k", {"heartbeat": 600})
        app = create_app(registry, _settings(), service=env.service)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as outside:
            await env.advance(100)
            answer = await outside.post(f"/callbacks/{token}", json={"heartbeat": True})
            assert (answer.status_code, answer.json()["status"]) == (200, "open")
            assert answer.json()["heartbeat_deadline"] == env.now() + 600
            await env.advance(599)
            assert (await outside.get(f"/callbacks/{token}")).json()["status"] == "open"
            await env.advance(2)
            assert (await outside.get(f"/callbacks/{token}")).json()["status"] == "timed_out"


async def test_the_in_process_client_and_http_client_behave_alike(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        token = await _token(env, "k", {"heartbeat": 600})
        assert (await client.callback_status(token)).status == "open"
        assert (await client.heartbeat_callback(token)).status == "open"
        with pytest.raises(InvalidMessageError, match="amount"):
            await client.complete_callback(token, {"approved": True, "amount": -2})
        with pytest.raises(InvalidCallbackTokenError):
            await client.complete_callback("nope", {"approved": True, "amount": 1})
        with pytest.raises(CallbackNotFoundError):
            await client.fail_callback(UNKNOWN, "Declined", "no")
        with pytest.raises(InvalidJsonError):
            await client.complete_callback(token, {"approved": True, "amount": 1, "note": "\ud800"})
        assert (await client.complete_callback(token, {"approved": False, "amount": 0})).status == "accepted"
        await env.run_until_idle()
        assert (await client.complete_callback(token, {"approved": False, "amount": 0})).status == "completed"
        with pytest.raises(CallbackCompletedError):
            await client.fail_callback(token, ValueError("late"))
        other = await _token(env, "other", {"timeout": 5})
        await env.advance(5)
        with pytest.raises(CallbackExpiredError):
            await client.complete_callback(other, {"approved": True, "amount": 1})
        assert (await env.client.get_or_create("cb-approval", ["k"]).state()).outcome == "approved=False amount=0"


async def test_history_shows_callback_tokens_only_in_dev_mode() -> None:
    async with TestEnv(registry) as env:
        token = await _token(env, "k")
        for dev in (False, True):
            app = create_app(registry, _settings(dev=dev), service=env.service)
            headers = {"X-Dormant-Operator-Token": TOKEN}

            async def gateway(scope: dict[str, Any], receive: Any, send: Any, app: Any = app) -> None:
                if scope["type"] == "http":
                    scope = {**scope, "aws.event": {"version": "2.0", "requestContext": {"authorizer": PRINCIPAL}}}
                await app(scope, receive, send)

            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gateway), base_url="http://api") as ops:
                pages = [await ops.get(path, headers=headers) for path in (
                    "/actors/cb-approval/k/history", "/actors/cb-approval/k/status?history=true",
                    "/actors/cb-approval/k/inspector/workflow-history", "/actors/cb-approval/k/inspector/export")]
            assert all(page.status_code == 200 for page in pages)
            entries = [line for line in pages[3].text.splitlines() if '"type": "entry"' in line]  # (not the state)
            for text in (pages[0].text, pages[1].json()["history"].__repr__(), pages[2].text, "\n".join(entries)):
                assert (token in text) is dev, (dev, text[:200])
            if not dev:
                entry = next(e for e in pages[0].json() if e["kind"] == "callback")
                assert entry["callback"]["token"] == "<redacted>"
        # the in-process client is the application itself: its history keeps the token (replays hand it out)
        history = await env.client.get_or_create("cb-approval", ["k"]).history()
        assert any(e.callback is not None and e.callback.token == token for e in history)


async def test_the_access_log_never_shows_a_token(caplog: pytest.LogCaptureFixture) -> None:
    async with TestEnv(registry) as env:
        token = await _token(env, "k")
        app = AccessLog(create_app(registry, _settings(), service=env.service))
        with caplog.at_level(logging.INFO, logger="dormant.http"):
            async with serve(app) as url, httpx.AsyncClient(base_url=url) as outside:  # type: ignore[arg-type]
                await outside.get(f"/callbacks/{token}")
                await outside.post(f"/callbacks/{token}", json={"heartbeat": True})
                await outside.post("/callbacks/not-a-token", json={"heartbeat": True})
        logged = [record for record in caplog.records if record.name == "dormant.http"]
        assert len(logged) >= 3
        text = "\n".join(f"{r.getMessage()} {getattr(r, 'http', '')}" for r in logged)
        assert token not in text and token[4:] not in text and "not-a-token" not in text
        assert "/callbacks/<token>" in text


async def test_the_openapi_document_describes_the_callback_routes_without_security() -> None:
    async with TestEnv(registry) as env:
        app = create_app(registry, _settings(), service=env.service)
        document = app.openapi()
        operations = document["paths"]["/callbacks/{token}"]
        assert set(operations) == {"post", "get"}
        assert all(operation["security"] == [] for operation in operations.values())
        ref = operations["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        schema = document["components"]["schemas"][ref.removeprefix("#/components/schemas/")]
        assert {"result", "error", "heartbeat"} <= set(schema["properties"])
        assert {"409", "410", "422"} <= set(operations["post"]["responses"])


async def test_an_idempotency_key_cannot_take_a_callbacks_completion_id(connect: Connect) -> None:
    async with TestEnv(registry) as env:
        client = await connect(env)
        handle = env.client.get_or_create("cb-noted", ["k"])
        await handle.status()
        await env.run_until_idle()
        token = (await handle.state()).token
        identity = hashlib.sha256(token.encode()).hexdigest()[:32]
        taken = [f"dormant:callback:{identity}", f"callback-{identity}"]  # its completion's id, now and before
        before = _dump(env)
        app = create_app(registry, Settings(dev=True), service=env.service)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as http:
            for key in taken:
                answers = [await http.post("/actors/cb-noted/k/queues/note", json={"x": 1},
                                           headers={"Idempotency-Key": key}),
                           await http.post("/actors/cb-noted/k/queues/note/batch", json={"messages": [
                               {"body": {"a": 1}, "id": "fine"}, {"body": {"b": 2}, "id": key}]})]
                for answer in answers:
                    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_idempotency_key"
                    assert "Dormant's own" in answer.text and identity not in answer.text
                assert answers[1].json()["error"]["message"].startswith("message 1 of the batch: ")
                with pytest.raises(InvalidMessageIdError):  # the client's own: in-process or HttpClient
                    await client.get_or_create("cb-noted", ["k"]).send("note", {"x": 1}, message_id=key)
                with pytest.raises(InvalidMessageIdError):
                    await client.get_or_create("cb-noted", ["k"]).send_many("note", [{"x": 1}], message_ids=[key])
            assert _dump(env) == before  # nothing stored
            answer = await http.post(f"/callbacks/{token}", json={"result": {"approved": True, "amount": 9}})
            assert (answer.status_code, answer.json()["status"]) == (202, "accepted")
        await env.run_until_idle()
        assert (await handle.state()).outcome == "approved=True amount=9"
