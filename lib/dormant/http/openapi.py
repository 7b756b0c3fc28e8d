"""The OpenAPI document of the HTTP API, generated from the registry.

The routes are generic (`/actors/{actor}/{key}/queues/{queue}`), but the document lists every
actor, queue and action as its own path with the actor's pydantic models: queue bodies as request
bodies, queue responses, state, action arguments and results, event payloads. One schema set is
built with `TypeAdapter.json_schemas`, so models are shared components and same-named models of
different modules do not collide.
"""

from __future__ import annotations

import inspect
from collections.abc import Hashable
from typing import Any

from pydantic import TypeAdapter

from dormant.actor import ActorDefinition, Registry
from dormant.http.errors import ErrorBody
from dormant.http.inspector import WorkflowHistoryResponse
from dormant.models import ActorStatus
from dormant.ports import EventRecord
from dormant.runtime.batches import MAX_BATCH
from dormant.workflow.history import HistoryEntry

REF_TEMPLATE = "#/components/schemas/{model}"
KEY_PARAMETER = {
    "name": "key", "in": "path", "required": True, "schema": {"type": "string"}, "example": "main",
    "description": "The actor key: parts joined by ',', each part's bytes outside A-Z a-z 0-9 - . _ "
                   "written ~XX (see docs/http-api.md). `main` is [\"main\"], `tenant,42` is [\"tenant\", \"42\"].",
}
BEARER: list[dict[str, list[str]]] = [{"bearer": []}]


RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before retrying", "schema": {"type": "integer"}}}


def _error_responses(schemas: _Schemas, *statuses: int) -> dict[str, Any]:
    text = {400: "Malformed request (bad key, bad JSON, a value the store cannot hold)",
            401: "Missing or wrong bearer token",
            404: "Unknown actor, queue or action, or the actor does not exist yet",
            409: "The actor's workflow has completed (actor_finished), or the Idempotency-Key was used for "
                 "another message (idempotency_conflict)",
            413: "Body over the size limit", 415: "Body is not JSON",
            422: "Body, arguments or parameters fail validation",
            503: "Storage or queue unavailable, or busy: retry after Retry-After seconds (a send says in "
                 "`detail.stored` whether its message was stored; retry it with the same Idempotency-Key)"}
    responses: dict[str, Any] = {}
    for status in statuses:
        responses[str(status)] = {"description": text[status],
                                  "content": {"application/json": {"schema": schemas["ErrorBody"]}}}
        if status == 503:
            responses[str(status)]["headers"] = RETRY_AFTER
    responses["default"] = {"description": "Any other error (e.g. 405 method not allowed)",
                            "content": {"application/json": {"schema": schemas["ErrorBody"]}}}
    return responses


def _action_signature(definition: ActorDefinition, action: str) -> tuple[list[Any], int, Any, Any]:
    """(parameter types, required count, variadic element type or None, return type) of an action."""
    signature = definition.action_signature(action)
    variadic = signature.variadic.annotation if signature.variadic is not None else None
    return [p.annotation for p in signature.positional], signature.required, variadic, signature.returns


class _Schemas:
    """Collects (type, mode) pairs, then resolves them all at once into schemas + shared components."""

    def __init__(self) -> None:
        self._inputs: list[tuple[Hashable, Any, TypeAdapter[Any]]] = []
        self.resolved: dict[Hashable, dict[str, Any]] = {}
        self.components: dict[str, Any] = {}

    def add(self, key: Hashable, tp: Any, mode: str) -> None:
        try:
            adapter: TypeAdapter[Any] = TypeAdapter(tp)
            adapter.json_schema(mode=mode)  # type: ignore[arg-type]
        except Exception:  # not describable in JSON Schema: document it as "any"
            adapter = TypeAdapter(Any)
        self._inputs.append((key, mode, adapter))

    def resolve(self) -> None:
        mapping, definitions = TypeAdapter.json_schemas(self._inputs, ref_template=REF_TEMPLATE)
        self.resolved = {key: schema for (key, _), schema in mapping.items()}
        self.components = dict(definitions.get("$defs", {}))

    def __getitem__(self, key: Hashable) -> dict[str, Any]:
        return self.resolved[key]


def _collect(registry: Registry) -> _Schemas:
    schemas = _Schemas()
    for model in (ErrorBody, ActorStatus, EventRecord, WorkflowHistoryResponse):
        schemas.add(model.__name__, model, "serialization")
    schemas.add("History", list[HistoryEntry], "serialization")
    for name, definition in registry.actors.items():
        schemas.add((name, "state"), definition.state, "serialization")
        for queue_name, spec in definition.queues.items():
            schemas.add((name, "queue", queue_name), spec.body, "validation")
            schemas.add((name, "response", queue_name), spec.response if spec.response is not None else Any,
                        "serialization")
        for action_name in definition.actions:
            types, _, variadic, returns = _action_signature(definition, action_name)
            for index, tp in enumerate(types):
                schemas.add((name, "arg", action_name, index), tp, "validation")
            if variadic is not None:
                schemas.add((name, "rest", action_name), variadic, "validation")
            schemas.add((name, "result", action_name), returns, "serialization")
        for event_name, event_spec in definition.events.items():
            schemas.add((name, "event", event_name), event_spec.payload, "serialization")
    schemas.resolve()
    return schemas


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _actor_paths(definition: ActorDefinition, schemas: _Schemas) -> dict[str, Any]:
    name = definition.name
    base = f"/actors/{name}/{{key}}"
    tags = [name]
    paths: dict[str, Any] = {}

    def op(summary: str, operation_id: str, **extra: Any) -> dict[str, Any]:
        return {"tags": tags, "summary": summary, "operationId": f"{name}:{operation_id}",
                "parameters": [KEY_PARAMETER, *extra.pop("parameters", [])], **extra}

    paths[base] = {"put": op(
        "Get or create the actor", "create",
        description="With `If-None-Match: *`, create only: 409 actor_exists if it exists (client.create).",
        parameters=[{"name": "If-None-Match", "in": "header", "schema": {"const": "*"},
                     "description": "*: refuse (409 actor_exists) instead of getting an existing actor"}],
        requestBody={"required": False, "content": {"application/json": {"schema": {
            "type": "object", "properties": {"input": {"description": "The actor's input (create only)"}},
            "additionalProperties": False}}}},
        responses={"200": _json(_ref_actor_info(), "It existed"), "201": _json(_ref_actor_info(), "Created"),
                   **_error_responses(schemas, 400, 404, 409, 413, 415, 422, 503)})}
    no_create = {"name": "create", "in": "query", "schema": {"type": "boolean", "default": True},
                 "description": "false: never create the actor (404 actor_not_found if it does not exist)"}
    for queue_name in definition.queues:
        response = schemas[(name, "response", queue_name)]
        paths[f"{base}/queues/{queue_name}"] = {"post": op(
            f"Send to queue {queue_name}", f"send:{queue_name}",
            parameters=[
                {"name": "wait", "in": "query", "schema": {"type": "boolean", "default": False},
                 "description": "Wait for the workflow to complete() the message"},
                {"name": "timeout", "in": "query", "schema": {"type": "number", "exclusiveMinimum": 0},
                 "description": "Seconds to wait (capped by the server's limit, default that limit)"},
                {"name": "Idempotency-Key", "in": "header", "schema": {"type": "string", "maxLength": 128},
                 "description": "Message id: a re-sent id is stored once and answered with the same response"},
                no_create],
            requestBody={"required": True, "content": {"application/json": {
                "schema": schemas[(name, "queue", queue_name)]}}},
            responses={
                "202": _json({"type": "object", "required": ["status", "id"], "properties": {
                    "status": {"const": "queued"}, "id": {"type": "string"},
                    "workflow": {"enum": ["failed", "diverged", "rolling_back", "paused", "completed", "terminated"],
                                 "description": "Set when the workflow has stopped on an error or is paused (the "
                                                "message is stored and runs after an operator resumes or "
                                                "unpauses the actor) or, during a wait, ended (it never runs)"}}},
                    "Queued"),
                "200": _json({"type": "object", "required": ["status", "id"], "properties": {
                    "status": {"enum": ["completed", "received", "timedOut"]}, "id": {"type": "string"},
                    "response": response,
                    "workflow": {"enum": ["failed", "diverged", "rolling_back", "paused", "completed", "terminated"],
                                 "description": "With received: the workflow took the message, then stopped "
                                                "or ended without answering"}}},
                    "Completed (with the response), received without an answer, or timed out"),
                **_error_responses(schemas, 400, 404, 409, 413, 415, 422, 503)})}
        paths[f"{base}/queues/{queue_name}/batch"] = {"post": op(
            f"Send many messages to queue {queue_name}", f"send_many:{queue_name}",
            description=f"Up to {MAX_BATCH} messages in one request, stored in order; all are checked first (one "
                        "invalid body refuses the batch, naming its index). Ids are idempotency keys, for every "
                        "message or for none.",
            parameters=[no_create],
            requestBody={"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["messages"], "additionalProperties": False, "properties": {
                    "messages": {"type": "array", "minItems": 1, "maxItems": MAX_BATCH, "items": {
                        "type": "object", "required": ["body"], "additionalProperties": False, "properties": {
                            "body": schemas[(name, "queue", queue_name)],
                            "id": {"type": "string", "minLength": 1, "maxLength": 128}}}}}}}}},
            responses={
                "202": _json({"type": "object", "required": ["status", "ids"], "properties": {
                    "status": {"const": "queued"}, "ids": {"type": "array", "items": {"type": "string"}},
                    "workflow": {"enum": ["failed", "diverged", "rolling_back"],
                                 "description": "Set when the workflow has stopped on an error: the messages are "
                                                "stored and run after an operator resumes the actor"}}}, "Queued"),
                **_error_responses(schemas, 400, 404, 409, 413, 415, 422, 503)})}
    for action_name, fn in definition.actions.items():
        types, required, variadic, _ = _action_signature(definition, action_name)
        args: dict[str, Any] = {"type": "array", "minItems": required}
        if types:  # (an empty prefixItems is not valid JSON Schema for client generators)
            args["prefixItems"] = [schemas[(name, "arg", action_name, i)] for i in range(len(types))]
        if variadic is None:
            args["maxItems"] = len(types)
        else:
            args["items"] = schemas[(name, "rest", action_name)]
        paths[f"{base}/actions/{action_name}"] = {"post": op(
            f"Call action {action_name}", f"call:{action_name}",
            description=inspect.getdoc(fn) or "",
            parameters=[no_create],
            requestBody={"required": False, "content": {"application/json": {"schema": args}}},
            responses={"200": _json({"type": "object", "properties": {
                "result": schemas[(name, "result", action_name)]}, "required": ["result"]}),
                       "500": _json(schemas["ErrorBody"], "The action raised, or left the state invalid (code "
                                                          "action_failed); nothing was committed"),
                       **_error_responses(schemas, 400, 404, 413, 415, 422, 503)})}
    paths[f"{base}/state"] = {"get": op("Read the state", "state", responses={
        "200": _json(schemas[(name, "state")]), **_error_responses(schemas, 400, 404, 503)})}
    paths[f"{base}/status"] = {"get": op(
        "Read the workflow status", "status",
        parameters=[{"name": "history", "in": "query", "schema": {"type": "boolean", "default": False},
                     "description": "Include the history (needs the bearer token)"}],
        responses={"200": _json(schemas["ActorStatus"]), **_error_responses(schemas, 400, 401, 404, 503)})}
    paths[f"{base}/history"] = {"get": op("Read the workflow history", "history", security=BEARER, responses={
        "200": _json(schemas["History"]), **_error_responses(schemas, 400, 401, 404, 503)})}
    event_schema: dict[str, Any] = schemas["EventRecord"]
    if definition.events:
        event_schema = {"oneOf": [{"type": "object", "properties": {
            "seq": {"type": "integer"}, "name": {"const": event_name}, "at": {"type": "number"},
            "payload": schemas[(name, "event", event_name)]}} for event_name in definition.events]}
    paths[f"{base}/events"] = {"get": op(
        "Read or long-poll events after a cursor", "events",
        parameters=[
            {"name": "after", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": 0},
             "description": "Cursor: the seq of the last event seen"},
            {"name": "wait", "in": "query", "schema": {"type": "number", "minimum": 0, "default": 0},
             "description": "Seconds to wait for the first new event (capped by the server's limit)"},
            {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}],
        responses={"200": _json({"type": "object", "properties": {
            "events": {"type": "array", "items": event_schema}, "cursor": {"type": "integer"}}}),
            **_error_responses(schemas, 400, 404, 503)})}
    paths[f"{base}/inspector/workflow-history"] = {"get": op(
        "Inspector: workflow history", "inspector-history", security=BEARER,
        responses={"200": _json(schemas["WorkflowHistoryResponse"]), **_error_responses(schemas, 400, 401, 404, 503)})}
    paths[f"{base}/inspector/export"] = {"get": op(
        "Inspector: export the history as JSON lines (for `dormant replay`)", "inspector-export", security=BEARER,
        responses={"200": {"description": "one actor header line, then one line per history entry",
                           "content": {"application/x-ndjson": {"schema": {"type": "string"}}}},
                   **_error_responses(schemas, 400, 401, 404, 503)})}
    return paths


def _ref_actor_info() -> dict[str, Any]:
    return {"type": "object", "properties": {"actor": {"type": "string"},
                                             "key": {"type": "array", "items": {"type": "string"}},
                                             "created": {"type": "boolean"}}}


def build_openapi(registry: Registry, *, title: str, version: str, description: str = "") -> dict[str, Any]:
    schemas = _collect(registry)
    paths: dict[str, Any] = {"/actors": {"get": {
        "summary": "List the actor types with their queues, actions and events", "operationId": "list-actors",
        "responses": {"200": _json({"type": "array", "items": {"type": "object"}})}}}}
    for definition in registry.actors.values():
        paths.update(_actor_paths(definition, schemas))
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version, "description": description},
        "paths": paths,
        "components": {
            "schemas": schemas.components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "DORMANT_INSPECTOR_TOKEN (not needed in dev mode)"}},
        },
    }
