"""Request bodies: read within the size limit (before more than it is read), then parsed as JSON.

Split in two so that a route which needs the exact bytes (a signed webhook: dormant.http.callbacks) checks the
same limit and the same JSON rules as every other route."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from dormant.http.errors import ApiError
from dormant.workflow.values import check_json


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


async def read_body(request: Request, limit: int) -> bytes:
    """The body's bytes, refusing (413) one over `limit` bytes before reading more than that."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ApiError(400, "bad_request", "Content-Length must be a number")
        if int(declared) > limit:
            raise ApiError(413, "payload_too_large", f"the body has {declared} bytes; the limit is {limit}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ApiError(413, "payload_too_large", f"the body is over the limit of {limit} bytes")
    return bytes(body)


def parse_json(request: Request, body: bytes, *, required: bool) -> tuple[bool, Any]:
    """(present, value) of a JSON body: its media type, UTF-8, JSON without NaN/Infinity, what the store holds."""
    if not body.strip():
        if required:
            raise ApiError(400, "invalid_json", "a JSON body is required")
        return False, None
    content_type = request.headers.get("content-type")
    if content_type is not None:
        media = content_type.split(";", 1)[0].strip().lower()
        if media != "application/json" and not media.endswith("+json"):
            raise ApiError(415, "unsupported_media_type", f"send JSON (Content-Type: application/json), "
                                                          f"not {media or 'an empty type'}")
    try:
        value = json.loads(body, parse_constant=_reject_constant)
    except UnicodeDecodeError as error:
        raise ApiError(400, "invalid_json", f"the body is not valid UTF-8 (at byte {error.start})") from None
    except json.JSONDecodeError as error:  # its text names the position and the rule, not the input
        raise ApiError(400, "invalid_json", f"the body is not valid JSON: {error.msg} at line {error.lineno} "
                                            f"column {error.colno}") from None
    except (ValueError, RecursionError) as error:  # NaN/Infinity (see _reject_constant), too deep
        raise ApiError(400, "invalid_json", f"the body is not valid JSON: {error}"[:200]) from None
    check_json(value, "the body")  # InvalidJsonError -> 400 invalid_json, naming the path
    return True, value


async def read_json(request: Request, limit: int, *, required: bool) -> tuple[bool, Any]:
    """(present, value) of a JSON body, enforcing the size limit before reading more than it."""
    return parse_json(request, await read_body(request, limit), required=required)
