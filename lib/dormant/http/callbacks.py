"""The callback routes: the one part of the API outside the callers' auth, authorized by the token alone.

    POST /callbacks/{token}   {"result": <JSON>}                          complete it    202 accepted
                              {"error": {"type": "...", "message": "..."}} fail it        202 accepted
                              {"heartbeat": true}                          heartbeat      200 open
    GET  /callbacks/{token}                                                where it stands 200

An outside system (a payment provider's webhook, a link in an email) holds a token the workflow handed out
(`cb.token`, `cb.url`); it knows no actor key and has no identity this API could verify, so these routes ask for
none: API Gateway routes them without an authorizer (template.yaml, infra/api.tf), and the app never reads a
caller here. What protects them is the token: 256 random bits, bound to one callback of one actor, single use
(one completion per callback: the same one again is answered as such, another one is 409), expiring (past its
timeout, a missed heartbeat, or once the workflow is past it: 410). Errors never echo the token (nor the body);
the access log shows the path with the token cut out (dormant.http.access). The body is limited like every
body, checked for JSON, shape and the declared result model before anything is read or written. The logic is
dormant.runtime.callbacks; docs/http-api.md, "Callbacks", tells more.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dormant.http.errors import ApiError, ErrorBody
from dormant.models import CallbackStatus
from dormant.runtime.callbacks import MAX_ERROR_MESSAGE, MAX_ERROR_TYPE, CallbackOperations, check_token
from dormant.runtime.service import ActorService
from dormant.workflow.values import describe_errors

GetService = Callable[[], Awaitable[ActorService]]
ReadJson = Callable[[Request], Awaitable[tuple[bool, Any]]]
PATH = "/callbacks/{token}"
SCHEMA_REF = "#/components/schemas/{model}"


class CallbackErrorBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str = Field(min_length=1, max_length=MAX_ERROR_TYPE, description="What failed, e.g. PaymentDeclined")
    message: str = Field("", max_length=MAX_ERROR_MESSAGE)


class CallbackRequest(BaseModel):
    """Exactly one of `result` (complete), `error` (fail) or `heartbeat: true`."""

    model_config = ConfigDict(extra="forbid")

    result: Any = Field(None, description="The result: validated against the callback's declared model")
    error: CallbackErrorBody | None = None
    heartbeat: Literal[True] | None = None


def request_schemas() -> dict[str, dict[str, Any]]:
    """The request body's schema and the models it refers to, as the OpenAPI document's components: `POST
    /callbacks/{token}` refers to `#/components/schemas/CallbackRequest` (dormant.http.app adds these)."""
    schema = CallbackRequest.model_json_schema(ref_template=SCHEMA_REF)
    return {**schema.pop("$defs", {}), CallbackRequest.__name__: schema}


_ANSWERS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text} for code, text in (
        (400, "not a token (invalid_callback_token), or not JSON (invalid_json)"),
        (404, "no callback has this token (callback_not_found)"),
        (409, "completed already with another result (callback_completed)"),
        (410, "over: timed out, cancelled, its actor gone or finished (callback_expired)"),
        (413, "the body is too big (payload_too_large)"),
        (422, "the body is not one of the three forms (invalid_request), or the result does not fit the "
              "declared model (invalid_body)"))}


def _parse(body: Any) -> CallbackRequest:
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_request", 'the body must be a JSON object: {"result": ...}, {"error": {"type": '
                                               '..., "message": ...}} or {"heartbeat": true}')
    try:
        parsed = CallbackRequest.model_validate(body)
    except ValidationError as error:  # the fields and rules, never the values
        raise ApiError(422, "invalid_request", 'the body must be {"result": ...}, {"error": {"type": ..., '
                                               f'"message": ...}} or {{"heartbeat": true}}: {describe_errors(error)}',
                       detail=error.errors(include_url=False, include_input=False)) from None
    if len(parsed.model_fields_set) != 1:
        raise ApiError(422, "invalid_request", "give exactly one of result, error and heartbeat")
    if ("error" in parsed.model_fields_set and parsed.error is None) or \
            ("heartbeat" in parsed.model_fields_set and parsed.heartbeat is None):
        raise ApiError(422, "invalid_request", 'error must be {"type": ..., "message": ...} and heartbeat true')
    return parsed


def callback_router(get_service: GetService, read_json: ReadJson) -> APIRouter:
    router = APIRouter(tags=["callbacks"], responses=_ANSWERS)

    @router.post(PATH, response_model=CallbackStatus, summary="Complete, fail or heartbeat a callback",
                 openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                     "schema": {"$ref": SCHEMA_REF.format(model=CallbackRequest.__name__)}}}}})
    async def post_callback(request: Request, token: str) -> JSONResponse:
        check_token(token)  # before the body is read: 400 for what is no token at all
        _, body = await read_json(request)
        parsed = _parse(body)
        operations = CallbackOperations(await get_service())
        if parsed.heartbeat:
            status = await operations.heartbeat(token)
        elif parsed.error is not None:
            status = await operations.fail(token, parsed.error.type, parsed.error.message)
        else:
            status = await operations.complete(token, parsed.result)
        return JSONResponse(status.model_dump(mode="json"), status_code=202 if status.status == "accepted" else 200)

    @router.get(PATH, response_model=CallbackStatus, summary="Where a callback stands")
    async def get_callback(token: str) -> dict[str, Any]:
        return (await CallbackOperations(await get_service()).status(token)).model_dump(mode="json")

    return router
