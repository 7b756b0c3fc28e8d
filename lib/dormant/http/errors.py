"""Errors of the HTTP API: every one is a JSON body `{"error": {"code", "message", "detail"?}}`.

`ApiError` is raised by the routes; `install_error_handlers` turns it, the dormant exceptions, the
framework's own errors (unknown route, bad query parameter) and anything unexpected into that body.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from pydantic_core import to_jsonable_python
from starlette.exceptions import HTTPException as StarletteHTTPException

from dormant.errors import (
    BatchSendFailedError,
    InvalidMessageError,
    ItemTooLargeError,
    SendFailedError,
    StorageError,
    TransportError,
    WouldDivergeError,
)
from dormant.http.access import logged_path
from dormant.http.error_codes import ERROR_CODES
from dormant.workflow.errors import InvalidJsonError

log = logging.getLogger("dormant.http")


class ErrorInfo(BaseModel):
    code: str
    message: str
    detail: Any = None


class ErrorBody(BaseModel):
    """The body of every error response."""

    error: ErrorInfo


class ApiError(Exception):
    """An error answer: HTTP status, a stable machine-readable code and a message for humans."""

    def __init__(self, status: int, code: str, message: str, *, detail: Any = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.detail = detail
        self.headers = headers


# Dormant exceptions a route lets through, and what they mean over HTTP: dormant.http.error_codes.
_MAPPING = ERROR_CODES


RETRY_AFTER_SECONDS = 1
# Errors of the storage and queue services: their own texts may quote request values (DynamoDB's validation
# messages do), so clients get these instead; the logs keep the original.
_UNAVAILABLE = {
    "storage_unavailable": "the store is unavailable; nothing was changed or it is safe to retry",
    "refused_by_store": "the store refused to hold this value (nothing was changed): a limit Dormant does not check "
                        "yet; the API's log has the store's own message",
    "queue_unavailable": "the wake-up queue is unavailable; nothing was sent, retry",
}


def from_exception(error: Exception) -> ApiError | None:
    """The ApiError for a dormant exception, or None if it is not one the API maps."""
    for kind, status, code in _MAPPING:
        if isinstance(error, kind):
            detail: Any = None
            message = str(error)
            if isinstance(error, InvalidMessageError):
                detail = to_jsonable_python(error.errors, fallback=str)
            elif isinstance(error, InvalidJsonError):
                detail = {"path": error.path, "rule": error.rule}
            elif isinstance(error, ItemTooLargeError) and error.limit is not None:
                detail = {"limit": error.limit.name, "maximum": error.limit.maximum, "unit": error.limit.unit}
            elif isinstance(error, BatchSendFailedError):
                detail = {"stored": error.stored_ids, "unstored": error.unstored_ids}
            elif isinstance(error, SendFailedError):
                detail = {"id": error.message_id, "stored": error.stored}
            elif isinstance(error, WouldDivergeError):  # the diff, as still_diverged carries it
                detail = error.divergence
            elif isinstance(error, (StorageError, TransportError)) and code in _UNAVAILABLE:
                log.warning("%s: %s", code, error)
                message = _UNAVAILABLE[code]
            headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 503 else None
            return ApiError(status, code, message, detail=detail, headers=headers)
    return None


def error_response(error: ApiError) -> JSONResponse:
    body = ErrorBody(error=ErrorInfo(code=error.code, message=error.message, detail=error.detail))
    return JSONResponse(body.model_dump(mode="json", exclude_none=True), status_code=error.status,
                        headers=error.headers)


_STATUS_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                 405: "method_not_allowed", 413: "payload_too_large", 415: "unsupported_media_type"}


def install_error_handlers(app: FastAPI) -> None:
    async def on_api_error(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, ApiError)
        return error_response(error)

    async def on_http_error(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, StarletteHTTPException)
        code = _STATUS_CODES.get(error.status_code, "http_error")
        message = "no such route" if error.status_code == 404 else str(error.detail)
        if error.status_code == 404 and request.url.path.endswith("/") and request.url.path != "/":
            message += ": paths end without a slash"  # (no redirect: see create_app)
        # (The path is not repeated: errors never echo what a client sent.)
        return error_response(ApiError(error.status_code, code, f"{message} (method {request.method})",
                                       headers=dict(error.headers or {})))

    async def on_validation_error(request: Request, error: Exception) -> JSONResponse:
        assert isinstance(error, RequestValidationError)
        errors = [{k: v for k, v in e.items() if k not in ("input", "url")} for e in error.errors()]
        return error_response(ApiError(422, "invalid_request", "invalid request parameters",
                                       detail=to_jsonable_python(errors, fallback=str)))

    async def on_dormant_error(request: Request, error: Exception) -> JSONResponse:
        mapped = from_exception(error)
        if mapped is None:
            return await on_unexpected(request, error)
        return error_response(mapped)

    async def on_unexpected(request: Request, error: Exception) -> JSONResponse:
        # the logged path: a callback's token is its authorization, and logs are read by others
        log.exception("unhandled error in %s %s", request.method, logged_path(request.url.path), exc_info=error)
        return error_response(ApiError(500, "internal", "internal error; see the API's logs"))

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    for kind, _, _ in _MAPPING:
        app.add_exception_handler(kind, on_dormant_error)
    app.add_exception_handler(Exception, on_unexpected)
