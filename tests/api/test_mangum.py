"""The real app through Mangum, fed hand-built API Gateway events: HTTP API (payload v2.0) and REST API
(payload v1.0), including base64-encoded bodies; and functions/api/handler.py as the Lambda loads it."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fastapi import FastAPI
from mangum import Mangum

from dormant.settings import Settings
from tests.api.apps import registry
from tests.api.support import (
    TOKEN,
    http_api_v2_event,
    lambda_body,
    mangum_harness,
    rest_v1_event,
)

HANDLER_PATH = Path(__file__).resolve().parents[2] / "functions" / "api" / "handler.py"
JSON = {"content-type": "application/json"}
CONTEXT: Any = None  # the Lambda context: the app does not read it


def _settings() -> Settings:
    return Settings(dev=False, inspector_token=TOKEN, auth_mode="none")  # type: ignore[arg-type]


@pytest.mark.parametrize("make_event", [http_api_v2_event, rest_v1_event], ids=["http-api-v2", "rest-v1"])
def test_every_route_round_trips_through_mangum(make_event: Any) -> None:
    event = make_event
    with mangum_harness(registry, _settings()) as harness:
        def call(method: str, target: str, body: object = None, *, b64: bool = False,
                 headers: dict[str, str] | None = None) -> tuple[int, Any]:
            raw = None if body is None else json.dumps(body).encode()
            response = harness.handler(event(method, target, body=raw, headers={**JSON, **(headers or {})},
                                             base64_body=b64), CONTEXT)
            assert response["headers"]["content-type"] == "application/json"
            return response["statusCode"], lambda_body(response)

        assert call("PUT", "/actors/account/tenant~2F1,alice", {"input": {"owner": "Alice", "opening": 10}}) == (
            201, {"actor": "account", "key": ["tenant/1", "alice"], "created": True})
        assert call("PUT", "/actors/account/tenant~2F1,alice")[0] == 200
        status, body = call("POST", "/actors/account/tenant~2F1,alice/queues/deposit", {"amount": 5}, b64=True)
        assert status == 202 and body["status"] == "queued"
        status, body = call("POST", "/actors/account/tenant~2F1,alice/queues/withdraw?wait=true&timeout=5",
                            {"amount": 3}, b64=True, headers={"Idempotency-Key": "w-1"})
        assert (status, body) == (200, {"status": "completed", "id": "w-1", "response": {"ok": True, "balance": 12}})
        assert call("POST", "/actors/account/tenant~2F1,alice/actions/add", [8]) == (200, {"result": 20})
        assert call("GET", "/actors/account/tenant~2F1,alice/state") == (
            200, {"owner": "Alice", "balance": 20, "entries": [5, -3, 8]})
        status, body = call("GET", "/actors/account/tenant~2F1,alice/status")
        assert status == 200 and body["workflow"] == "sleeping"
        assert body["waiting_for"]["queues"] == ["deposit", "withdraw"]
        status, body = call("GET", "/actors/account/tenant~2F1,alice/events?after=1")
        assert (status, [e["payload"] for e in body["events"]], body["cursor"]) == (
            200, [{"balance": 12, "kind": "withdraw"}], 2)
        auth = {"authorization": f"Bearer {TOKEN}"}
        status, body = call("GET", "/actors/account/tenant~2F1,alice/history", headers=auth)
        assert status == 200 and [e["location"] for e in body][:1] == ["account-loop"]
        status, body = call("GET", "/actors/account/tenant~2F1,alice/status?history=true", headers=auth)
        assert status == 200 and len(body["history"]) >= 3
        status, body = call("GET", "/actors/account/tenant~2F1,alice/inspector/workflow-history", headers=auth)
        assert status == 200 and body["isWorkflowEnabled"] is True
        assert call("GET", "/actors/account/tenant~2F1,alice/inspector/workflow-history")[0] == 401
        assert call("GET", "/actors/nope/x/state") == (
            404, {"error": {"code": "unknown_actor", "message": "no actor type of that name is registered; known: "
                                                                f"{sorted(registry.actors)}"}})
        harness.run(harness.env.run_until_idle())
        state = harness.run(harness.env.client.get_or_create("account", ["tenant/1", "alice"]).state())
        assert state.balance == 20  # the in-process view of the same actor


def test_a_base64_body_is_decoded_byte_for_byte() -> None:
    with mangum_harness(registry, _settings()) as harness:
        note = "naïve ✓ \u00e9t\u00e9"
        body = json.dumps({"amount": 1, "note": note}, ensure_ascii=False).encode("utf-8")
        event = http_api_v2_event("POST", "/actors/account/a/queues/deposit", body=body, headers=JSON,
                                  base64_body=True)
        assert event["isBase64Encoded"] is True and event["body"] != body.decode()
        assert harness.handler(event, CONTEXT)["statusCode"] == 202
        harness.run(harness.env.run_until_idle())
        history = harness.run(harness.env.client.get_or_create("account", ["a"]).history())
        message = next(e for e in history if e.kind == "message")
        assert message.messages[0].body == {"amount": 1, "note": note}


def _load_handler(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("DORMANT_APP", "tests.api.apps:registry")
    monkeypatch.setenv("DORMANT_INSPECTOR_TOKEN", TOKEN)
    monkeypatch.setenv("DORMANT_AUTH_MODE", "none")  # the hand-built events carry no authorizer context
    spec = importlib.util.spec_from_file_location("api_handler_under_test", HANDLER_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_lambda_module_builds_the_app_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _load_handler(monkeypatch)
    assert isinstance(module.mangum, Mangum) and callable(module.handler) and isinstance(module.app, FastAPI)
    assert module.settings.inspector_token.get_secret_value() == TOKEN
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:  # routes that need no storage answer without any AWS connection (clients open on first use)
        response = module.handler(http_api_v2_event("GET", "/openapi.json"), CONTEXT)
        assert response["statusCode"] == 200
        assert "/actors/account/{key}/queues/deposit" in lambda_body(response)["paths"]
        listing = lambda_body(module.handler(http_api_v2_event("GET", "/actors"), CONTEXT))
        assert {"name": "account", "queues": ["deposit", "withdraw"], "actions": ["add", "explode", "get_state"],
                "events": ["changed"], "workflow": True, "search": {}} in listing
        denied = module.handler(http_api_v2_event("GET", "/actors/account/a/history"), CONTEXT)
        assert denied["statusCode"] == 401
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def test_the_lambda_module_refuses_to_start_without_an_app(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DORMANT_APP", raising=False)
    spec = importlib.util.spec_from_file_location("api_handler_no_app", HANDLER_PATH)
    assert spec is not None and spec.loader is not None
    with pytest.raises(RuntimeError, match="DORMANT_APP"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
