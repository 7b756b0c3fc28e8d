"""The OpenAPI document of the HTTP API, generated from the registry.

The routes are generic (`/actors/{actor}/{key}/queues/{queue}`), but the document lists every
actor, queue and action as its own path with the actor's pydantic models: queue bodies as request
bodies, queue responses, state, action arguments and results, event payloads. One schema set is
built with `TypeAdapter.json_schemas`, so models are shared components and same-named models of
different modules do not collide.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable
from typing import Any, get_type_hints

from pydantic import TypeAdapter

from dormant.actor import ActorDefinition, Registry
from dormant.http.errors import ErrorBody
from dormant.http.inspector import WorkflowHistoryResponse
from dormant.models import ActorStatus
from dormant.ports import EventRecord
from dormant.workflow.history import HistoryEntry

REF_TEMPLATE = "#/components/schemas/{model}"
KEY_PARAMETER = {
    "name": "key", "in": "path", "required": True, "schema": {"type": "string"},
    "description": "The actor key: parts joined by ',', each part's bytes outside A-Z a-z 0-9 - . _ "
                   "written ~XX (see docs/http-api.md). `main` is [\"main\"], `tenant,42` is [\"tenant\", \"42\"].",
}
BEARER: list[dict[str, list[str]]] = [{"bearer": []}]


def _error_responses(schemas: _Schemas, *statuses: int) -> dict[str, Any]:
    text = {400: "Malformed request (bad key, bad JSON)", 401: "Missing or wrong bearer token",
            404: "Unknown actor, queue or action, or the actor does not exist yet", 413: "Body over the size limit",
            415: "Body is not JSON", 422: "Body or parameters fail validation", 503: "Storage busy; retry"}
    return {str(s): {"description": text[s], "content": {"application/json": {
        "schema": schemas["ErrorBody"]}}} for s in statuses}


def _action_signature(fn: Callable[..., Any]) -> tuple[list[Any], int, bool, Any]:
    """(parameter types, required count, variadic?, return type) of an action, context excluded."""
    try:
        hints = get_type_hints(fn)
    except Exception:  # unresolvable annotations (e.g. local classes): document them as "any"
        hints = {}
    params = list(inspect.signature(fn).parameters.values())[1:]
    types, required, variadic = [], 0, False
    for param in params:
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            variadic = True
            continue
        if param.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_KEYWORD):
            continue
        types.append(hints.get(param.name, Any))
        if param.default is inspect.Parameter.empty:
            required += 1
    return types, required, variadic, hints.get("return", Any)


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
        for action_name, fn in definition.actions.items():
            types, _, _, returns = _action_signature(fn)
            for index, tp in enumerate(types):
                schemas.add((name, "arg", action_name, index), tp, "validation")
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
        requestBody={"required": False, "content": {"application/json": {"schema": {
            "type": "object", "properties": {"input": {"description": "The actor's input (create only)"}},
            "additionalProperties": False}}}},
        responses={"200": _json(_ref_actor_info(), "It existed"), "201": _json(_ref_actor_info(), "Created"),
                   **_error_responses(schemas, 400, 404, 413, 422)})}
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
                 "description": "Message id: a re-sent id is stored once and answered with the same response"}],
            requestBody={"required": True, "content": {"application/json": {
                "schema": schemas[(name, "queue", queue_name)]}}},
            responses={
                "202": _json({"type": "object", "properties": {"status": {"const": "queued"},
                                                                "id": {"type": "string"}}}, "Queued"),
                "200": _json({"type": "object", "properties": {
                    "status": {"enum": ["completed", "timedOut"]}, "id": {"type": "string"},
                    "response": response}}, "Completed (with the response) or timed out"),
                **_error_responses(schemas, 400, 404, 413, 415, 422, 503)})}
    for action_name, fn in definition.actions.items():
        types, required, variadic, _ = _action_signature(fn)
        args: dict[str, Any] = {"type": "array", "minItems": required,
                                "prefixItems": [schemas[(name, "arg", action_name, i)] for i in range(len(types))]}
        if not variadic:
            args["maxItems"] = len(types)
        paths[f"{base}/actions/{action_name}"] = {"post": op(
            f"Call action {action_name}", f"call:{action_name}",
            description=inspect.getdoc(fn) or "",
            requestBody={"required": False, "content": {"application/json": {"schema": args}}},
            responses={"200": _json({"type": "object", "properties": {
                "result": schemas[(name, "result", action_name)]}, "required": ["result"]}),
                       "500": _json(schemas["ErrorBody"], "The action raised (code action_failed)"),
                       **_error_responses(schemas, 400, 404, 413, 415, 422, 503)})}
    paths[f"{base}/state"] = {"get": op("Read the state", "state", responses={
        "200": _json(schemas[(name, "state")]), **_error_responses(schemas, 400, 404)})}
    paths[f"{base}/status"] = {"get": op(
        "Read the workflow status", "status",
        parameters=[{"name": "history", "in": "query", "schema": {"type": "boolean", "default": False},
                     "description": "Include the history (needs the bearer token)"}],
        responses={"200": _json(schemas["ActorStatus"]), **_error_responses(schemas, 400, 401, 404)})}
    paths[f"{base}/history"] = {"get": op("Read the workflow history", "history", security=BEARER, responses={
        "200": _json(schemas["History"]), **_error_responses(schemas, 400, 401, 404)})}
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
            **_error_responses(schemas, 400, 404)})}
    paths[f"{base}/inspector/workflow-history"] = {"get": op(
        "Inspector: workflow history", "inspector", security=BEARER,
        responses={"200": _json(schemas["WorkflowHistoryResponse"]), **_error_responses(schemas, 400, 401, 404)})}
    paths[f"{base}/inspector/export"] = {"get": op(
        "Inspector: export the history as JSON lines (for `dormant replay`)", "inspector", security=BEARER,
        responses={"200": {"description": "one actor header line, then one line per history entry",
                           "content": {"application/x-ndjson": {"schema": {"type": "string"}}}},
                   **_error_responses(schemas, 400, 401, 404)})}
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
