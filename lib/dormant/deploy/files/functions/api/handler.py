"""API Lambda entry point: the HTTP API (dormant.http.app) behind API Gateway, through Mangum, and the WebSocket
API's routes ($connect, $default, $disconnect: dormant.aws.realtime, docs/realtime.md; an action frame runs the HTTP
action route's own path, dormant.http.actions).

Configuration comes from the environment (dormant.settings.Settings): DORMANT_APP names the registry
(`module:attribute`), DORMANT_TABLE / DORMANT_QUEUE_* the resources, DORMANT_AUTH_MODE how API Gateway
authenticated the caller, DORMANT_INSPECTOR_TOKEN_PARAMETER the SSM parameter holding the operator token
(read at run time). The AWS clients are opened at init (when the queue URLs are given) and reused by the
container. A request the API answered with an error, or slowly, is logged as one JSON record (dormant.http.access
through dormant.aws.telemetry); the others as sampled by DORMANT_REQUEST_LOG_SAMPLE (none by default: the API
stage's access log records every request).
"""

from __future__ import annotations

from typing import Any

from mangum import Mangum

from dormant.actor import load_registry
from dormant.aws.clients import function_settings, inline_calls
from dormant.aws.prewarm import open_api_service
from dormant.aws.realtime import LambdaRealtime, is_websocket_event
from dormant.aws.telemetry import lambda_telemetry
from dormant.http.access import AccessLog
from dormant.http.actions import SocketActions
from dormant.http.app import create_app
from dormant.http.large_responses import LAMBDA_RESPONSE_BYTES

settings = function_settings()  # botocore's clients in threads: no aiohttp at a cold start (dormant.aws.clients)
telemetry = lambda_telemetry("dormant-api", settings=settings)
if settings.max_response_bytes is None:  # a Lambda response is at most 6 MB: bigger ones go through S3
    settings = settings.model_copy(update={"max_response_bytes": LAMBDA_RESPONSE_BYTES})
if not settings.app:
    raise RuntimeError("set DORMANT_APP=module:attribute to the registry the API serves")
registry = load_registry(settings.app)
app = create_app(registry, settings)
sample = settings.request_log_sample
mangum = Mangum(AccessLog(app, sample=0.0 if sample is None else sample, slow_ms=settings.request_log_slow_ms),
                lifespan="off")
realtime = LambdaRealtime(registry, settings,  # its clients are made at its first event (the service: first action)
                          actions=lambda service: SocketActions(registry, settings, service))


def route(event: Any, context: Any) -> Any:
    if is_websocket_event(event):
        return realtime(event, context)
    # An invocation owns this thread's event loop (Mangum's): its DynamoDB and SQS requests, one after another, are
    # made on it rather than handed to a pool thread and back each (dormant.core.clients.inline_calls)
    with inline_calls():
        return mangum(event, context)


handler = telemetry.handler(route)  # request ids on every log line
open_api_service(app, settings)  # the session and clients in the init phase (kept by a SnapStart snapshot)
