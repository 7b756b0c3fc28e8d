"""The callback routes: the one part of the API outside the callers' auth, authorized by the token alone.

    POST /callbacks/{token}           {"result": <JSON>}                       complete it      202 accepted
                                      {"error": {"type": ..., "message": ...}} fail it          202 accepted
                                      {"heartbeat": true}                      heartbeat        200 open
    GET  /callbacks/{token}                                                    where it stands  200
    POST /callbacks/{token}/webhook   <any JSON>: the whole body is the result complete it      202 accepted
    GET  /callbacks/{token}/approve   an HTML confirmation page (never completes anything)      200
    POST /callbacks/{token}/approve   form decision=approve|reject (callback(Approval) only)   200 HTML

An outside system (a payment provider's webhook, a link in an email) holds a token the workflow handed out
(`cb.token`, `cb.url`, `cb.webhook_url`, `cb.approval_url`); it knows no actor key and has no identity this API
could verify, so these routes ask for none: API Gateway routes them without an authorizer (template.yaml,
infra/api.tf), and the app never reads a caller here. What protects them is the token: 256 random bits, bound to
one callback of one actor, single use (one completion per callback: the same one again is answered as such,
another one is 409), expiring (past its timeout, a missed heartbeat, or once the workflow is past it: 410).
Errors never echo the token (nor the body); the access log shows the path with the token cut out
(dormant.http.access). The body is limited like every body, checked for JSON, shape and the declared result model
before anything is read or written. A callback declared with `verify=` also needs a valid signature of the exact
body on both POST routes (401 invalid_signature otherwise), checked before the body's shape or model.

Why a separate webhook route rather than guessing from the body: a provider's own JSON may well be an object with
a `result` key (or `error`, or `heartbeat`), so no rule on the body can tell the two forms apart; the URL the
workflow hands out says which form it expects, and every callback takes both, so the JSON API and
`dormant callback complete` keep working for a webhook callback. The logic is dormant.runtime.callbacks;
docs/http-api.md, "Callbacks", tells more.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dormant.http import approval_page
from dormant.http.bodies import parse_json, read_body
from dormant.http.errors import ApiError, ErrorBody, from_exception
from dormant.models import CallbackStatus
from dormant.runtime.callbacks import (
    MAX_ERROR_MESSAGE,
    MAX_ERROR_TYPE,
    CallbackOperations,
    SignedBody,
    check_token,
)
from dormant.runtime.service import ActorService
from dormant.workflow.callbacks import APPROVAL_SUFFIX, WEBHOOK_SUFFIX
from dormant.workflow.errors import DormantError
from dormant.workflow.values import describe_errors

GetService = Callable[[], Awaitable[ActorService]]
PATH = "/callbacks/{token}"
WEBHOOK_PATH = PATH + WEBHOOK_SUFFIX
APPROVAL_PATH = PATH + APPROVAL_SUFFIX
PATHS = (PATH, WEBHOOK_PATH, APPROVAL_PATH)
FORM = "application/x-www-form-urlencoded"
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
        (401, "the callback declares a signature check and the request's signature is missing or wrong "
              "(invalid_signature)"),
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


_PAGE_ANSWERS: dict[int | str, dict[str, Any]] = {
    code: {"description": text, "content": {"text/html": {"schema": {"type": "string"}}}} for code, text in (
        (400, "not a token, or not a form"),
        (404, "no approval callback has this token"),
        (409, "decided already, the other way"),
        (410, "over: timed out, cancelled, its actor gone or finished"),
        (413, "the body is too big"),
        (415, "not the page's form"),
        (422, "no decision=approve or decision=reject"))}


def _html_error(error: Exception) -> HTMLResponse:
    mapped = error if isinstance(error, ApiError) else from_exception(error)
    if mapped is None:
        raise error
    return approval_page.refused(mapped.status, mapped.message)


def _decision(request: Request, body: bytes) -> bool:
    """approve -> True, reject -> False, from the page's form post."""
    media = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
    if media != FORM:
        raise ApiError(415, "unsupported_media_type", "post the page's form (Content-Type: " + FORM + ")")
    try:
        fields = parse_qs(body.decode(), strict_parsing=False, max_num_fields=4)
    except (UnicodeDecodeError, ValueError):
        raise ApiError(400, "invalid_request", "the form is not valid") from None
    decision = fields.get("decision", [])
    if decision not in (["approve"], ["reject"]):
        raise ApiError(422, "invalid_request", "the form must carry decision=approve or decision=reject")
    return decision == ["approve"]


def callback_router(get_service: GetService, limit: int) -> APIRouter:
    router = APIRouter(tags=["callbacks"], responses=_ANSWERS)

    @router.post(PATH, response_model=CallbackStatus, summary="Complete, fail or heartbeat a callback",
                 openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                     "schema": {"$ref": SCHEMA_REF.format(model=CallbackRequest.__name__)}}}}})
    async def post_callback(request: Request, token: str) -> JSONResponse:
        check_token(token)  # before the body is read: 400 for what is no token at all
        raw = await read_body(request, limit)
        _, body = parse_json(request, raw, required=True)
        parsed = _parse(body)
        operations = CallbackOperations(await get_service())
        signed = SignedBody(request.headers, raw)
        if parsed.heartbeat:
            status = await operations.heartbeat(token, signed=signed)
        elif parsed.error is not None:
            status = await operations.fail(token, parsed.error.type, parsed.error.message, signed=signed)
        else:
            status = await operations.complete(token, parsed.result, signed=signed)
        return JSONResponse(status.model_dump(mode="json"), status_code=202 if status.status == "accepted" else 200)

    @router.get(PATH, response_model=CallbackStatus, summary="Where a callback stands")
    async def get_callback(token: str) -> dict[str, Any]:
        return (await CallbackOperations(await get_service()).status(token)).model_dump(mode="json")

    @router.post(WEBHOOK_PATH, response_model=CallbackStatus, summary="Complete a callback with a webhook's own body",
                 description="The whole JSON body is the result (validated against the callback's declared model): "
                             "what a provider posts to the URL it was given (`cb.webhook_url`).",
                 openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                     "schema": {}}}}})
    async def post_webhook(request: Request, token: str) -> JSONResponse:
        check_token(token)
        raw = await read_body(request, limit)
        _, body = parse_json(request, raw, required=True)
        status = await CallbackOperations(await get_service()).complete(
            token, body, signed=SignedBody(request.headers, raw))
        return JSONResponse(status.model_dump(mode="json"), status_code=202 if status.status == "accepted" else 200)

    pages = APIRouter(tags=["callbacks"], responses=_PAGE_ANSWERS)  # HTML: a person follows this link

    @pages.get(APPROVAL_PATH, response_class=HTMLResponse, summary="An approval callback's confirmation page",
                description="Shows the callback's description and Approve / Reject buttons; completes nothing.")
    async def approval(token: str) -> HTMLResponse:
        try:
            page = await CallbackOperations(await get_service()).page(token)
            if not page.approval:
                return approval_page.refused(404, "This link is not an approval link.")
        except (ApiError, DormantError) as error:
            return _html_error(error)
        return approval_page.confirmation(page.status, page.description)

    @pages.post(APPROVAL_PATH, response_class=HTMLResponse, summary="Approve or reject (the page's form)",
                 openapi_extra={"requestBody": {"required": True, "content": {FORM: {"schema": {
                     "type": "object", "required": ["decision"],
                     "properties": {"decision": {"type": "string", "enum": ["approve", "reject"]}}}}}}})
    async def decide(request: Request, token: str) -> HTMLResponse:
        try:
            check_token(token)
            approved = _decision(request, await read_body(request, limit))
            status = await CallbackOperations(await get_service()).approve(token, approved)
        except (ApiError, DormantError) as error:
            return _html_error(error)
        return approval_page.decided(approved, status)

    router.include_router(pages)
    return router
