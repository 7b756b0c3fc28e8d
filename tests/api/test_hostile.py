"""Malformed and hostile requests: each gets the right status and a JSON error body that never repeats what
was sent, and the store is exactly as it was before (compared as a full dump). Run through uvicorn with raw
sockets (so `..`, %2F and %FF reach the server as typed), through Mangum with API Gateway HTTP API v2 and REST
API v1 events, and (tests/api/test_aws.py) on DynamoDB + SQS. The cases marked "issue 9" are the ones the issue
lists; no answer is a redirect (a Location would come from the request's Host header).

`python -m tests.api.test_hostile` prints the table (case, request, answer) as Markdown."""

from __future__ import annotations

import base64
import json
import sys
from dataclasses import dataclass, field
from typing import Any

from dormant.http.app import create_app
from dormant.settings import Settings
from dormant.testing import TestEnv
from tests.api.apps import registry
from tests.api.support import (
    TOKEN,
    dump_store,
    http_api_v2_event,
    lambda_body,
    mangum_harness,
    raw_request,
    rest_v1_event,
    serve,
)

LIMIT = 8192
JSON = {"Content-Type": "application/json"}
ALICE = "/actors/account/alice"
NOTES = "/actors/notes/n"
COUNTER = "/actors/workflow-counter/c"
CARD = "4111 1111 1111 1111"
SEEDED_KEY = "seeded-note-1"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EVIL_HOST = {"Host": "evil.example"}
SLEEPER_CURSOR = base64.urlsafe_b64encode(b"pending#sleeper/s").decode().rstrip("=")


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    target: str
    status: int
    code: str
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    raw_only: bool = False  # needs the raw request target (uvicorn); API Gateway decodes the path first


def _json(value: object) -> bytes:
    return json.dumps(value).encode()


CASES = [
    # unknown things
    Case("unknown actor type", "POST", "/actors/nope/alice/queues/deposit", 404, "unknown_actor",
         _json({"amount": 1}), JSON),
    Case("unknown queue", "POST", f"{ALICE}/queues/nope", 404, "unknown_queue", _json({"amount": 1}), JSON),
    Case("unknown action", "POST", f"{ALICE}/actions/nope", 404, "unknown_action", b"[]", JSON),
    Case("private attribute as action", "POST", f"{ALICE}/actions/__class__", 404, "unknown_action", b"[]", JSON),
    Case("unknown route", "GET", "/admin", 404, "not_found"),
    Case("read of an actor that does not exist", "GET", "/actors/account/bob/state", 404, "actor_not_found"),
    Case("events of an actor that does not exist", "GET", "/actors/account/bob/events?wait=0", 404,
         "actor_not_found"),
    Case("wrong method", "PATCH", ALICE, 405, "method_not_allowed"),
    # bodies failing the queue's schema
    Case("wrong type in body", "POST", f"{ALICE}/queues/deposit", 422, "invalid_body", _json({"amount": "lots"}), JSON),
    Case("constraint violated", "POST", f"{ALICE}/queues/deposit", 422, "invalid_body", _json({"amount": -5}), JSON),
    Case("array instead of object", "POST", f"{ALICE}/queues/deposit", 422, "invalid_body", b"[1, 2]", JSON),
    Case("missing field", "POST", f"{ALICE}/queues/deposit", 422, "invalid_body", b"{}", JSON),
    Case("object for an int queue", "POST", "/actors/sleeper/s/queues/go", 422, "invalid_body", b'{"go": 1}', JSON),
    # malformed JSON and sizes
    Case("truncated JSON", "POST", f"{ALICE}/queues/deposit", 400, "invalid_json", b'{"amount": 1', JSON),
    Case("NaN is not JSON", "POST", f"{ALICE}/queues/deposit", 400, "invalid_json", b'{"amount": NaN}', JSON),
    Case("empty body", "POST", f"{ALICE}/queues/deposit", 400, "invalid_json", b"", JSON),
    Case("invalid UTF-8", "POST", f"{ALICE}/queues/deposit", 400, "invalid_json", b'{"amount": "\xff\xfe"}', JSON),
    Case("nested 2000 deep", "POST", f"{ALICE}/queues/deposit", 400, "invalid_json", b"[" * 2000 + b"]" * 2000, JSON),
    Case("5000-digit number", "POST", f"{ALICE}/queues/deposit", 400, "invalid_json",
         b'{"amount": ' + b"9" * 5000 + b"}", JSON),
    Case("body over the limit", "POST", f"{ALICE}/queues/deposit", 413, "payload_too_large",
         _json({"amount": 1, "note": "x" * LIMIT}), JSON),
    Case("Content-Length claims 1 GB", "POST", f"{ALICE}/queues/deposit", 413, "payload_too_large", b"",
         {**JSON, "Content-Length": str(10**9)}),
    Case("non-JSON content type", "POST", f"{ALICE}/queues/deposit", 415, "unsupported_media_type",
         b"amount=1", {"Content-Type": "application/x-www-form-urlencoded"}),
    Case("create with an unknown field", "PUT", "/actors/account/carol", 422, "invalid_request",
         _json({"input": {}, "admin": True}), JSON),
    # parameters and ids
    Case("negative timeout", "POST", f"{ALICE}/queues/deposit?wait=true&timeout=-1", 422, "invalid_request",
         _json({"amount": 1}), JSON),
    Case("wait is not a boolean", "POST", f"{ALICE}/queues/deposit?wait=maybe", 422, "invalid_request",
         _json({"amount": 1}), JSON),
    Case("negative cursor", "GET", f"{ALICE}/events?after=-1", 422, "invalid_request"),
    Case("idempotency key with spaces", "POST", f"{ALICE}/queues/deposit", 400, "invalid_idempotency_key",
         _json({"amount": 1}), {**JSON, "Idempotency-Key": "a b"}),
    Case("idempotency key too long", "POST", f"{ALICE}/queues/deposit", 400, "invalid_idempotency_key",
         _json({"amount": 1}), {**JSON, "Idempotency-Key": "k" * 129}),
    # action arguments
    Case("arguments not a list", "POST", f"{ALICE}/actions/add", 422, "invalid_arguments", _json({"amount": 1}), JSON),
    Case("too many arguments", "POST", f"{ALICE}/actions/add", 422, "invalid_arguments", b"[1, 2, 3]", JSON),
    Case("missing argument", "POST", f"{ALICE}/actions/add", 422, "invalid_arguments", b"[]", JSON),
    Case("argument of the wrong type", "POST", f"{ALICE}/actions/add", 422, "invalid_arguments", b'["five"]', JSON),
    Case("action that raises", "POST", f"{ALICE}/actions/explode", 500, "action_failed", b"[]", JSON),
    # bad keys and path tricks
    Case("%2F in a key splits the path", "GET", "/actors/account/a%2Fb/state", 404, "not_found"),
    Case("%2F..%2F climbs nowhere", "GET", "/actors/account/x%2F..%2F..%2Fplain/state", 404, "not_found"),
    Case("key ..", "GET", "/actors/account/../state", 400, "invalid_key"),
    Case("key . (percent-encoded)", "GET", "/actors/account/%2E/state", 400, "invalid_key"),
    Case("../ out of /actors", "GET", "/actors/../actors/account/alice/state", 404, "not_found"),
    Case("empty key part", "GET", "/actors/account/a,,b/state", 400, "invalid_key"),
    Case("bad tilde escape", "GET", "/actors/account/a~zz/state", 400, "invalid_key"),
    Case("escape that is not UTF-8", "GET", "/actors/account/a~FF/state", 400, "invalid_key"),
    Case("raw control character", "GET", "/actors/account/a%00b/state", 400, "invalid_key"),
    Case("key part over 512 characters", "POST", f"/actors/account/{'k' * 600}/queues/deposit", 400, "invalid_key",
         _json({"amount": 1}), JSON),
    # issue 9: typed actions
    Case("issue 9: [1] for `note: str`", "POST", f"{NOTES}/actions/add_note", 422, "invalid_arguments", b"[1]", JSON),
    Case("issue 9: an object for `note: str`", "POST", f"{NOTES}/actions/add_note", 422, "invalid_arguments",
         _json([{"note": "x"}]), JSON),
    Case("issue 9: no arguments for add_note", "POST", f"{NOTES}/actions/add_note", 422, "invalid_arguments", b"[]",
         JSON),
    Case("issue 9: a card number where an int belongs", "POST", f"{ALICE}/queues/deposit", 422, "invalid_body",
         _json({"amount": CARD}), JSON),
    Case("issue 9: a card number as an action argument", "POST", f"{ALICE}/actions/add", 422, "invalid_arguments",
         _json([CARD]), JSON),
    # issue 9: values the store cannot hold
    Case("issue 9: lone surrogate in a body", "POST", f"{NOTES}/queues/note", 400, "invalid_json",
         b'{"note": "\\ud800"}', JSON),
    Case("issue 9: lone surrogate deep in a body", "POST", f"{NOTES}/queues/raw", 400, "invalid_json",
         b'{"a": [{"b": "x\\udfff"}]}', JSON),
    Case("issue 9: lone surrogate in an object key", "POST", f"{NOTES}/queues/raw", 400, "invalid_json",
         b'{"\\udc00": 1}', JSON),
    Case("issue 9: lone surrogate in an action argument", "POST", f"{NOTES}/actions/add_note", 400, "invalid_json",
         b'["\\ud800"]', JSON),
    Case("issue 9: lone surrogate in an actor input", "PUT", "/actors/notes/fresh", 400, "invalid_json",
         b'{"input": {"name": "\\ud800"}}', JSON),
    Case("issue 9: 4300-digit integer", "POST", f"{COUNTER}/queues/counter", 400, "invalid_json",
         b'{"delta": ' + b"9" * 4300 + b"}", JSON),
    Case("issue 9: 1001-digit integer", "POST", f"{COUNTER}/queues/counter", 400, "invalid_json",
         b'{"delta": ' + b"9" * 1001 + b"}", JSON),
    Case("issue 9: 1e400 (Infinity)", "POST", f"{NOTES}/queues/raw", 400, "invalid_json", b'{"x": 1e400}', JSON),
    Case("issue 9: -Infinity literal", "POST", f"{NOTES}/queues/raw", 400, "invalid_json", b'{"x": -Infinity}', JSON),
    Case("issue 9: nested 65 deep", "POST", "/actors/deep/d/queues/any", 400, "invalid_json",
         b"[" * 65 + b"]" * 65, JSON),
    # issue 9: idempotency keys compare the request; finished actors refuse work
    Case("issue 9: key reused with another body", "POST", f"{NOTES}/queues/note", 409, "idempotency_conflict",
         _json({"note": "changed"}), {**JSON, "Idempotency-Key": SEEDED_KEY}),
    Case("issue 9: key reused on another queue", "POST", f"{NOTES}/queues/raw", 409, "idempotency_conflict",
         _json({"note": "hello"}), {**JSON, "Idempotency-Key": SEEDED_KEY}),
    Case("issue 9: send to a completed workflow", "POST", "/actors/finisher/f/queues/go", 409, "actor_finished",
         b"2", JSON),
    Case("issue 9: wait=true on a completed workflow", "POST", "/actors/finisher/f/queues/go?wait=true", 409,
         "actor_finished", b"2", JSON),
    # issue 9: keys
    Case("issue 9: %FF in a key", "GET", "/actors/account/a%FF/state", 400, "invalid_key", raw_only=True),
    Case("issue 9: %FE in a key", "POST", "/actors/account/a%FE/queues/deposit", 400, "invalid_key",
         _json({"amount": 1}), JSON, raw_only=True),
    Case("storage key over 1,011 bytes (non-ASCII)", "POST", f"/actors/account/{'~C3~A9' * 170}/queues/deposit",
         400, "invalid_key", _json({"amount": 1}), JSON),
    Case("storage key over 1,011 bytes (three parts)", "PUT", "/actors/account/" + ",".join(["k" * 500] * 3),
         400, "invalid_key"),
    # auth
    Case("inspector without token", "GET", f"{ALICE}/inspector/workflow-history", 401, "unauthorized"),
    Case("inspector with a wrong token", "GET", f"{ALICE}/inspector/workflow-history", 401, "unauthorized",
         headers={"Authorization": "Bearer wrong"}),
    Case("inspector with a token prefix", "GET", f"{ALICE}/inspector/workflow-history", 401, "unauthorized",
         headers={"Authorization": f"Bearer {TOKEN[:-1]}"}),
    Case("inspector with basic auth", "GET", f"{ALICE}/inspector/workflow-history", 401, "unauthorized",
         headers={"Authorization": f"Basic {TOKEN}"}),
    Case("history without token", "GET", f"{ALICE}/history", 401, "unauthorized"),
    Case("status with history, no token", "GET", f"{ALICE}/status?history=true", 401, "unauthorized"),
    Case("auth is checked before the actor", "GET", "/actors/account/bob/inspector/workflow-history", 401,
         "unauthorized"),
    # operator routes (list, resume, terminate, delete)
    Case("listing without token", "GET", "/actors/account", 401, "unauthorized"),
    Case("delete without token", "DELETE", ALICE, 401, "unauthorized"),
    Case("terminate without token", "POST", f"{ALICE}/terminate", 401, "unauthorized"),
    Case("resume without token", "POST", f"{ALICE}/resume", 401, "unauthorized"),
    Case("bulk resume with a wrong token", "POST", "/actors/account/resume", 401, "unauthorized",
         headers={"Authorization": "Bearer wrong"}),
    Case("listing of an unknown type", "GET", "/actors/nope", 404, "unknown_actor", headers=AUTH),
    Case("listing by an unknown status", "GET", "/actors/account?status=exploded", 422, "invalid_request",
         headers=AUTH),
    Case("listing by running (never listed)", "GET", "/actors/account?status=running", 422, "invalid_request",
         headers=AUTH),
    Case("listing with a page too big", "GET", "/actors/account?limit=100000", 422, "invalid_request", headers=AUTH),
    Case("listing with a forged cursor", "GET", "/actors/account?cursor=bm90LWEtY3Vyc29y", 400, "invalid_cursor",
         headers=AUTH),
    Case("listing with a cursor that is not base64", "GET", "/actors/account?cursor=%F0%9F%92%A5", 400,
         "invalid_cursor", headers=AUTH),
    Case("listing with another type's cursor", "GET", f"/actors/account?cursor={SLEEPER_CURSOR}", 400,
         "invalid_cursor", headers=AUTH),
    Case("bulk resume with a forged cursor", "POST", "/actors/account/resume?cursor=eA", 400, "invalid_cursor",
         headers=AUTH),
    Case("resume of an actor that does not exist", "POST", "/actors/account/bob/resume", 404, "actor_not_found",
         headers=AUTH),
    Case("terminate of an actor that does not exist", "POST", "/actors/account/bob/terminate", 404,
         "actor_not_found", headers=AUTH),
    Case("terminate with a reason that is no string", "POST", f"{ALICE}/terminate", 422, "invalid_request",
         _json({"reason": 5}), {**JSON, **AUTH}),
    Case("terminate with an unknown field", "POST", f"{ALICE}/terminate", 422, "invalid_request",
         _json({"why": "x"}), {**JSON, **AUTH}),
    Case("terminate with a body that is not JSON", "POST", f"{ALICE}/terminate", 422, "invalid_request",
         b"{not json", {**JSON, **AUTH}),
    Case("terminate with a huge body", "POST", f"{ALICE}/terminate", 413, "payload_too_large",
         _json({"reason": "x" * 10_000}), {**JSON, **AUTH}),
    Case("delete with a bad key", "DELETE", "/actors/account/a,,b", 400, "invalid_key", headers=AUTH),
    Case("delete of an unknown type", "DELETE", "/actors/nope/alice", 404, "unknown_actor", headers=AUTH),
    # a trailing slash with a hostile Host header: refused, never redirected (issue 26: a 307 to the Host's URL)
    Case("trailing slash: listing, hostile Host", "GET", "/actors/", 404, "not_found", headers=EVIL_HOST),
    Case("trailing slash: status, hostile Host", "GET", f"{ALICE}/status/", 404, "not_found", headers=EVIL_HOST),
    Case("trailing slash: send, hostile Host", "POST", f"{ALICE}/queues/deposit/", 404, "not_found",
         _json({"amount": 1}), {**JSON, **EVIL_HOST, "X-Forwarded-Host": "evil.example"}),
    Case("trailing slash: operator route, hostile Host", "POST", f"{ALICE}/resume/", 404, "not_found",
         headers={**AUTH, **EVIL_HOST}),
    Case("trailing slash: callback, hostile Host", "POST", "/callbacks/dcb_" + "A" * 43 + "/", 404, "not_found",
         _json({"heartbeat": True}), {**JSON, **EVIL_HOST}),
    Case("trailing slash: OpenAPI document, hostile Host", "GET", "/openapi.json/", 404, "not_found",
         headers=EVIL_HOST),
]


async def seed(env: Any) -> None:
    """The actors the cases hit (a TestEnv or an AwsTestEnv): an account with history, a sleeper, notes with a
    message sent under SEEDED_KEY, a counter, a completed finisher, a failed breaker, a `deep` actor."""
    handle = env.client.get_or_create("account", ["alice"])
    await handle.send("deposit", {"amount": 5})
    await handle.send("withdraw", {"amount": 2}, wait=True, timeout=20)
    await env.client.get_or_create("sleeper", ["s"]).status()
    notes = env.client.get_or_create("notes", ["n"])
    await notes.call("add_note", "first")
    await notes.send("note", {"note": "hello"}, message_id=SEEDED_KEY)
    await env.client.get_or_create("workflow-counter", ["c"]).send("counter", {"delta": 1})
    await env.client.get_or_create("finisher", ["f"]).send("go", 1)
    await env.client.get_or_create("breaker", ["b"]).send("go", 1)
    await env.client.get_or_create("deep", ["d"]).status()
    await env.run_until_idle()
    assert (await env.client.get_or_create("finisher", ["f"]).status()).workflow.value == "completed"
    assert (await env.client.get_or_create("breaker", ["b"]).status()).workflow.value == "failed"





def _check(case: Case, status: int, body: object, problems: list[str]) -> None:
    if status != case.status:
        problems.append(f"{case.name}: status {status}, expected {case.status}: {body}")
        return
    if not (isinstance(body, dict) and set(body) == {"error"} and body["error"].get("code") == case.code
            and isinstance(body["error"].get("message"), str) and body["error"]["message"]):
        problems.append(f"{case.name}: body {body!r}, expected error code {case.code}")
        return
    echoed = [part for part in _sent_values(case) if part in json.dumps(body, ensure_ascii=False)]
    if echoed:
        problems.append(f"{case.name}: the error repeats what was sent ({echoed[0][:40]!r}): {body}")


def _sent_values(case: Case) -> list[str]:
    """Distinctive things a case sent (that no error message should contain): values in the body, the key
    segment of the path, an idempotency key."""
    sent = [value for value in (CARD, "9" * 50, "changed") if value.encode() in case.body]
    parts = case.target.split("?")[0].split("/")
    if len(parts) > 3 and parts[1] == "actors" and len(parts[3]) >= 3:
        sent.append(parts[3])
    if "Idempotency-Key" in case.headers:
        sent.append(case.headers["Idempotency-Key"])
    if "Host" in case.headers:
        sent.append(case.headers["Host"])
    return sent


def _utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def _redirected(case: Case, status: int, headers: dict[str, str], problems: list[str]) -> None:
    """No answer redirects: a Location would come from what the client sent (its Host header)."""
    location = {k.lower(): v for k, v in headers.items()}.get("location")
    if 300 <= status < 400 or location is not None:
        problems.append(f"{case.name}: redirected ({status}) to {location!r}")


def _settings() -> Settings:
    return Settings(dev=False, inspector_token=TOKEN, max_body_bytes=LIMIT, auth_mode="none")  # type: ignore[arg-type]


def test_the_table_has_at_least_twenty_cases() -> None:
    assert len(CASES) >= 20
    assert len({c.name for c in CASES}) == len(CASES)


async def test_hostile_requests_through_uvicorn_change_nothing() -> None:
    async with TestEnv(registry) as env:
        await seed(env)
        before = dump_store(env.store)
        problems: list[str] = []
        async with serve(create_app(registry, _settings(), service=env.service)) as url:
            for case in CASES:
                response = await raw_request(url, case.method, case.target, body=case.body, headers=case.headers)
                try:
                    body = response.json()
                except ValueError:
                    body = response.body
                _check(case, response.status, body, problems)
                _redirected(case, response.status, response.headers, problems)
                if response.status == 401 and response.headers.get("www-authenticate") != "Bearer":
                    problems.append(f"{case.name}: 401 without WWW-Authenticate: Bearer")
            await env.run_until_idle()
        assert problems == []
        assert dump_store(env.store) == before


def test_hostile_requests_through_mangum_change_nothing() -> None:
    with mangum_harness(registry, _settings()) as harness:
        harness.run(seed(harness.env))
        before = dump_store(harness.env.store)
        problems: list[str] = []
        for case in CASES:
            if case.headers.get("Content-Length") or case.raw_only:
                continue  # API Gateway computes Content-Length itself and decodes the path before the Lambda
            for make_event in (http_api_v2_event, rest_v1_event):
                if make_event is rest_v1_event and not _utf8(case.body):
                    continue  # (the REST API's event carries a text body; v2 base64-encodes others)
                event = make_event(case.method, case.target, body=case.body or None, headers=case.headers)
                response = harness.handler(event, None)
                _check(case, response["statusCode"], lambda_body(response), problems)
                _redirected(case, response["statusCode"], {**response.get("headers", {}), **{
                    k: ",".join(v) for k, v in response.get("multiValueHeaders", {}).items()}}, problems)
        harness.run(harness.env.run_until_idle())
        assert problems == []
        assert dump_store(harness.env.store) == before


def markdown_table() -> str:
    """The cases as a Markdown table (for reports: what was tried and what the API answered)."""
    rows = ["| case | request | answer |", "|---|---|---|"]
    for case in CASES:
        body = case.body.decode("utf-8", "replace")
        body = body if len(body) <= 40 else body[:37] + "..."
        target = case.target if len(case.target) <= 60 else case.target[:57] + "..."
        request = f"`{case.method} {target}`" + (f" `{body}`" if body else "")
        rows.append(f"| {case.name} | {request.replace('|', '/')} | {case.status} `{case.code}` |")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.stdout.write(markdown_table() + "\n")
